"""What the core decides for one pod: a tagged union of three shapes, each with only its fields.

`Converted` carries the patch, the templates and the plan (what each GPU container gets);
`Unchanged` says why nothing changes where that is worth saying; `Refusal` carries the HTTP code
and the message. Every shell (webhook, dry-run, convert, scan) reads these and derives nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, NamedTuple

from hami_dra_webhook.core.legacy.request import GpuShare, LegacyRequest
from hami_dra_webhook.core.model import patch
from hami_dra_webhook.core.model.types import ContainerRef, JsonObject
from hami_dra_webhook.core.outcome.ask import DeviceAsk

Outcome = Literal["unchanged", "converted", "refused"]

# Notes about one container, worded once for every shell (the webhook prefixes the container).
PRIORITY_NOTE = "{name} is set as {env}; it has no feedback loop without legacy HAMi"
EXCLUSIVE_CORES_NOTE = (
    "cores 100 with part of the memory; under DRA another claim may still share this GPU"
)
INIT_CLAIMS_HELD = (
    "init and app containers hold their GPU claims together for the pod's life;"
    " legacy HAMi counted only the peak"
)


# What a family's profile read a container to want (core/vendors/): NVIDIA's share (its device
# ask waits for the pod's selectors), another family's device ask, or no device (count 0,
# defaultGPUNum 0). One of the three, never two: legacy keys are removed either way.
Wanted = GpuShare | DeviceAsk | None


class Claimed(NamedTuple):
    """What a container that gets devices was given: its ResourceClaimTemplate, the name of its
    entry in spec.resourceClaims and the device ask that template holds."""

    template: str
    claim: str
    ask: DeviceAsk


class ContainerPlan(NamedTuple):
    """One container with legacy keys: what it asked for and what it gets under DRA. (A tuple:
    immutable as a frozen dataclass, and made in a fifth of the time; two are made for every
    GPU container of every pod translated.)"""

    ref: ContainerRef
    request: LegacyRequest
    wants: Wanted
    family: str  # the device family (core/vendors/families.py): no default, every plan says
    claimed: Claimed | None = None  # set once the translation gave it a claim
    # What the decision said of this container beside its devices (also among its warnings):
    # `scan` reports them from here instead of deciding again.
    notes: tuple[str, ...] = ()

    @property
    def share(self) -> GpuShare | None:
        """NVIDIA's share, as legacy HAMi read it (None for every other family)."""
        wants = self.wants
        return wants if isinstance(wants, GpuShare) else None

    @property
    def ask(self) -> DeviceAsk | None:
        """What the container asks of its driver: the claim's, or the profile's own."""
        if self.claimed is not None:
            return self.claimed.ask
        wants = self.wants
        return wants if isinstance(wants, DeviceAsk) else None

    @property
    def template(self) -> str | None:
        return self.claimed.template if self.claimed is not None else None

    @property
    def claim(self) -> str | None:
        return self.claimed.claim if self.claimed is not None else None

    @property
    def gets_devices(self) -> bool:
        return self.wants is not None

    @property
    def shares_a_gpu(self) -> bool:
        """Less than a whole device: needs DRA consumable capacity to be placed as asked."""
        ask = self.ask
        if ask is not None:
            return not ask.whole
        share = self.share
        return share is not None and not share.is_whole

    @property
    def summary(self) -> str:
        """What the container gets, in words."""
        ask = self.ask
        if ask is not None:
            return ask.summary
        share = self.share
        return describe(share) if share is not None else "no device"


def describe(share: GpuShare) -> str:
    """A share in words, as `dry-run`, `scan` and the webhook's warnings say it."""
    gpus = "1 GPU" if share.count == 1 else f"{share.count} different GPUs"
    if share.percentage is not None:
        memory = f"{share.percentage}% of each card's memory"
    elif share.memory_mib is not None:
        memory = f"{share.memory_mib} MiB"
    else:
        memory = "the whole memory"
    if share.cores == 100:
        compute = "all SMs"
    elif share.cores == 0:
        compute = "no SM limit"
    else:
        compute = f"{share.cores}% of SMs"
    return f"{gpus}, {memory}, {compute}"


@dataclass(frozen=True, slots=True)
class Converted:
    """The pod changes: `patch` (relative to the pod's root) and the templates it references."""

    patch: list[patch.PatchOp]
    templates: list[JsonObject]
    plan: tuple[ContainerPlan, ...]
    warnings: list[str]
    resources: list[str]  # the legacy resource names the pod used (metrics, cluster warnings)
    init_claims_held: bool = False  # init and app containers both hold claims (INIT_CLAIMS_HELD)
    outcome: ClassVar[Literal["converted"]] = "converted"

    @property
    def shares_a_gpu(self) -> bool:
        return any(container.shares_a_gpu for container in self.plan)

    @property
    def summaries(self) -> list[str]:
        """The lines of `warnings` that say what each GPU container gets: the conversion's
        summary, which the webhook sends as a warning (kubectl shows nothing else) and the
        command line prints as `info:`."""
        return [f"{c.ref.label}: {c.summary} -> {c.template}" for c in self.plan if c.template]

    def apply(self, pod: JsonObject) -> JsonObject:
        """The converted pod; the input is not modified."""
        result: JsonObject = patch.apply(pod, self.patch)
        return result


@dataclass(frozen=True, slots=True)
class Unchanged:
    """The pod stays as it is; `left_alone` says why when it uses legacy keys all the same."""

    warnings: list[str]
    left_alone: str | None = None
    outcome: ClassVar[Literal["unchanged"]] = "unchanged"


def excluded_namespace(namespace: str | None, excluded: frozenset[str]) -> Unchanged | None:
    """The decision for a pod of a namespace the webhook never converts (kube-system, its own,
    those its configuration excludes), or None for one it converts."""
    if namespace is None or namespace not in excluded:
        return None
    note = f"namespace {namespace} is excluded from conversion; nothing changed"
    return Unchanged(warnings=[note], left_alone=note)


@dataclass(frozen=True, slots=True)
class Refusal:
    """The pod cannot be converted exactly. `code` is a 4xx HTTP status, `reason` a stable tag
    for tooling (every refusal has one: docs/translation.md lists them), `message` the words
    beside it; `plan` holds the containers understood before the refusal (for reports)."""

    code: int
    message: str
    warnings: list[str]
    reason: str
    plan: tuple[ContainerPlan, ...] = ()
    outcome: ClassVar[Literal["refused"]] = "refused"


Decision = Converted | Unchanged | Refusal
