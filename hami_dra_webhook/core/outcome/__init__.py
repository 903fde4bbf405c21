"""What the core decides for a pod (`Decision`) and what a container asks of a DRA driver
(`DeviceAsk`)."""
