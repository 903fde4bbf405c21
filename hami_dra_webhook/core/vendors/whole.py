"""AMD GPUs and AWS Neuron devices (docs/vendor-facts.md): their DRA drivers (`gpu.amd.com`,
`neuron.aws.com`) hand out whole devices only, so a count becomes that many whole devices and a
share is refused with the reason (unless it asks for a whole device's worth)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hami_dra_webhook.core.legacy.annotations import annotation_items, literal_list
from hami_dra_webhook.core.legacy.request import (
    MAX_CLAIM_DEVICES,
    LegacyRequest,
    read_vendor_request,
)
from hami_dra_webhook.core.legacy.selectors import ascii_upper
from hami_dra_webhook.core.model import cel
from hami_dra_webhook.core.model.types import ContainerRef, NotConvertible
from hami_dra_webhook.core.outcome.ask import Alternative, DeviceAsk
from hami_dra_webhook.core.outcome.decision import ContainerPlan
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.settings.vendor_config import WholeDeviceNames, WholeDeviceSettings
from hami_dra_webhook.core.vendors.profile import (
    Family,
    ProfileDefaults,
    Resolved,
    legacy_values,
    requests_only,
)
from hami_dra_webhook.core.vendors.quota_group import DeviceHold, QuotaGroup, present


@dataclass(frozen=True, slots=True)
class WholeDeviceFamily:
    key: str  # "amd", "aws-neuron"
    title: str  # "AMD GPU"
    request_name: str
    device_type: str | None  # the `type` attribute's value selected, None: any device
    uuid_annotations: tuple[str, ...]  # legacy annotations on synthetic/unmappable IDs
    use_type: str | None  # legacy type annotations, matched against productName
    nouse_type: str | None
    settings_key: str  # hamiDraWebhook.vendors.<this>
    # Its GPU quotas: whether HAMi keeps limits.<memory> and limits.<cores> (a Neuron core's
    # charge depends on the node's instance type, unknown before a node is chosen: not kept),
    # the cores a whole device is charged, and whether its driver's slices say its memory.
    hami_keys: bool
    whole_cores: int
    sized_by_slices: bool


AMD = WholeDeviceFamily(
    key="amd",
    title="AMD GPU",
    request_name="gpu",
    device_type="amdgpu",
    uuid_annotations=("amd.com/use-gpu-uuid", "amd.com/nouse-gpu-uuid"),
    use_type="amd.com/use-gputype",
    nouse_type="amd.com/nouse-gputype",
    settings_key="amd",
    hami_keys=True,
    whole_cores=100,
    sized_by_slices=True,
)
NEURON = WholeDeviceFamily(
    key="aws-neuron",
    title="AWS Neuron device",
    request_name="neuron",
    device_type=None,
    uuid_annotations=("aws.amazon.com/use-neuron-uuid", "aws.amazon.com/nouse-neuron-uuid"),
    use_type=None,
    nouse_type=None,
    settings_key="awsNeuron",
    hami_keys=False,
    whole_cores=0,
    sized_by_slices=False,
)


def device_ask(
    family: WholeDeviceFamily,
    names: WholeDeviceNames,
    request: LegacyRequest,
    ref: ContainerRef,
    annotations: dict[str, Any],
    settings: WholeDeviceSettings,
    warnings: list[str],
) -> DeviceAsk | None:
    driver = settings.driver_name
    _refuse_shares(family, names, request, ref, annotations, driver)
    count = 1 if request.count is None else request.count  # AMD: cores 100 alone is one GPU
    if count == 0:
        return None
    if count > MAX_CLAIM_DEVICES:
        raise NotConvertible(
            f"{ref.label}: {count} devices are more than the {MAX_CLAIM_DEVICES} a DRA claim"
            f" can hold; request at most {MAX_CLAIM_DEVICES}",
            code=422,
            reason="too-many-devices",
        )
    selectors = [
        cel.driver_device_of_type(driver, "type", family.device_type)
        if family.device_type
        else f"device.driver == {cel.string_literal(driver)}"
    ]
    selectors += _type_selectors(family, annotations, driver, warnings)
    devices = f"1 whole {family.title}" if count == 1 else f"{count} whole {family.title}s"
    return DeviceAsk(
        family=family.key,
        device_class=settings.device_class_name,
        request_name=family.request_name,
        count=count,
        alternatives=(Alternative(tuple(selectors)),),
        distinct_attribute=None,  # allocated whole: n devices are n different ones
        summary=devices,
        whole=True,
    )


def _refuse_shares(
    family: WholeDeviceFamily,
    names: WholeDeviceNames,
    request: LegacyRequest,
    ref: ContainerRef,
    annotations: dict[str, Any],
    driver: str,
) -> None:
    """The driver allocates whole devices: a share, or legacy device IDs, cannot be converted."""
    if request.memory:
        raise NotConvertible(
            f"{ref.label}: {names.resource_memory_name}={request.memory} asks for part of an"
            f" {family.title}, and {driver} cannot share a device (it allocates whole ones):"
            f" remove {names.resource_memory_name} to ask for whole devices, or keep this pod"
            " on legacy HAMi",
            code=422,
            reason="whole-devices-only",
        )
    if request.cores is not None and not (family is AMD and request.cores == 100):
        raise NotConvertible(
            f"{ref.label}: {names.resource_core_name}={request.cores} asks for part of an"
            f" {family.title}, and {driver} cannot share a device (it allocates whole ones):"
            f" ask {names.resource_count_name} for whole devices instead, or keep this pod on"
            " legacy HAMi",
            code=422,
            reason="whole-devices-only",
        )
    for key in family.uuid_annotations:
        if annotations.get(key) is not None:
            raise NotConvertible(
                f"annotation {key} names legacy device IDs, which {driver} does not publish"
                " (its device IDs are its own): remove it, or select devices by a node"
                " selector",
                code=422,
                reason="unmappable-annotation",
            )


def _type_selectors(
    family: WholeDeviceFamily, annotations: dict[str, Any], driver: str, warnings: list[str]
) -> list[str]:
    """The legacy type annotations, matched against the driver's productName."""
    selectors: list[str] = []
    product = cel.attribute(driver, "productName")
    for type_key, negated in ((family.use_type, False), (family.nouse_type, True)):
        if type_key is None:
            continue
        items = annotation_items(annotations, type_key, warnings)
        if items:
            listed = literal_list(type_key, [ascii_upper(item) for item in items])
            expression = f"{listed}.exists(f, {product}.upperAscii().contains(f))"
            selectors.append(cel.negate(expression) if negated else expression)
            warnings.append(
                f"annotation {type_key}: matched against {driver}'s productName (legacy type names"
                " may differ)"
            )
    return selectors


class WholeDeviceProfile(ProfileDefaults):
    """A family whose driver allocates whole devices, with HAMi's names under `section` of the
    device config and this webhook's settings under hamiDraWebhook.vendors.<settings_key>."""

    def __init__(self, device: WholeDeviceFamily) -> None:
        self.device = device
        self.key = device.key

    def _configured(self, policy: Policy) -> tuple[WholeDeviceNames, WholeDeviceSettings]:
        sections, vendors = policy.hami_vendors, policy.webhook.vendors
        if self.device is AMD:
            return sections.amd, vendors.amd
        return sections.awsneuron, vendors.aws_neuron

    def family(self, policy: Policy) -> Family:
        names, settings = self._configured(policy)
        driver = settings.driver_name
        return Family(
            self.device.key,
            self.device.title,
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
            f"hamiDraWebhook.vendors.{self.device.settings_key}.convert: true",
        )

    def resolve(
        self,
        ref: ContainerRef,
        container: Any,
        annotations: dict[str, Any],
        policy: Policy,
        warnings: list[str],
    ) -> Resolved:
        names, settings = self._configured(policy)
        request = read_vendor_request(
            container,
            ref,
            names.resource_count_name,
            names.resource_memory_name,
            names.resource_core_name,
        )
        requests_only(request, ref, warnings)
        ask = device_ask(self.device, names, request, ref, annotations, settings, warnings)
        plan = ContainerPlan(ref, request, ask, self.device.key)
        return (plan, legacy_values(container, request), "")

    def quota_groups(self, policy: Policy) -> tuple[QuotaGroup, ...]:
        names, settings = self._configured(policy)
        if not settings.convert:
            return ()
        device = self.device
        group = QuotaGroup(
            device.key,
            present(names.resource_count_name),
            present(names.resource_memory_name),
            present(names.resource_core_name),
            hami_memory=device.hami_keys,
            hami_cores=device.hami_keys,
            driver=settings.driver_name,
            device_class=settings.device_class_name,
            whole_cores=device.whole_cores,
            sized_by_slices=device.sized_by_slices,
        )
        return (group,)

    def held(self, group: QuotaGroup, plan: ContainerPlan) -> DeviceHold:
        """Whole devices: all their memory and all their cores."""
        ask = plan.ask
        return DeviceHold(ask.count if ask else 0, None, None, 100)


AMD_PROFILE = WholeDeviceProfile(AMD)
NEURON_PROFILE = WholeDeviceProfile(NEURON)
