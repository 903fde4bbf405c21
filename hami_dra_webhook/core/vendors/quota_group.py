"""What a family's profile says of its GPU quotas (core/quota/ counts them; docs/quotas.md):
the device groups HAMi keeps quotas for, each with its legacy names and how a device of it is
charged, and what one container with legacy resources holds per device. No I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class QuotaGroup:
    """The legacy resource names of one device kind, which of HAMi's keys are kept, and how a
    claim's device of it is charged."""

    key: str  # "nvidia", "hygon", "ascend/Ascend910B3", "amd", "aws-neuron"
    count: tuple[str, ...]
    memory: tuple[str, ...]
    cores: tuple[str, ...]
    memory_factor: int = 1  # HAMi scales the memory asked and the limit by it
    hami_memory: bool = True  # limits.<memory> kept
    hami_cores: bool = True  # limits.<cores> kept
    driver: str = ""  # its DRA driver and DeviceClass: a claim of them is of this group
    device_class: str = ""
    chip: str = ""  # Ascend: the chip's productName, which the webhook's claims pin
    # The capacity keys a claim's device asks or consumes.
    memory_capacity: str = "memory"
    cores_capacity: str = "cores"
    # Cores capacity in compute units (Hygon): charged as the percent of the card pinned.
    cores_in_units: bool = False
    # Allocated whole (AMD, AWS Neuron): a device is charged no share, and these cores.
    whole_cores: int | None = None
    # The largest device's memory (MiB) the settings say; 0: unknown, or only its driver's
    # ResourceSlices say (`sized_by_slices`: read from them).
    largest_mib: int = 0
    sized_by_slices: bool = False


class DeviceHold(NamedTuple):
    """What HAMi charged one container: `devices` devices, each with this memory (MiB; None:
    the whole device's), memory percentage and cores (percent of one device)."""

    devices: int
    memory_mib: int | None
    percentage: int | None
    cores: int


def present(*names: str | None) -> tuple[str, ...]:
    """The names that are set."""
    return tuple(n for n in names if n)
