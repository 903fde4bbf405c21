"""Certificates: the PKI (issue, read, write) and the self-managed rotation in the cluster."""
