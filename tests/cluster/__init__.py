"""Cluster-side services against the real control plane: admission, template store, GC, self-managed certificates."""
