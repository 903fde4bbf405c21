"""The HTTPS admission server: thin shells (settings, TLS, metrics, logs, FastAPI app)."""
