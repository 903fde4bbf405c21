"""Command-line shells over the translation core."""
