"""A ResourceSlice as the cluster side reads it (the driver's devices, their capacity and
attributes): parsed once into a typed view, every field taken only in the shape Kubernetes gives
it (core/model/shapes.py) and bounded by the API's limits, so the code behind reads attributes
instead of chains of `.get`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hami_dra_webhook.core.model.shapes import as_list, as_map, as_text

# resource.k8s.io/v1 limits (ResourceSliceMaxDevices, ...MaxAttributesAndCapacitiesPerDevice).
MAX_DEVICES = 128
MAX_ATTRIBUTES = 32
AttributeValue = str | int | bool
ATTRIBUTE_KINDS = ("string", "int", "bool", "version")


@dataclass(frozen=True, slots=True)
class SliceDevice:
    name: str
    capacity: Mapping[str, str] = field(default_factory=dict)  # name -> its value (quantity)
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)  # name -> value

    def text(self, attribute: str) -> str:
        """A string (or version) attribute's value; "" when it has none."""
        value = self.attributes.get(attribute)
        return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class SliceView:
    driver: str
    node_name: str = ""
    pool_name: str = ""
    devices: tuple[SliceDevice, ...] = ()

    @classmethod
    def of(cls, resource_slice: object) -> SliceView:
        spec = as_map(as_map(resource_slice).get("spec"))
        return cls(
            driver=as_text(spec.get("driver")),
            node_name=as_text(spec.get("nodeName")),
            pool_name=as_text(as_map(spec.get("pool")).get("name")),
            devices=tuple(
                _device(d)
                for d in as_list(spec.get("devices"))[:MAX_DEVICES]
                if isinstance(d, dict)
            ),
        )

    @property
    def pool(self) -> str:
        """The pool its results name: the slice's pool, else its node (a node-local driver)."""
        return self.pool_name or self.node_name


def _device(device: dict[str, object]) -> SliceDevice:
    capacity = list(as_map(device.get("capacity")).items())[:MAX_ATTRIBUTES]
    attributes = list(as_map(device.get("attributes")).items())[:MAX_ATTRIBUTES]
    return SliceDevice(
        name=as_text(device.get("name")),
        capacity={str(k): v for k, entry in capacity if (v := as_text(as_map(entry).get("value")))},
        attributes={str(k): a for k, entry in attributes if (a := _attribute(entry)) is not None},
    )


def _attribute(entry: object) -> AttributeValue | None:
    """A DeviceAttribute's one value (`string`, `int`, `bool` or `version`)."""
    values = as_map(entry)
    for kind in ATTRIBUTE_KINDS:
        value = values.get(kind)
        if kind == "bool" and isinstance(value, bool):
            return value
        if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind in ("string", "version") and isinstance(value, str):
            return value
    return None
