"""Migration tooling and the CLI: dry-run, scan, convert, check."""
