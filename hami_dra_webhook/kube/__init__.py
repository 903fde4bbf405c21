"""The Kubernetes API: the port (what the webhook needs, as a Protocol) and its adapter."""
