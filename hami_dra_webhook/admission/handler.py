"""The admission envelope: an AdmissionReview's bytes in, the HTTP status and the answer's bytes
out, between the server's transport (server/endpoint.py) and the routes. `Admission` does for
every route what every route needs: it decodes (off the event loop when the body is large), counts
the admission in flight, maps an unexpected failure to the route's own answer for it, reports
what happened through an `AdmissionEvents` (the server's metrics and admission log), and encodes
the answer once. A route is a request in and an `Answered` out, and nothing more: the pods'
(`PodRoute`), the Volcano Jobs' (`VolcanoJobRoute`), the quota gate's (`QuotaGateRoute`), its
claims' (`QuotaClaimRoute`) and the workloads' preview (`WorkloadRoute`). Tested in process,
bytes in and bytes out (tests/admission/test_handlers.py).

A review over OFF_LOOP_BYTES is decoded on the mutator's `off_loop` thread; one whose pod has
many containers (PodMutator.needs_off_loop) is decided and encoded there too, so that the event
loop gets the interpreter back every switch interval (docs/design/2026-12-02-off-loop.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import orjson

from hami_dra_webhook.admission.mutator import MutationRecord, PodMutator, internal_error
from hami_dra_webhook.admission.quota_gate import claim_answer, gate_answer
from hami_dra_webhook.admission.workloads import WorkloadPreview, allowed
from hami_dra_webhook.core.review import wire
from hami_dra_webhook.core.review.fast import FastPod, read_review
from hami_dra_webhook.kube.port import KubeApi

log = logging.getLogger("hami_dra_webhook.server")
OFF_LOOP_BYTES = 256 * 1024
T = TypeVar("T")
R = TypeVar("R", bound=wire.Request)
R_co = TypeVar("R_co", bound=wire.Request, covariant=True)


class AdmissionEvents(Protocol):
    """What the envelope reports (the server counts and logs it)."""

    def malformed(self) -> None:
        """A body that is no AdmissionReview was answered 400."""

    def began(self) -> None:
        """An admission's route started (in flight)."""

    def ended(self) -> None:
        """That route ended, whatever its result."""

    def answered(self, result: MutationRecord, seconds: float) -> None:
        """An admission was answered with `result`, `seconds` after its body was read."""

    def previewed(self, outcome: str, request: wire.Request, seconds: float) -> None:
        """A workload preview of `request` was answered with `outcome`, `seconds` after its
        body was read."""


def message(status: int, text: str) -> tuple[int, bytes]:
    """A plain answer that is no AdmissionReview: `{"message": text}`."""
    return status, orjson.dumps({"message": text})


Report = Callable[[AdmissionEvents, float], None]


def _unreported(events: AdmissionEvents, seconds: float) -> None:
    """Counted in flight only (the quota gate's answers)."""


@dataclass(frozen=True, slots=True)
class Answered:
    """A route's answer, and how the envelope reports it (`report(events, seconds)`)."""

    answer: wire.ReviewAnswer
    report: Report = _unreported

    @classmethod
    def recorded(cls, record: MutationRecord) -> Answered:
        return cls(record.answer, lambda events, seconds: events.answered(record, seconds))


class Route(Protocol[R]):
    """One admission route: `request -> answer`."""

    def decode(self, body: bytes) -> tuple[R, FastPod | None]:
        """The request (raises wire.MalformedReview); and its pod when read by the fast
        reader."""

    def large(self, request: R, fast: FastPod | None) -> bool:
        """Whether deciding it takes milliseconds (it is then decided off the event loop)."""

    async def answer(self, request: R, fast: FastPod | None, off: Executor | None) -> Answered:
        """The answer; `off`: the executor its pod-sized work runs on (None: on the loop)."""

    def failed(self, request: R) -> Answered:
        """The answer when `answer` failed unexpectedly (the envelope logs the traceback)."""


def parsed(body: bytes) -> tuple[wire.AdmissionRequest, None]:
    return wire.parse_review(body).request, None


class Parsed:
    """A route whose body is decoded whole (not by the fast pod reader), and whose work is
    small whatever the request (a large body is still decoded and answered off the loop)."""

    def decode(self, body: bytes) -> tuple[wire.AdmissionRequest, None]:
        return parsed(body)

    def large(self, request: wire.AdmissionRequest, fast: FastPod | None) -> bool:
        return False


class Admission(Generic[R]):
    """The envelope around one route (the module's docstring says what it does)."""

    def __init__(
        self,
        route: Route[R],
        events: AdmissionEvents,
        off_loop: Executor | None = None,
        off_loop_bytes: int = OFF_LOOP_BYTES,
    ) -> None:
        self.route, self.events = route, events
        self.off_loop, self.off_loop_bytes = off_loop, off_loop_bytes

    async def __call__(self, body: bytes) -> tuple[int, bytes]:
        started = time.perf_counter()
        route, events = self.route, self.events
        large_body = self.off_loop is not None and len(body) > self.off_loop_bytes
        try:
            request, fast = await self._run(large_body, route.decode, body)
        except wire.MalformedReview as error:
            events.malformed()
            return message(400, str(error))
        large = self.off_loop is not None and (large_body or route.large(request, fast))
        events.began()
        try:
            answered = await route.answer(request, fast, self.off_loop if large else None)
        except Exception:
            log.exception("admission %s failed unexpectedly", request.uid)
            answered = route.failed(request)
        finally:
            events.ended()
        answered.report(events, time.perf_counter() - started)
        return 200, await self._run(large, orjson.dumps, answered.answer)

    async def _run(self, off: bool, work: Callable[..., T], *args: Any) -> T:
        if not off or self.off_loop is None:
            return work(*args)
        return await asyncio.get_running_loop().run_in_executor(self.off_loop, work, *args)


class PodRoute:
    """POST /mutate: a pod converted, refused or left unchanged (PodMutator.mutate)."""

    def __init__(self, mutator: PodMutator) -> None:
        self.mutator = mutator

    def decode(self, body: bytes) -> tuple[wire.Request, FastPod | None]:
        return read_review(body)

    def large(self, request: wire.Request, fast: FastPod | None) -> bool:
        return self.mutator.needs_off_loop(request, fast)

    async def answer(
        self, request: wire.Request, fast: FastPod | None, off: Executor | None
    ) -> Answered:
        record = await self.mutator.mutate(request, off_loop=off is not None, fast=fast)
        return Answered.recorded(record)

    def failed(self, request: wire.Request) -> Answered:
        return Answered.recorded(internal_error(request))


class VolcanoJobRoute(Parsed):
    """POST /mutate-volcano-jobs: a Volcano Job's task templates converted at its admission
    (PodMutator.mutate_job), recorded as a pod's admission is."""

    def __init__(self, mutator: PodMutator) -> None:
        self.mutator = mutator

    async def answer(
        self, request: wire.AdmissionRequest, fast: FastPod | None, off: Executor | None
    ) -> Answered:
        return Answered.recorded(await self.mutator.mutate_job(request))

    def failed(self, request: wire.AdmissionRequest) -> Answered:
        return Answered.recorded(internal_error(request))


class QuotaGateRoute(Parsed):
    """POST /gate-gpu-quota: a GPU pod of a namespace with a GPU quota held by the quota's
    scheduling gate (admission/quota_gate.py), for the pods the pod webhook did not decide."""

    def __init__(self, mutator: PodMutator) -> None:
        self.mutator = mutator

    async def answer(
        self, request: wire.AdmissionRequest, fast: FastPod | None, off: Executor | None
    ) -> Answered:
        return Answered(await gate_answer(request, self.mutator.quotas))

    def failed(self, request: wire.AdmissionRequest) -> Answered:
        return Answered(internal_error(request).answer)


class QuotaClaimRoute(Parsed):
    """POST /gate-gpu-quota-claims: a ResourceClaim of a GPU quota namespace that would grow
    what a released pod holds is refused (admission/quota_gate.py)."""

    def __init__(self, mutator: PodMutator, api: KubeApi | None) -> None:
        self.mutator, self.api = mutator, api

    async def answer(
        self, request: wire.AdmissionRequest, fast: FastPod | None, off: Executor | None
    ) -> Answered:
        return Answered(await claim_answer(request, self.api, self.mutator.policy))

    def failed(self, request: wire.AdmissionRequest) -> Answered:
        return Answered(internal_error(request).answer)


class WorkloadRoute(Parsed):
    """POST /validate-workloads: what the pods of an applied workload will become, as warnings
    (admission/workloads.py). It never denies: a failure here answers `allowed`, no warnings.
    A large body is judged off the loop without the translation cache (the loop's)."""

    def __init__(self, mutator: PodMutator) -> None:
        self.preview = WorkloadPreview(mutator)

    async def answer(
        self, request: wire.AdmissionRequest, fast: FastPod | None, off: Executor | None
    ) -> Answered:
        if off is None:
            preview = self.preview.answer(request, cached=True)
        else:
            loop = asyncio.get_running_loop()
            preview = await loop.run_in_executor(off, self.preview.answer, request, False)
        outcome = preview.outcome
        return Answered(
            preview.answer,
            lambda events, seconds: events.previewed(outcome, request, seconds),
        )

    def failed(self, request: wire.AdmissionRequest) -> Answered:
        return Answered(
            allowed(request.uid),
            lambda events, seconds: events.previewed("none", request, seconds),
        )


def routes(
    mutator: PodMutator, events: AdmissionEvents, api: KubeApi | None = None
) -> dict[str, Admission[Any]]:
    """Every admission route of the webhook, each in its envelope (`api`: the cluster's, for
    the routes that read it; None without a cluster)."""
    off = mutator.off_loop
    return {
        "/mutate": Admission(PodRoute(mutator), events, off),
        "/validate-workloads": Admission(WorkloadRoute(mutator), events, off),
        "/mutate-volcano-jobs": Admission(VolcanoJobRoute(mutator), events, off),
        "/gate-gpu-quota": Admission(QuotaGateRoute(mutator), events, off),
        "/gate-gpu-quota-claims": Admission(QuotaClaimRoute(mutator, api), events, off),
    }
