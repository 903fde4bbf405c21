"""Nodes without a kubelet whose ResourceSlices are shaped exactly as the vendors' DRA drivers
publish them (docs/vendor-facts.md): Hygon's `dra.hygon.com` (HYGON-AI/k8s-hcu-dra-driver
`GetDevice`) and the HAMi Ascend driver's `ascend.project-hami.io` (`enumerateDevices`,
`buildLibvNPUDeviceCapacities`). A stand-in: neither driver nor its hardware can run here, so
the slices are what they would publish, and kube-scheduler allocates against them as it would
against the real ones. Nothing starts on these nodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.gpu_node import GpuNode, _expect

HYGON = "dra.hygon.com"
ASCEND = "ascend.project-hami.io"
GI = 1024**3


def _policy(value: str, default: str, low: str, step: str) -> dict[str, Any]:
    return {
        "value": value,
        "requestPolicy": {
            "default": default,
            "validRange": {"min": low, "max": value, "step": step},
        },
    }


@dataclass(frozen=True)
class HygonCard:
    bus: str  # PCI bus id, e.g. 0000:1a:00.0
    serial: str  # DCGM DeviceId: the bare serial legacy HAMi wrote as HCU-<serial>
    product: str  # DCGM DevTypeName, e.g. K100_AI
    compute_units: int
    memory_gib: int

    @property
    def device_name(self) -> str:
        return "hcu-" + self.bus.replace(":", "-").replace(".", "-")

    def device(self) -> dict[str, Any]:
        memory = f"{self.memory_gib}Gi"
        units = str(self.compute_units)
        return {
            "name": self.device_name,
            "attributes": {
                "type": {"string": "hcu"},
                "uuid": {"string": self.serial},
                "productName": {"string": self.product},
                "architecture": {"string": ""},
                "brand": {"string": ""},
            },
            "capacity": {
                "cores": _policy(units, units, "0", "1"),
                "memory": _policy(memory, memory, "0", "1Mi"),
                "slices": {
                    "value": "4",
                    "requestPolicy": {
                        "default": "1",
                        "validRange": {"min": "1", "max": "4", "step": "1"},
                    },
                },
            },
            "allowMultipleAllocations": True,
        }


@dataclass(frozen=True)
class AscendNpu:
    logic_id: int
    chip: str  # DCMI chip name: productName and model, e.g. 910B3
    memory_mib: int
    uuid: str

    @property
    def device_name(self) -> str:
        return f"npu-{self.logic_id}-0"

    def device(self) -> dict[str, Any]:
        memory = f"{self.memory_mib}Mi"
        return {
            "name": self.device_name,
            "attributes": {
                "index": {"int": self.logic_id},
                "physicalID": {"int": self.logic_id},
                "uuid": {"string": self.uuid},
                "model": {"string": self.chip},
                "productName": {"string": self.chip},
                "brand": {"string": "Huawei"},
                "type": {"string": "HAMivNPUCore"},
            },
            "capacity": {
                "memory": _policy(memory, memory, "1Mi", "1Mi"),
                "cores": _policy("100", "100", "0", "1"),
            },
            "allowMultipleAllocations": True,
        }


@dataclass(frozen=True)
class VendorNode:
    name: str
    driver: str
    devices: tuple[HygonCard, ...] | tuple[AscendNpu, ...]
    labels: tuple[tuple[str, str], ...] = ()

    def resource_slice(self) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{self.name}-{self.driver}"},
            "spec": {
                "driver": self.driver,
                "nodeName": self.name,
                "pool": {"name": self.name, "generation": 1, "resourceSliceCount": 1},
                "devices": [d.device() for d in self.devices],
            },
        }

    def register(self, plane: ControlPlane) -> None:
        """The Node (Ready, untainted, as gpu_node.py makes it) and its slice."""
        base = GpuNode(self.name, ())
        node = base.node()
        node["metadata"]["labels"].pop("nvidia.com/gpu.present")
        node["metadata"]["labels"].update(dict(self.labels))
        _expect(plane.request("POST", "/api/v1/nodes", node), 201, "create the node")
        merge = {"Content-Type": "application/merge-patch+json"}
        path = f"/api/v1/nodes/{self.name}"
        _expect(
            plane.request("PATCH", f"{path}/status", base.node_status(), **merge),
            200,
            "mark it Ready",
        )
        _expect(
            plane.request("PATCH", path, {"spec": {"taints": None}}, **merge), 200, "untaint it"
        )
        _expect(
            plane.request("POST", "/apis/resource.k8s.io/v1/resourceslices", self.resource_slice()),
            201,
            "publish the ResourceSlice",
        )

    def remove(self, plane: ControlPlane) -> None:
        plane.request(
            "DELETE", f"/apis/resource.k8s.io/v1/resourceslices/{self.name}-{self.driver}"
        )
        plane.request("DELETE", f"/api/v1/nodes/{self.name}")


# Two Hygon models of different sizes (the HAMi-DRA doc's 128 CU card, and a 120 CU one).
HYGON_NODE = VendorNode(
    "hygon-node-1",
    HYGON,
    (
        HygonCard("0000:1a:00.0", "TPXS320016070601", "K100_AI", 120, 64),
        HygonCard("0000:1b:00.0", "TPXS300002100601", "Z100L", 128, 32),
    ),
    labels=(("hcu", "on"),),
)
ASCEND_NODE = VendorNode(
    "ascend-node-1",
    ASCEND,
    (
        AscendNpu(0, "910B3", 65536, "68496E64-20E05477-92C31323-6E78030A-BD003019"),
        AscendNpu(1, "310P3", 21527, "68496E64-20E05477-92C31323-6E78030A-BD003020"),
    ),
)
