"""The server's `AdmissionEvents` (admission/handler.py): each admission counted in the metrics
and written to the admission log."""

from __future__ import annotations

from typing import Any

from hami_dra_webhook.admission.mutator import MutationRecord
from hami_dra_webhook.core.review.wire import Request
from hami_dra_webhook.server.logs import AdmissionLog
from hami_dra_webhook.server.metrics import Metrics


class ServerEvents:
    def __init__(self, metrics: Metrics, admission_log: AdmissionLog) -> None:
        self.metrics, self.admission_log = metrics, admission_log

    def malformed(self) -> None:
        self.metrics.rejected("malformed")

    def began(self) -> None:
        self.metrics.in_flight.inc()

    def ended(self) -> None:
        self.metrics.in_flight.dec()

    def previewed(self, outcome: str, request: Request, seconds: float) -> None:
        """A workload preview: counted, and logged when it says something (a workload with
        GPU pods), so that what `kubectl apply` printed can be found again."""
        self.metrics.workload_previews.labels(outcome).inc()
        if outcome != "none":
            self.admission_log.write(preview_line(outcome, request, seconds))

    def answered(self, result: MutationRecord, seconds: float) -> None:
        self.metrics.admitted(result.operation, result.outcome, seconds, result.resources)
        if result.operation not in ("CREATE", "UPDATE"):
            return
        line = {
            "uid": result.uid,
            "user": result.user,
            "resource": result.resource,
            "namespace": result.namespace,
            "pod": result.name,
            "operation": result.operation,
            "dryRun": result.dry_run,
            "outcome": result.outcome,
            "templates": result.templates,
            "duration_ms": round(seconds * 1000, 3),
        }
        if result.message:  # a refusal: why, as the pod's creator was told ("message" is the
            # log record's own: "admission" on every line, so one filter finds them all)
            line |= {"reason": result.reason, "refusal": result.message}
        self.admission_log.write(line)


def preview_line(outcome: str, request: Request, seconds: float) -> dict[str, Any]:
    """The admission log's line of a workload preview: which workload, what its pods become."""
    kind = request.object.get("kind") if isinstance(request.object, dict) else None
    return {
        "uid": request.uid,
        "user": request.user,
        "resource": request.resource_name,
        "kind": str(kind or ""),
        "namespace": request.namespace or "",
        "workload": request.name or "",
        "operation": request.operation,
        "dryRun": request.dry_run,
        "preview": outcome,
        "duration_ms": round(seconds * 1000, 3),
    }
