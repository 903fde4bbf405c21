"""A ResourceSlice read once into its view (core/model/slice_view.py): the driver's slice read
whole, anything else read as less, never an error, and bounded by the API's limits."""

from __future__ import annotations

from typing import Any

import pytest

from hami_dra_webhook.core.model.slice_view import MAX_DEVICES, SliceDevice, SliceView
from hami_dra_webhook.core.quota.quota_groups import largest_memory_mib, most_devices_per_node

DRIVER = "gpu.project-hami.io"
SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-1-gpu"},
    "spec": {
        "driver": DRIVER,
        "nodeName": "node-1",
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {
                "name": "hami-gpu-0",
                "attributes": {
                    "uuid": {"string": "GPU-0"},
                    "index": {"int": 0},
                    "mig": {"bool": False},
                    "driverVersion": {"version": "1.2.3"},
                },
                "capacity": {"memory": {"value": "24Gi"}, "cores": {"value": "100"}},
            },
            {"name": "hami-gpu-1", "capacity": {"memory": {"value": "80Gi"}}},
        ],
    },
}


def test_a_slice_as_the_driver_publishes_it() -> None:
    view = SliceView.of(SLICE)
    assert (view.driver, view.node_name, view.pool) == (DRIVER, "node-1", "node-1")
    first, second = view.devices
    assert first == SliceDevice(
        "hami-gpu-0",
        {"memory": "24Gi", "cores": "100"},
        {"uuid": "GPU-0", "index": 0, "mig": False, "driverVersion": "1.2.3"},
    )
    assert first.text("uuid") == "GPU-0" and first.text("index") == ""
    assert second.capacity == {"memory": "80Gi"}
    assert most_devices_per_node([SLICE], DRIVER) == 2
    assert largest_memory_mib([SLICE], DRIVER) == 80 * 1024


@pytest.mark.parametrize(
    "resource_slice",
    [
        None,
        {"spec": []},
        {"spec": {"driver": DRIVER, "devices": "all"}},
        {"spec": {"driver": DRIVER, "devices": [None, 3, ["d"]]}},
        {"spec": {"driver": DRIVER, "devices": [{"capacity": {"memory": "24Gi"}}]}},
        {"spec": {"driver": DRIVER, "devices": [{"capacity": {"memory": {"value": ["x"]}}}]}},
        {"spec": {"driver": DRIVER, "devices": [{"attributes": {"uuid": {"string": 5}}}]}},
    ],
)
def test_what_is_not_a_slice_reads_as_less(resource_slice: Any) -> None:
    view = SliceView.of(resource_slice)
    assert all(not d.capacity and not d.text("uuid") for d in view.devices)
    assert largest_memory_mib([resource_slice], DRIVER) == 0


def test_devices_are_bounded_by_the_apis_limit() -> None:
    devices = [{"name": f"d{i}"} for i in range(1000)]
    view = SliceView.of({"spec": {"driver": DRIVER, "devices": devices}})
    assert len(view.devices) == MAX_DEVICES
