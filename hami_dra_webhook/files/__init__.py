"""Local files: manifests and the HAMi device-config policy."""
