"""Workloads converted at their own admission (Volcano Jobs)."""
