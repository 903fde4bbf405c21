"""Reading a webhook's /metrics as Prometheus clients do (prometheus_client's own parser), not by
matching text."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def sample_sum(text: str, name: str, **labels: str) -> float:
    """The sum of the samples named `name` (a counter's `_total` included) whose labels include
    `labels`; 0 when there is none."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != name:
                continue
            if all(sample.labels.get(key) == value for key, value in labels.items()):
                total += float(sample.value)
    return total


def samples_by(text: str, name: str, label: str) -> dict[str, float]:
    """The samples named `name`, summed by the value of their `label`."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and label in sample.labels:
                value = sample.labels[label]
                found[value] = found.get(value, 0.0) + float(sample.value)
    return found
