"""The Kubernetes releases the end-to-end tests run against, and their feature-gate defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass

ETCD_VERSION = "3.6.16"


@dataclass(frozen=True)
class Release:
    """One pinned Kubernetes release (its Go module lives in tests/controlplane/v<minor>/)."""

    version: str  # "1.36.3", or a pre-release: "1.38.0-beta.0"
    # DRAConsumableCapacity: alpha and off by default in 1.34/1.35, beta and on from 1.36.
    consumable_capacity_by_default: bool
    # GOTOOLCHAIN for its build: "local" (this machine's Go 1.26), or the version its module
    # needs, which the go command takes from the Go module proxy (about 10 s, once a machine).
    go_toolchain: str = "local"

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
        # Due 2026-12-16; beta.0 is the newest its Go module proxy serves. k8s.io/kubernetes
        # v1.38 says `go 1.27.0`.
        Release("1.38.0-beta.0", consumable_capacity_by_default=True, go_toolchain="go1.27.3"),
    )
}


def release(minor: str) -> Release:
    try:
        return RELEASES[minor.removeprefix("v")]
    except KeyError:
        known = ", ".join(RELEASES)
        raise SystemExit(f"unknown Kubernetes version {minor!r}; pinned here: {known}") from None


@dataclass(frozen=True)
class Flavor:
    """A release with a DRAConsumableCapacity setting: what one end-to-end cluster runs."""

    minor: str
    gate: bool | None  # set explicitly; None: the release's default

    @property
    def release(self) -> Release:
        return release(self.minor)

    @property
    def capacity(self) -> bool:
        return self.release.consumable_capacity_by_default if self.gate is None else self.gate

    @property
    def id(self) -> str:
        if self.gate is None:
            return self.minor
        return f"{self.minor}-{'on' if self.gate else 'off'}"


ALL_FLAVORS = (
    Flavor("1.34", False),
    Flavor("1.34", True),
    Flavor("1.35", True),
    Flavor("1.36", None),
    Flavor("1.37", None),
    Flavor("1.38", None),
)


class UnknownFlavor(ValueError):
    pass


def selected_flavors() -> list[Flavor]:
    """All flavors, or those named in HAMI_E2E_FLAVORS (e.g. `1.36,1.34-off`)."""
    wanted = os.environ.get("HAMI_E2E_FLAVORS", "").replace(" ", "")
    if not wanted:
        return list(ALL_FLAVORS)
    by_id = {flavor.id: flavor for flavor in ALL_FLAVORS}
    unknown = [name for name in wanted.split(",") if name not in by_id]
    if unknown:
        raise UnknownFlavor(f"HAMI_E2E_FLAVORS: unknown {unknown}; known: {list(by_id)}")
    return [by_id[name] for name in wanted.split(",")]
