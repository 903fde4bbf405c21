"""The Helm chart and the container image."""
