"""The device families: every converting vendor's profile, listed once in `PROFILES`, and the
families without a DRA driver that are only named (`OTHER_FAMILIES`). Which legacy resource
names belong to which family, which families a policy converts (and to which DRA driver and
DeviceClass), and which it only names.

The chart's DeviceClasses and matchConditions, `check` and `scan` read the same data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hami_dra_webhook.core.legacy.request import has_legacy_keys, resource_maps
from hami_dra_webhook.core.model.containers import containers
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.settings.vendor_config import OTHER_FAMILIES
from hami_dra_webhook.core.vendors import ascend, hygon, nvidia, whole
from hami_dra_webhook.core.vendors.profile import Family, Profile

# Every family this webhook converts, one profile each; a new vendor is one module and one entry.
PROFILES: tuple[Profile, ...] = (
    nvidia.PROFILE,
    hygon.PROFILE,
    ascend.PROFILE,
    whole.AMD_PROFILE,
    whole.NEURON_PROFILE,
)
BY_KEY: dict[str, Profile] = {profile.key: profile for profile in PROFILES}
NVIDIA = nvidia.FAMILY


@dataclass(frozen=True, slots=True)
class Families:
    all: tuple[Family, ...]
    by_name: dict[str, Family]
    # Domains of the families without a driver: any resource there names the family.
    by_domain: dict[str, Family]
    all_names: frozenset[str]  # the legacy resource names of every family
    # The domains of every family's legacy resource names (nvidia.com, huawei.com, ...).
    name_domains: frozenset[str]
    # Every resource name that sends a pod to the webhook (the chart's matchConditions).
    names_converted: tuple[str, ...]

    def of(self, resource: str) -> Family | None:
        family = self.by_name.get(resource)
        if family is not None or "/" not in resource:
            return family
        return self.by_domain.get(resource.partition("/")[0])

    def get(self, key: str) -> Family:
        return next(f for f in self.all if f.key == key)

    @property
    def converted(self) -> tuple[Family, ...]:
        return tuple(f for f in self.all if f.converted)

    def converted_names(self) -> tuple[str, ...]:
        """Every resource name that sends a pod to the webhook (the chart's matchConditions)."""
        return self.names_converted


# Policies in use: one or two a process (each reload makes one); tests make more. Looked up by
# identity (the policy is held, so its id is not reused): hashing a policy costs more, and this
# is on every translation's path.
_KNOWN: dict[int, tuple[Policy, Families]] = {}
MAX_POLICIES = 64
_last_policy: Policy | None = None  # the last policy asked about, and its families
_last_families: Families | None = None


def families(policy: Policy) -> Families:
    """Every device family this policy knows, converted or only named."""
    global _last_policy, _last_families
    if policy is _last_policy and _last_families is not None:  # the policy in use, nearly always
        return _last_families
    found = _KNOWN.get(id(policy))
    if found is None or found[0] is not policy:
        if len(_KNOWN) >= MAX_POLICIES:
            _KNOWN.clear()
        found = _KNOWN[id(policy)] = (policy, _families(policy))
    _last_policy, _last_families = found
    return _last_families


def forget_families() -> None:
    """Empty the families' cache (tests: each computes its own)."""
    global _last_policy, _last_families  # noqa: PLW0603
    _KNOWN.clear()
    _last_policy = _last_families = None


def _families(policy: Policy) -> Families:
    found = [profile.family(policy) for profile in PROFILES]
    configured = dict(policy.hami_vendors.others)
    by_domain: dict[str, Family] = {}
    for key, title, defaults, domains in OTHER_FAMILIES:
        other = Family(
            key, title, tuple(dict.fromkeys((*configured.get(key, ()), *defaults))), False
        )
        found.append(other)
        by_domain |= {domain: other for domain in domains}
    by_name: dict[str, Family] = {}
    for family in reversed(found):  # NVIDIA wins a name it shares (it is converted)
        by_name |= {name: family for name in family.names}
    return Families(
        tuple(found),
        by_name,
        by_domain,
        frozenset(by_name),
        frozenset(name.partition("/")[0] for name in by_name if "/" in name),
        tuple(n for f in found if f.converted for n in f.names),
    )


def converted_names(policy: Policy) -> tuple[str, ...]:
    """The legacy resource names of every family this policy converts."""
    return families(policy).names_converted


def names_a_family(container: Any, policy: Policy) -> bool:
    """A container with a legacy resource of any family: a known name, or any name in the
    domain of a family without a DRA driver (`cambricon.com/...`)."""
    known = families(policy)
    if has_legacy_keys(container, known.all_names):
        return True
    domains = known.by_domain
    limits, requests = resource_maps(container)
    return any(
        isinstance(key, str) and "/" in key and key.partition("/")[0] in domains
        for part in (limits, requests)
        for key in part
    )


def uses_legacy(pod: Any, policy: Policy) -> bool:
    """A pod with a legacy resource of any device family (NVIDIA's, or another vendor's), in a
    container or in its pod-level `spec.resources` (which the translation refuses)."""
    spec = pod.get("spec") if isinstance(pod, dict) else None
    if isinstance(spec, dict) and names_a_family({"resources": spec.get("resources")}, policy):
        return True
    return any(names_a_family(container, policy) for _, container in containers(spec))


def container_families(container: Any, known: Families) -> dict[str, list[str]]:
    """The families a container's limits and requests name, each with the keys naming it (on
    the hot path: every container of every pod passes here)."""
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        return {}
    by_name, by_domain = known.by_name, known.by_domain
    found: dict[str, list[str]] = {}
    for part in ("limits", "requests"):
        values = resources.get(part)
        if not isinstance(values, dict):
            continue
        for key in values:
            family = by_name.get(key)
            if family is None:
                if not isinstance(key, str) or "/" not in key:
                    continue
                family = by_domain.get(key.partition("/")[0])
                if family is None:
                    continue
            keys = found.get(family.key)
            if keys is None:
                found[family.key] = [key]
            elif key not in keys:
                keys.append(key)
    return found
