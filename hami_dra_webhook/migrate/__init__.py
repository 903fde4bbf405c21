"""Migration tooling: what a cluster or a manifest tree will become (scan), converted sources
(convert), and whether a cluster is ready (check)."""
