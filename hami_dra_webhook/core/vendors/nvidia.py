"""NVIDIA (docs/kubernetes-facts.md; docs/translation.md): a container's legacy request read and
resolved into a share (`GpuShare`, core/legacy/request.py), and the share as a device ask to the
HAMi DRA driver, like every other family's. The ask is made once the pod's selectors are known
(`device_ask`): the GPU type and UUID annotations apply to every share of the pod.
One request of one device per GPU, distinct by `uuid`; cores always explicit (the driver's
default, 100, would make a share exclusive); gpumem-percentage as one `firstAvailable`
alternative per card memory size."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from hami_dra_webhook.core.legacy.request import (
    GpuShare,
    LegacyRequest,
    read_request,
    resolve_share,
    resource_maps,
)
from hami_dra_webhook.core.model import cel
from hami_dra_webhook.core.model.quantity import (
    format_bytes,
    format_mib,
    parse_byte_size,
)
from hami_dra_webhook.core.model.types import Attention, ContainerRef, JsonObject, NotConvertible
from hami_dra_webhook.core.outcome.ask import Alternative, DeviceAsk
from hami_dra_webhook.core.outcome.decision import (
    EXCLUSIVE_CORES_NOTE,
    PRIORITY_NOTE,
    ContainerPlan,
    describe,
)
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, Policy
from hami_dra_webhook.core.vendors.nvidia_notes import (
    disabled_control_note,
    hami_core_disabled,
    over_card_note,
    percentage_notes,
    scaled_memory_mib,
)
from hami_dra_webhook.core.vendors.profile import (
    Family,
    Resolved,
    SliceFacts,
    distinct_capacities,
    requests_only,
)
from hami_dra_webhook.core.vendors.quota_group import DeviceHold, QuotaGroup, present

FAMILY = "nvidia"
TASK_PRIORITY_ENV = "CUDA_TASK_PRIORITY"
CORE_POLICY_ENV = "GPU_CORE_UTILIZATION_POLICY"
LOG_LEVEL_ENV = "LIBCUDA_LOG_LEVEL"
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
MAX_SUBREQUESTS = 8  # DRA's limit on firstAvailable alternatives


def device_ask(
    share: GpuShare, selectors: tuple[str, ...], ref: ContainerRef, policy: Policy
) -> DeviceAsk:
    if share.percentage is not None:
        _check_sizes(share.percentage, ref, policy)
    return _device_ask(share, selectors, policy)


# Distinct GPU shapes a cluster asks for: dozens; 512 holds them all. (A full cache of 4,096
# held 18.6 MiB together with the template contents', claims._content: ~4.6 KiB a shape.)
@functools.lru_cache(maxsize=512)
def _device_ask(share: GpuShare, selectors: tuple[str, ...], policy: Policy) -> DeviceAsk:
    """Cached: replicas ask the same (the ask is immutable; the template cache keys on it)."""
    web = policy.webhook
    if share.percentage is None:
        alternatives: tuple[Alternative, ...] = (
            Alternative(selectors, _capacity(share.memory_mib, share.cores, policy)),
        )
    else:
        alternatives = _per_size(share.percentage, share.cores, selectors, policy)
    return DeviceAsk(
        family=FAMILY,
        device_class=web.device_class_name,
        request_name="gpu",
        count=share.count,
        alternatives=alternatives,
        # N single-device requests and one distinctAttribute: N different physical GPUs, as in
        # legacy HAMi, on every Kubernetes version (docs/kubernetes-facts.md: DRA's limits).
        distinct_attribute=f"{web.driver_name}/{web.attributes.uuid}",
        summary=describe(share),
        whole=share.is_whole,
    )


def _capacity(memory_mib: int | None, cores: int, policy: Policy) -> tuple[tuple[str, str], ...]:
    keys = policy.webhook.capacity_keys
    capacity: tuple[tuple[str, str], ...] = ((keys.cores, str(cores)),)
    if memory_mib is not None:
        capacity += ((keys.memory, format_mib(memory_mib)),)
    return capacity


def _check_sizes(percentage: int, ref: ContainerRef, policy: Policy) -> None:
    sizes = policy.webhook.device_memory_sizes
    name = policy.nvidia.resource_memory_percentage_name
    if not sizes:
        raise NotConvertible(
            f"{ref.label}: {name}={percentage} needs the cluster's GPU memory sizes;"
            " set hamiDraWebhook.deviceMemorySizes (e.g. [80Gi])",
            code=422,
            reason="no-memory-sizes",
        )
    if len(sizes) > MAX_SUBREQUESTS:
        raise NotConvertible(
            f"{ref.label}: {name} over {len(sizes)} GPU memory sizes needs more than"
            f" {MAX_SUBREQUESTS} DRA alternatives; use gpumem (MiB)",
            code=422,
            reason="too-many-memory-sizes",
        )


def _per_size(
    percentage: int, cores: int, selectors: tuple[str, ...], policy: Policy
) -> tuple[Alternative, ...]:
    """gpumem-percentage: memory depends on each device's size, so pin a size per alternative."""
    web = policy.webhook
    alternatives = []
    for size in web.device_memory_sizes:
        quantity = format_bytes(size)
        pinned = (
            *selectors,
            cel.capacity_equals(web.driver_name, web.capacity_keys.memory, quantity),
        )
        memory_mib = scaled_memory_mib(size, percentage, policy)
        capacity = _capacity(memory_mib, cores, policy)
        alternatives.append(Alternative(pinned, capacity, f"mem-{quantity.lower()}"))
    if len(alternatives) == 1:
        return (Alternative(alternatives[0].selectors, alternatives[0].capacity),)
    return tuple(alternatives)


class NvidiaProfile:
    key = FAMILY

    def family(self, policy: Policy) -> Family:
        web = policy.webhook
        return Family(
            FAMILY,
            "NVIDIA GPU",
            tuple(n for n in policy.legacy_resource_names if n),
            True,
            web.driver_name,
            web.device_class_name,
            cel.driver_device_of_type(web.driver_name, web.attributes.type, web.device_type),
        )

    def resolve(
        self,
        ref: ContainerRef,
        container: Any,
        annotations: dict[str, Any],
        policy: Policy,
        warnings: list[str],
    ) -> Resolved:
        """The plan holds the share; its device ask waits for the pod's selectors (`device_ask`,
        called by the translation once they are known)."""
        _unknown_resources(ref, container, policy, warnings)
        request = read_request(container, ref, policy)
        requests_only(request, ref, warnings)
        share = resolve_share(request, ref, policy, warnings)
        notes: tuple[str, ...] = ()
        if request.priority is not None:
            name = policy.nvidia.resource_priority_name
            notes += (PRIORITY_NOTE.format(name=name, env=TASK_PRIORITY_ENV),)
        if share is not None and share.cores == 100 and (share.memory_mib or share.percentage):
            notes += (EXCLUSIVE_CORES_NOTE,)
        if notes:
            warnings += [f"{ref.label}: {note}" for note in notes]
        if share is not None:
            warnings += _share_notes(ref, container, share, policy)
        plan = (
            ContainerPlan(ref, request, share, FAMILY, notes=notes)
            if notes
            else ContainerPlan(ref, request, share, FAMILY)
        )
        record = legacy_record(request, policy) if share is not None else ""
        return (plan, record, policy.nvidia.runtime_class_name)

    def reads_pod_selectors(self, plan: ContainerPlan) -> bool:
        return plan.share is not None

    def device_ask(
        self, plan: ContainerPlan, selectors: tuple[str, ...], policy: Policy
    ) -> DeviceAsk | None:
        """The share as an ask, with the pod's GPU type and UUID selectors."""
        share = plan.share
        return None if share is None else device_ask(share, selectors, plan.ref, policy)

    def environment(self, plan: ContainerPlan, policy: Policy) -> dict[str, str]:
        """HAMi-core's settings (priority, core policy, log level); overwriteEnv hides every
        GPU from a container given no device, as from a CPU container."""
        env = {}
        if plan.share is None and policy.nvidia.overwrite_env:
            env[VISIBLE_DEVICES_ENV] = "none"
        if plan.request.priority is not None:
            env[TASK_PRIORITY_ENV] = str(plan.request.priority)
        if plan.share is not None:
            if policy.nvidia.gpu_core_policy != "default":
                env[CORE_POLICY_ENV] = policy.nvidia.gpu_core_policy
            elif policy.nvidia.disable_core_limit:  # the legacy device plugin's, on every card
                env[CORE_POLICY_ENV] = "disable"
            if policy.nvidia.lib_cuda_log_level is not None:
                env[LOG_LEVEL_ENV] = str(policy.nvidia.lib_cuda_log_level)
        return env

    def facts_driver(self, policy: Policy) -> str | None:
        return policy.webhook.driver_name

    def read_facts(self, slices: list[JsonObject], policy: Policy) -> SliceFacts:
        """The distinct memory sizes (bytes) of the driver's GPUs, largest first."""
        devices = (device for _, device in driver_gpus(slices, policy))
        key = policy.webhook.capacity_keys.memory
        return distinct_capacities(devices, key, parse_byte_size, "memory size")

    def with_facts(self, policy: Policy, values: tuple[int, ...]) -> Policy:
        web = policy.webhook
        sizes = values or web.device_memory_sizes
        if sizes == web.device_memory_sizes:
            return policy
        return policy.with_webhook(web.model_copy(update={"device_memory_sizes": sizes}))

    def quota_groups(self, policy: Policy) -> tuple[QuotaGroup, ...]:
        """NVIDIA's quotas: per device as HAMi counts them (docs/quotas.md); its cards' size
        from the settings or, once read, the driver's slices (`with_facts`)."""
        names, web = policy.legacy_resource_names, policy.webhook
        group = QuotaGroup(
            FAMILY,
            present(names.gpus),
            present(names.memory),
            present(names.cores),
            policy.nvidia.memory_factor,
            driver=web.driver_name,
            device_class=web.device_class_name,
            memory_capacity=web.capacity_keys.memory,
            cores_capacity=web.capacity_keys.cores,
            largest_mib=policy.largest_memory_mib,
        )
        return (group,)

    def held(self, group: QuotaGroup, plan: ContainerPlan) -> DeviceHold:
        share = plan.share
        if share is None:
            return DeviceHold(0, None, None, 0)
        return DeviceHold(share.count, share.memory_mib, share.percentage, share.cores)


PROFILE = NvidiaProfile()


def _share_notes(ref: ContainerRef, container: Any, share: GpuShare, policy: Policy) -> list[str]:
    """What legacy HAMi did to this container that DRA does differently (nvidia_notes)."""
    notes: list[str] = []
    if share.memory_mib is not None:
        over = over_card_note(ref, share.memory_mib, policy)
        if over is not None:
            notes.append(over)
    if share.percentage is not None:
        notes += percentage_notes(ref, share.percentage, policy)
    disabled = hami_core_disabled(container)
    if disabled is not None:
        notes.append(disabled_control_note(ref, disabled))
    return notes


def driver_gpus(slices: list[JsonObject], policy: Policy) -> Iterator[tuple[str, JsonObject]]:
    """(node, device) for each GPU the HAMi driver publishes (its driver name and device type)."""
    web = policy.webhook
    for resource_slice in slices:
        spec = resource_slice.get("spec") or {}
        if spec.get("driver") != web.driver_name:
            continue
        for device in spec.get("devices") or []:
            attributes = device.get("attributes") or {}
            if (attributes.get(web.attributes.type) or {}).get("string") == web.device_type:
                yield str(spec.get("nodeName", "")), device


HAMI_DEFAULT_NAMES = frozenset(DEFAULT_POLICY.legacy_resource_names)
# Which configuration key names a resource, guessed from how HAMi's own names end.
_CONFIG_KEYS = (
    ("percentage", "resourceMemoryPercentageName"),
    ("mem", "resourceMemoryName"),
    ("core", "resourceCoreName"),
    ("priority", "resourcePriorityName"),
)


def _unknown_resources(
    ref: ContainerRef, container: Any, policy: Policy, warnings: list[str]
) -> None:
    """A resource of a legacy domain (`nvidia.com/vgpu`) that this configuration does not name,
    in a container that is converted. Legacy HAMi ignored it and left it on the pod, where
    kube-scheduler needs a node offering it: its device plugin offers only the configured count
    name, so the pod stayed Pending. NotConvertible here, with the configuration key that would make
    it known. HAMi's default names, renamed away in this configuration, are the exception: a
    cluster renames them so that NVIDIA's device plugin can offer them, so they stay (warned)."""
    limits, requests = resource_maps(container)
    known = policy.legacy_name_set
    unknown = [k for k in limits if k not in known] + [
        k for k in requests if k not in known and k not in limits
    ]  # usually empty, or cpu and memory
    for key in unknown:
        if not isinstance(key, str) or "/" not in key:
            continue
        if key.partition("/")[0] not in policy.legacy_domains:
            continue
        if key in HAMI_DEFAULT_NAMES:
            warnings.append(
                Attention(
                    f"{ref.label}: keeps {key}: not converted by this configuration, left for its"
                    " device plugin"
                )
            )
            continue
        setting = next((s for hint, s in _CONFIG_KEYS if hint in key), "resourceCountName")
        raise NotConvertible(
            f"{ref.label}: {key} is not one of the GPU resources this configuration converts"
            f" ({', '.join(n for n in policy.legacy_resource_names if n)}), and no node offers"
            " it, so the pod would stay Pending: if the legacy cluster named a GPU resource so,"
            f" set nvidia.{setting}: {key} in the device config (the chart's deviceConfig);"
            " otherwise remove it",
            code=422,
            reason="unknown-gpu-resource",
        )


def legacy_record(request: LegacyRequest, policy: Policy) -> str:
    """The legacy request a template came from, e.g. `nvidia.com/gpu=1,nvidia.com/gpumem=8000`."""
    values = (request.count, request.memory, request.percentage, request.cores, request.priority)
    pairs = [
        f"{name}={value}"
        for name, value in zip(policy.legacy_resource_names, values, strict=True)
        if value is not None
    ]
    return ",".join(pairs)
