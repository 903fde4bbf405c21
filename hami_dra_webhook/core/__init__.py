"""The pure translation core: no I/O, no server framework, no Kubernetes client."""
