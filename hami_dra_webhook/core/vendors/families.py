"""The device families a policy knows: which legacy resource names belong to which family, which
families it converts (and to which DRA driver and DeviceClass), and which it only names.

NVIDIA is one family among them. The chart's DeviceClasses and matchConditions, `check` and
`scan` read the same data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hami_dra_webhook.core import cel
from hami_dra_webhook.core.legacy import has_legacy_keys, resource_maps
from hami_dra_webhook.core.vendor_config import OTHER_FAMILIES
from hami_dra_webhook.core.vendors import ascend, hygon
from hami_dra_webhook.core.vendors.whole import AMD, NEURON

if TYPE_CHECKING:
    from hami_dra_webhook.core.policy import Policy

NVIDIA = "nvidia"


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
class Families:
    all: tuple[Family, ...]
    by_name: dict[str, Family]
    # Domains of the families without a driver: any resource there names the family.
    by_domain: dict[str, Family]

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
        return tuple(n for f in self.converted for n in f.names)


def families(policy: Policy) -> Families:
    web, vendors, sections = policy.webhook, policy.webhook.vendors, policy.hami_vendors
    found: list[Family] = [
        Family(
            NVIDIA,
            "NVIDIA GPU",
            tuple(n for n in policy.legacy_resource_names if n),
            True,
            web.driver_name,
            web.device_class_name,
            cel.driver_device_of_type(web.driver_name, web.attributes.type, web.device_type),
        )
    ]
    hygon_names = tuple(n for names in hygon.role_names(sections) for n in names)
    found.append(
        Family(
            hygon.FAMILY,
            "Hygon DCU/HCU",
            hygon_names,
            vendors.hygon.convert,
            vendors.hygon.driver_name,
            vendors.hygon.device_class_name,
            cel.driver_device_of_type(vendors.hygon.driver_name, "type", hygon.DEVICE_TYPE),
            "hamiDraWebhook.vendors.hygon.convert: true",
        )
    )
    ascend_names = tuple(
        n
        for chip in sections.vnpus
        for n in (chip.resource_name, chip.resource_memory_name, chip.resource_core_name)
        if n
    )
    found.append(
        Family(
            ascend.FAMILY,
            "Huawei Ascend NPU",
            ascend_names,
            vendors.ascend.convert,
            vendors.ascend.driver_name,
            vendors.ascend.device_class_name,
            cel.driver_device_of_type(vendors.ascend.driver_name, "type", ascend.DEVICE_TYPE),
            "hamiDraWebhook.vendors.ascend.convert: true",
        )
    )
    for whole, names, settings in (
        (AMD, sections.amd, vendors.amd),
        (NEURON, sections.awsneuron, vendors.aws_neuron),
    ):
        driver = settings.driver_name
        found.append(
            Family(
                whole.key,
                whole.title,
                tuple(
                    n
                    for n in (
                        names.resource_count_name,
                        names.resource_memory_name,
                        names.resource_core_name,
                    )
                    if n
                ),
                settings.convert,
                driver,
                settings.device_class_name,
                f"device.driver == {cel.string_literal(driver)}",
                f"hamiDraWebhook.vendors.{whole.settings_key}.convert: true",
            )
        )
    configured = dict(sections.others)
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
    return Families(tuple(found), by_name, by_domain)


def names_a_family(container: Any, policy: Policy) -> bool:
    """A container with a legacy resource of any family: a known name, or any name in the
    domain of a family without a DRA driver (`cambricon.com/...`)."""
    if has_legacy_keys(container, policy.all_legacy_names):
        return True
    domains = policy.vendor_domains
    limits, requests = resource_maps(container)
    return any(
        isinstance(key, str) and "/" in key and key.partition("/")[0] in domains
        for part in (limits, requests)
        for key in part
    )


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
