"""A GPU node without a kubelet: a Ready Node object and the ResourceSlice that the HAMi DRA
driver v0.1.0 publishes for it (docs/kubernetes-facts.md: the driver; the driver's `HAMiGpuInfo.GetDevice`).

No kubelet ever runs, so pods are scheduled and their claims allocated, but nothing starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.controlplane.cluster import ControlPlane

DRIVER = "hami-core-gpu.project-hami.io"
GIB = 1024**3


@dataclass(frozen=True)
class Gpu:
    minor: int
    uuid: str
    product: str
    memory_gib: int
    architecture: str
    compute_capability: str
    memory: str | None = None  # the capacity as published, when not `<memory_gib>Gi`

    @property
    def device_name(self) -> str:
        return f"hami-gpu-{self.minor}"

    def device(self) -> dict[str, Any]:
        memory = self.memory or f"{self.memory_gib}Gi"
        return {
            "name": self.device_name,
            "attributes": {
                "type": {"string": "hami-gpu"},
                "uuid": {"string": self.uuid},
                "minor": {"int": self.minor},
                "productName": {"string": self.product},
                "brand": {"string": "Nvidia"},
                "architecture": {"string": self.architecture},
                "cudaComputeCapability": {"version": self.compute_capability},
                "driverVersion": {"version": "570.124.6"},
                "cudaDriverVersion": {"version": "12.8.0"},
                "pcieBusID": {"string": f"0000:{self.minor + 1:02x}:00.0"},
                "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
            },
            "capacity": {
                "cores": {
                    "value": "100",
                    "requestPolicy": {
                        "default": "100",
                        "validRange": {"min": "0", "max": "100", "step": "1"},
                    },
                },
                "memory": {
                    "value": memory,
                    "requestPolicy": {
                        "default": memory,
                        "validRange": {"min": "1Mi", "max": memory, "step": "1Mi"},
                    },
                },
            },
            "allowMultipleAllocations": True,
        }


@dataclass(frozen=True)
class GpuNode:
    name: str
    gpus: tuple[Gpu, ...]

    @classmethod
    def default(cls) -> GpuNode:
        """Two 24 GiB L4 cards and one 80 GiB A100, with known UUIDs."""
        return cls(
            "gpu-node-1",
            (
                Gpu(
                    0,
                    "GPU-1c000000-0000-4000-8000-000000000000",
                    "NVIDIA L4",
                    24,
                    "Ada Lovelace",
                    "8.9.0",
                ),
                Gpu(
                    1,
                    "GPU-1c000001-0000-4000-8000-000000000001",
                    "NVIDIA L4",
                    24,
                    "Ada Lovelace",
                    "8.9.0",
                ),
                Gpu(
                    2,
                    "GPU-a1000002-0000-4000-8000-000000000002",
                    "NVIDIA A100-SXM4-80GB",
                    80,
                    "Ampere",
                    "8.0.0",
                ),
            ),
        )

    def by_device(self, device_name: str) -> Gpu:
        return next(gpu for gpu in self.gpus if gpu.device_name == device_name)

    def node(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "nvidia.com/gpu.present": "true",
                },
            },
        }

    def node_status(self) -> dict[str, Any]:
        resources = {"cpu": "64", "memory": "256Gi", "pods": "110", "ephemeral-storage": "500Gi"}
        return {
            "status": {
                "capacity": resources,
                "allocatable": resources,
                # What a kubelet would report; `check` reads the runtime (CDI support).
                "nodeInfo": {
                    "containerRuntimeVersion": "containerd://2.1.4",
                    "kubeletVersion": "v1.36.3",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "osImage": "Ubuntu 24.04.3 LTS",
                    "kernelVersion": "6.8.0-79-generic",
                    "machineID": "",
                    "systemUUID": "",
                    "bootID": "",
                    "kubeProxyVersion": "",
                },
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "stand-in status: no kubelet runs in the e2e control plane",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            }
        }

    def resource_slice(self) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{self.name}-{DRIVER}"},
            "spec": {
                "driver": DRIVER,
                "nodeName": self.name,
                "pool": {"name": self.name, "generation": 1, "resourceSliceCount": 1},
                "devices": [gpu.device() for gpu in self.gpus],
            },
        }

    def register(self, plane: ControlPlane) -> dict[str, Any]:
        """Create the Node, mark it Ready without taints, publish the slice; returns the slice
        as the API server stored it (with the feature gate off it drops some fields)."""
        _expect(plane.request("POST", "/api/v1/nodes", self.node()), 201, "create the node")
        _expect(
            plane.request(
                "PATCH",
                f"/api/v1/nodes/{self.name}/status",
                self.node_status(),
                **{"Content-Type": "application/merge-patch+json"},
            ),
            200,
            "mark the node Ready",
        )
        # The TaintNodesByCondition admission plugin taints a new node not-ready; the node
        # lifecycle controller (left out: no kubelet renews the lease) would lift it.
        _expect(
            plane.request(
                "PATCH",
                f"/api/v1/nodes/{self.name}",
                {"spec": {"taints": None}},
                **{"Content-Type": "application/merge-patch+json"},
            ),
            200,
            "remove the node's taints",
        )
        status, stored = plane.request(
            "POST", "/apis/resource.k8s.io/v1/resourceslices", self.resource_slice()
        )
        _expect((status, stored), 201, "publish the ResourceSlice")
        return dict(stored)


def _expect(answer: tuple[int, Any], status: int, what: str) -> None:
    if answer[0] != status:
        raise RuntimeError(f"could not {what}: {answer[0]} {answer[1]}")
