"""What every device family's unit provides (`Profile`), what it describes (`Family`) and what it
makes of one container (`Resolved`).

A vendor is one module under core/vendors/ with one `Profile` and one entry in
`core/vendors/families.PROFILES`; nothing else in the core names it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from hami_dra_webhook.core.legacy.request import LegacyRequest, resource_maps
from hami_dra_webhook.core.model.types import ContainerRef, JsonObject
from hami_dra_webhook.core.vendors.quota_group import DeviceHold, QuotaGroup

if TYPE_CHECKING:
    from hami_dra_webhook.core.outcome.ask import DeviceAsk
    from hami_dra_webhook.core.outcome.decision import ContainerPlan
    from hami_dra_webhook.core.settings.policy import Policy


@dataclass(frozen=True, slots=True)
class Family:
    key: str  # "nvidia", "hygon", "ascend", "amd", "aws-neuron", "cambricon", ...
    title: str  # what users call it
    names: tuple[str, ...]  # its legacy resource names under this policy
    converted: bool
    driver: str | None = None  # its DRA driver, where one exists
    device_class: str | None = None
    class_expression: str | None = None  # the DeviceClass's CEL selector
    enable: str = ""  # the policy setting that converts it ("" where no driver exists)
    # A node label that says the family's cards are there (Hygon's `hcu=on`), for `check`.
    node_label: tuple[str, str] | None = None

    def not_converted(self, asked: list[str]) -> str:
        """Why this webhook does not convert the family (its pods can stay on legacy HAMi),
        naming the resources the container `asked` for."""
        if self.enable:
            return (
                f"{self.title} ({', '.join(asked)}) is not converted by this policy"
                f" (set {self.enable} to convert it to {self.driver})"
            )
        return f"{self.title} has no DRA driver, so this webhook cannot convert it"


@dataclass(frozen=True, slots=True)
class SliceFacts:
    """What a family's driver publishes that its asks need (NVIDIA's card memory sizes,
    Hygon's compute units per card model): distinct values, largest first, and each device
    whose value could not be read, in words (the caller logs them)."""

    values: tuple[int, ...] = ()
    unreadable: tuple[str, ...] = ()


def distinct_capacities(
    devices: Iterable[JsonObject], key: str, parse: Callable[[str], int], what: str
) -> SliceFacts:
    """The distinct values of the devices' `key` capacity, largest first; a device without it
    is passed over, one whose value `parse` refuses (ValueError) is named in `unreadable`."""
    values: set[int] = set()
    unreadable: list[str] = []
    for device in devices:
        value = ((device.get("capacity") or {}).get(key) or {}).get("value")
        if value is None:
            continue
        try:
            values.add(parse(str(value)))
        except ValueError:
            unreadable.append(
                f"device {device.get('name')} publishes an unreadable {what} {value!r}"
            )
    return SliceFacts(tuple(sorted(values, reverse=True)), tuple(unreadable))


# One container of a family, read and validated: its plan (with the device ask, where the
# family's profile can make it alone), the legacy request as its template's annotation keeps it,
# and the runtime class its devices need ("" none). A plain tuple: one is made for every GPU
# container of every pod translated (a NamedTuple takes ten times as long to make).
Resolved = tuple["ContainerPlan", str, str]


class Profile(Protocol):
    """One device family's unit: its description under a policy, and one container's legacy
    values read into a plan."""

    @property
    def key(self) -> str: ...

    def family(self, policy: Policy) -> Family:
        """The family as this policy configures it (names, whether and how it converts)."""
        ...

    def resolve(
        self,
        ref: ContainerRef,
        container: Any,
        annotations: dict[str, Any],
        policy: Policy,
        warnings: list[str],
    ) -> Resolved:
        """The container's legacy values read, checked and planned (NotConvertible: refused)."""
        ...

    def reads_pod_selectors(self, plan: ContainerPlan) -> bool:
        """Whether the plan's device ask waits for the pod's device selectors (the GPU type and
        UUID annotations that apply to every share of the pod: `device_ask`)."""
        ...

    def device_ask(
        self, plan: ContainerPlan, selectors: tuple[str, ...], policy: Policy
    ) -> DeviceAsk | None:
        """What the container asks of the family's driver once the pod's device selectors are
        known (`()` where `reads_pod_selectors` said no); None: no device."""
        ...

    def environment(self, plan: ContainerPlan, policy: Policy) -> dict[str, str]:
        """The variables the container gets beside its devices (a variable the container sets
        itself is kept, with a warning)."""
        ...

    def facts_driver(self, policy: Policy) -> str | None:
        """The driver whose ResourceSlices say what the family's asks need from the cluster;
        None: they need nothing, or the family is not converted (core/vendors/facts.py)."""
        ...

    def read_facts(self, slices: list[JsonObject], policy: Policy) -> SliceFacts:
        """What `facts_driver`'s slices say (a slice of another driver is passed over)."""
        ...

    def with_facts(self, policy: Policy, values: tuple[int, ...]) -> Policy:
        """The policy with `values` in the family's settings; the configured ones where the
        cluster says nothing. The same object when nothing changes (callers cache on it)."""
        ...

    def quota_groups(self, policy: Policy) -> tuple[QuotaGroup, ...]:
        """The device groups whose GPU quotas are kept for the family (none where the policy
        does not convert it; Ascend: one per chip)."""
        ...

    def held(self, group: QuotaGroup, plan: ContainerPlan) -> DeviceHold:
        """What HAMi charged the container of `group` (the plan gets devices)."""
        ...


class ProfileDefaults:
    """The rest of `Profile` for a family whose `resolve` makes the whole device ask and that
    needs nothing from the cluster: no pod selectors, the plan's own ask, no environment, no
    facts."""

    def reads_pod_selectors(self, plan: ContainerPlan) -> bool:
        return False

    def device_ask(
        self, plan: ContainerPlan, selectors: tuple[str, ...], policy: Policy
    ) -> DeviceAsk | None:
        return plan.ask

    def environment(self, plan: ContainerPlan, policy: Policy) -> dict[str, str]:
        return {}

    def facts_driver(self, policy: Policy) -> str | None:
        return None

    def read_facts(self, slices: list[JsonObject], policy: Policy) -> SliceFacts:
        return SliceFacts()

    def with_facts(self, policy: Policy, values: tuple[int, ...]) -> Policy:
        return policy

    def quota_groups(self, policy: Policy) -> tuple[QuotaGroup, ...]:
        return ()

    def held(self, group: QuotaGroup, plan: ContainerPlan) -> DeviceHold:
        return DeviceHold(0, None, None, 0)


def requests_only(request: LegacyRequest, ref: ContainerRef, warnings: list[str]) -> None:
    """A legacy key set only in requests is converted as its limit: say so."""
    for name in request.in_requests:
        if name not in request.in_limits:
            warnings.append(f"{ref.label}: {name} set only in requests; converted as its limit")


def legacy_values(container: Any, request: LegacyRequest) -> str:
    """The container's legacy keys and values, as its template's annotation keeps them."""
    limits, requests = resource_maps(container)
    return ",".join(
        f"{name}={limits.get(name, requests.get(name))}"
        for name in dict.fromkeys((*request.in_limits, *request.in_requests))
    )
