"""The Kubernetes releases the end-to-end tests run against, and their feature-gate defaults."""

from __future__ import annotations

from dataclasses import dataclass

ETCD_VERSION = "3.6.16"


@dataclass(frozen=True)
class Release:
    """One pinned Kubernetes release (its Go module lives in tests/controlplane/v<minor>/)."""

    version: str  # "1.36.3"
    # DRAConsumableCapacity: alpha and off by default in 1.34/1.35, beta and on from 1.36.
    consumable_capacity_by_default: bool

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def module(self) -> str:
        return f"v{self.minor}"


RELEASES = {
    release.minor: release
    for release in (
        Release("1.34.4", consumable_capacity_by_default=False),
        Release("1.35.4", consumable_capacity_by_default=False),
        Release("1.36.3", consumable_capacity_by_default=True),
        Release("1.37.2", consumable_capacity_by_default=True),
    )
}


def release(minor: str) -> Release:
    try:
        return RELEASES[minor.removeprefix("v")]
    except KeyError:
        known = ", ".join(RELEASES)
        raise SystemExit(f"unknown Kubernetes version {minor!r}; pinned here: {known}") from None
