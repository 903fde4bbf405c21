"""hami-dra-webhook: run HAMi legacy GPU manifests unchanged on Kubernetes DRA."""

__version__ = "0.2.0"
