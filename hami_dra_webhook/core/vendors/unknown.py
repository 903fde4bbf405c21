"""Resource names of a legacy domain that look like HAMi's but that the configuration does not
know: an old chip name (`huawei.com/Ascend910B`, HAMi v2.4.0 to v2.6.1), or a `-memory`/`-core`
sibling of none. No device plugin offers them, so the pod stays Pending wherever it goes, and
nothing sends it to the webhook: the tools say so, naming what to write (docs/vendor-facts.md:
Ascend names by HAMi version)."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.core.legacy.request import resource_maps
from hami_dra_webhook.core.model.containers import containers
from hami_dra_webhook.core.model.types import Attention
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.vendors.families import families

# Names HAMi used and then replaced: name -> (the releases that used it, its replacements).
RENAMED: dict[str, tuple[str, tuple[str, ...]]] = {
    "huawei.com/Ascend910B": (
        "HAMi's name for 910B NPUs from v2.4.0 to v2.6.1 (split by chip in v2.7)",
        ("huawei.com/Ascend910B2", "huawei.com/Ascend910B3", "huawei.com/Ascend910B4"),
    ),
}
# How HAMi names the memory and core siblings of a device count (longest first).
SIBLING_SUFFIXES = (
    "-percentage",
    "-memory",
    "-cores",
    "-core",
    "-mem",
    "memory",
    "cores",
    "core",
    "mem",
)


def unknown_names(pod: Any, policy: Policy) -> list[Attention]:
    """A warning for each resource of the pod's containers with a HAMi shape that `policy` does
    not know (each name once)."""
    spec = pod.get("spec") if isinstance(pod, dict) else None
    said: dict[str, Attention] = {}
    for ref, container in containers(spec):
        for key, words in unknown_keys(container, policy).items():
            said.setdefault(key, Attention(f"{ref.label}: {words}"))
    return list(said.values())


def unknown_keys(container: Any, policy: Policy) -> dict[str, str]:
    """The container's resources with a HAMi shape that `policy` does not know, each with what
    to write instead."""
    known = families(policy)
    domains = known.name_domains
    limits, requests = resource_maps(container)
    # A converted NVIDIA container with an unknown nvidia.com name is refused, naming it.
    refused = policy.legacy_domains if names_nvidia(limits, requests, policy) else ()
    found: dict[str, str] = {}
    for key in (*limits, *requests):
        if key in found or not isinstance(key, str) or "/" not in key:
            continue
        domain = key.partition("/")[0]
        if key in known.by_name or domain not in domains or domain in refused:
            continue
        if known.by_domain.get(domain) is not None:
            continue  # a family without a driver: every name of it is reported already
        words = _unknown(key, policy)
        if words:
            found[key] = words
    return found


def names_nvidia(limits: Any, requests: Any, policy: Policy) -> bool:
    """Whether the limits or requests name one of the configured NVIDIA resources."""
    names = policy.legacy_name_set
    return any(key in names for part in (limits, requests) for key in part)


def _unknown(key: str, policy: Policy) -> str:
    base, suffix = _split(key)
    renamed = RENAMED.get(base)
    if renamed is not None:
        when, replacements = renamed
        write = _either(f"{name}{suffix}" for name in replacements)
        return (
            f"{key} was {when}; no device plugin of this configuration offers it, so the pod"
            f" stays Pending: write {write} (the chip of its nodes)"
        )
    if not suffix:
        return ""
    family = families(policy).of(base)
    if family is None:
        return ""
    # The device's own siblings where it has some (Ascend310P's), else the family's; of the
    # same kind (memory, cores) where there are some.
    pool = [n for n in family.names if n.startswith(base) and n != base] or list(family.names)
    kind = next((k for k in ("percentage", "mem", "core") if k in suffix), "")
    named = [n for n in pool if kind in n.rpartition("/")[2]] or pool
    hint = f" ({family.title}: {_either(named[:4])})" if named else ""
    return (
        f"{key} is not a resource this configuration knows, and no device plugin offers it,"
        f" so the pod stays Pending: write the name the device config gives{hint}"
    )


def _split(key: str) -> tuple[str, str]:
    """(device count name, sibling suffix): huawei.com/Ascend910B-memory -> (…910B, -memory)."""
    for suffix in SIBLING_SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix) and "/" in key[: -len(suffix)]:
            base = key[: -len(suffix)]
            if not base.endswith("/"):
                return base, suffix
    return key, ""


def _either(names: Any) -> str:
    listed = list(names)
    return listed[0] if len(listed) == 1 else f"{', '.join(listed[:-1])} or {listed[-1]}"
