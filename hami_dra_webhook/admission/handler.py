"""The admission handlers: an AdmissionReview's bytes in, the HTTP status and the answer's bytes
out, between the server's transport (server/endpoint.py) and the use cases (PodMutator, the
Volcano Job conversion, the workload preview). Each reports what happened through an
`AdmissionEvents` (the server's metrics and admission log), and is tested in process, bytes in
and bytes out (tests/server/test_handlers.py).

A review over OFF_LOOP_BYTES is decoded on the mutator's `off_loop` thread; one whose pod has
many containers (PodMutator.needs_off_loop) is translated and encoded there too, so that the
event loop gets the interpreter back every switch interval (docs/design/2026-12-02-off-loop.md).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable
from typing import Any, Protocol

import orjson

from hami_dra_webhook.admission.mutator import MutationRecord, PodMutator, internal_error
from hami_dra_webhook.admission.quota_gate import gate_answer
from hami_dra_webhook.admission.volcano import mutate_volcano_job
from hami_dra_webhook.admission.workloads import WorkloadPreview, allowed
from hami_dra_webhook.core import review
from hami_dra_webhook.core.review_fast import read_review

log = logging.getLogger("hami_dra_webhook.server")
OFF_LOOP_BYTES = 256 * 1024


class AdmissionEvents(Protocol):
    """What the handlers report (the server counts and logs it)."""

    def malformed(self) -> None:
        """A body that is no AdmissionReview was answered 400."""

    def began(self) -> None:
        """An admission's use case started (in flight)."""

    def ended(self) -> None:
        """That use case ended, whatever its result."""

    def answered(self, result: MutationRecord, seconds: float) -> None:
        """An admission was answered with `result`, `seconds` after its body was read."""

    def previewed(self, outcome: str, request: review.Request, seconds: float) -> None:
        """A workload preview of `request` was answered with `outcome`, `seconds` after its
        body was read."""


def message(status: int, text: str) -> tuple[int, bytes]:
    """A plain answer that is no AdmissionReview: `{"message": text}`."""
    return status, orjson.dumps({"message": text})


class PodAdmission:
    """POST /mutate: a pod's AdmissionReview converted, refused or left unchanged."""

    def __init__(
        self, mutator: PodMutator, events: AdmissionEvents, off_loop_bytes: int = OFF_LOOP_BYTES
    ) -> None:
        self.mutator, self.events, self.off_loop_bytes = mutator, events, off_loop_bytes

    async def __call__(self, body: bytes) -> tuple[int, bytes]:
        started = time.perf_counter()
        mutator = self.mutator
        off_loop = mutator.off_loop
        try:
            if off_loop is not None and len(body) > self.off_loop_bytes:
                loop = asyncio.get_running_loop()
                request, fast = await loop.run_in_executor(off_loop, read_review, body)
            else:
                request, fast = read_review(body)
        except review.MalformedReview as error:
            self.events.malformed()
            return message(400, str(error))
        large = mutator.needs_off_loop(request, fast)
        work = mutator.mutate(request, off_loop=large, fast=fast)
        result = await admitted(self.events, request, work, started)
        if large:
            loop = asyncio.get_running_loop()
            return 200, await loop.run_in_executor(mutator.off_loop, orjson.dumps, result.answer)
        return 200, orjson.dumps(result.answer)


class VolcanoJobAdmission:
    """POST /mutate-volcano-jobs: a Volcano Job's task templates converted at its admission
    (admission/volcano.py), recorded as a pod's admission is."""

    def __init__(self, mutator: PodMutator, events: AdmissionEvents) -> None:
        self.mutator, self.events = mutator, events

    async def __call__(self, body: bytes) -> tuple[int, bytes]:
        started = time.perf_counter()
        try:
            request = review.parse_review(body).request
        except review.MalformedReview as error:
            self.events.malformed()
            return message(400, str(error))
        work = mutate_volcano_job(self.mutator, request)
        result = await admitted(self.events, request, work, started)
        return 200, orjson.dumps(result.answer)


class QuotaGateAdmission:
    """POST /gate-gpu-quota: a GPU pod of a namespace with a GPU quota held by the quota's
    scheduling gate (admission/quota_gate.py)."""

    def __init__(self, events: AdmissionEvents) -> None:
        self.events = events

    async def __call__(self, body: bytes) -> tuple[int, bytes]:
        try:
            request = review.parse_review(body).request
        except review.MalformedReview as error:
            self.events.malformed()
            return message(400, str(error))
        self.events.began()
        try:
            return 200, orjson.dumps(gate_answer(request))
        finally:
            self.events.ended()


class WorkloadAdmission:
    """POST /validate-workloads: what the pods of an applied workload will become, as warnings
    (admission/workloads.py). It never denies: a failure here answers `allowed`, no warnings."""

    def __init__(
        self,
        mutator: PodMutator,
        events: AdmissionEvents,
        opted_in_only: bool,
        off_loop_bytes: int = OFF_LOOP_BYTES,
    ) -> None:
        self.mutator, self.events, self.off_loop_bytes = mutator, events, off_loop_bytes
        self.preview = WorkloadPreview(mutator, opted_in_only=opted_in_only)

    async def __call__(self, body: bytes) -> tuple[int, bytes]:
        started = time.perf_counter()
        off_loop = self.mutator.off_loop
        if off_loop is not None and len(body) > self.off_loop_bytes:  # a large custom resource
            status, answer, judged = await asyncio.get_running_loop().run_in_executor(
                off_loop, functools.partial(self.judge, body, cached=False)
            )
        else:
            status, answer, judged = self.judge(body, cached=True)
        if judged is None:
            self.events.malformed()
        else:
            self.events.previewed(*judged, time.perf_counter() - started)
        return status, answer

    def judge(
        self, body: bytes, cached: bool
    ) -> tuple[int, bytes, tuple[str, review.Request] | None]:
        """Decode and judge; (status, answer, (outcome, the request)), None for a malformed
        body."""
        try:
            request = review.parse_review(body).request
        except review.MalformedReview as error:
            return (*message(400, str(error)), None)
        try:
            answered = self.preview.answer(request, cached=cached)
        except Exception:
            log.exception("workload preview %s failed unexpectedly", request.uid)
            return 200, orjson.dumps(allowed(request.uid)), ("none", request)
        return 200, orjson.dumps(answered.answer), (answered.outcome, request)


async def admitted(
    events: AdmissionEvents, request: Any, work: Awaitable[MutationRecord], started: float
) -> MutationRecord:
    """Run one admission's use case, counted in flight; an unexpected failure is logged and
    answered as an internal error; the result is reported."""
    events.began()
    try:
        result = await work
    except Exception:
        log.exception("admission %s failed unexpectedly", request.uid)
        result = internal_error(request)
    finally:
        events.ended()
    events.answered(result, time.perf_counter() - started)
    return result
