"""The node monitor (`hami-dra-webhook monitor`): on each node the DRA driver serves, it reads
the HAMi-core region of every claim the driver prepared, names its pod and containers from the
cluster, exports HAMi's per-container metrics for it, and runs HAMi's feedback loop
(docs/node-monitor.md). The files are the tenants' to write; whose a file is comes from the
cluster only."""
