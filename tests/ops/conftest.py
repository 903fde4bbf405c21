"""The node monitor's fixture (a DeviceClass of the plane's GPU node) for test_prometheus."""

from tests.monitor.cluster_pods import (  # noqa: F401 (fixtures of these tests)
    device_class,
    gpu_namespace,
)
