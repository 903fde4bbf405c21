"""The policy: HAMi's device-config.yaml and this webhook's settings beside it."""
