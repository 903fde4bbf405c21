"""Cluster-side services over the API port: cluster state, the template store, template GC."""
