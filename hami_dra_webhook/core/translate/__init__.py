"""One pod in, one decision out: checks, claims, patches, and what the tools say beside it."""
