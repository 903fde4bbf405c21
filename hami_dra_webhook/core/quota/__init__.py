"""GPU quotas: the device groups kept, what each pod is charged, which held pods fit."""
