"""AdmissionReview v1 on the wire: the request parsed (the envelope as pydantic models, the
object as a raw dict) and one encoder from a `Decision` to the typed answer."""

from __future__ import annotations

import base64
from typing import Any, Final, Literal, NotRequired, Protocol, TypedDict

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hami_dra_webhook.core.model.types import short_warning
from hami_dra_webhook.core.outcome.decision import Converted, Decision, Refusal

API_VERSION: Final = "admission.k8s.io/v1"
KIND: Final = "AdmissionReview"


class MalformedReview(ValueError):
    """The request body is not an AdmissionReview v1 we can answer (HTTP 400)."""


class GroupVersionKind(BaseModel):
    model_config = ConfigDict(extra="allow")
    group: str = ""
    version: str = ""
    kind: str = ""


class GroupVersionResource(BaseModel):
    model_config = ConfigDict(extra="allow")
    group: str = ""
    version: str = ""
    resource: str = ""


class AdmissionRequest(BaseModel):
    # Fields by their wire names only (`oldObject`, never `old_object`), as kube-apiserver
    # writes them and the fast reader (`review_fast`) reads them.
    model_config = ConfigDict(extra="allow")

    uid: str = Field(min_length=1)
    kind: GroupVersionKind
    resource: GroupVersionResource | None = None
    sub_resource: str | None = Field(None, alias="subResource")
    name: str | None = None
    namespace: str | None = None
    operation: str
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = Field(None, alias="oldObject")
    dry_run: bool = Field(False, alias="dryRun")
    user_info: dict[str, Any] | None = Field(None, alias="userInfo")

    @property
    def user(self) -> str:
        """Who asked (userInfo.username): with `uid`, the join key with the audit log."""
        name = (self.user_info or {}).get("username")
        return name if isinstance(name, str) else ""

    @property
    def resource_name(self) -> str:
        """group/version/resource[/subresource], as the audit log writes objectRef."""
        if self.resource is None:
            return ""
        found = self.resource
        text = "/".join(part for part in (found.group, found.version, found.resource) if part)
        return f"{text}/{self.sub_resource}" if self.sub_resource else text

    @property
    def is_pod(self) -> bool:
        return self.kind.group == "" and self.kind.kind == "Pod" and not self.sub_resource

    @property
    def adds_ephemeral_containers(self) -> bool:
        return (
            self.kind.group == ""
            and self.kind.kind == "Pod"
            and self.sub_resource == "ephemeralcontainers"
            and self.operation == "UPDATE"
        )


class Request(Protocol):
    """What the use case reads of an admission request: `AdmissionRequest` (the full parse) and
    `review_fast.FastRequest` (a pod CREATE read fast) both are one."""

    @property
    def uid(self) -> str: ...
    @property
    def operation(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def object(self) -> dict[str, Any] | None: ...
    @property
    def old_object(self) -> dict[str, Any] | None: ...
    @property
    def dry_run(self) -> bool: ...
    @property
    def user(self) -> str: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def is_pod(self) -> bool: ...
    @property
    def adds_ephemeral_containers(self) -> bool: ...


class AdmissionReview(BaseModel):
    model_config = ConfigDict(extra="allow")

    api_version: Literal["admission.k8s.io/v1"] = Field(alias="apiVersion")
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


def parse_review(body: bytes) -> AdmissionReview:
    """The whole body decoded and validated: the full parse (`review_fast.read_review` reads
    most pod CREATEs without it, and falls back to it wherever it cannot tell)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        if "depth limit" in str(error):  # orjson stops at 1024 levels
            raise MalformedReview(
                "the body is nested too deeply to be a Kubernetes object"
            ) from error
        raise MalformedReview(f"the body is not JSON: {error}") from error
    try:
        return AdmissionReview.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the body"
        raise MalformedReview(
            f"not an admission.k8s.io/v1 AdmissionReview: {where}: {first['msg']}"
            f" ({error.error_count()} problem(s))"
        ) from error


class Status(TypedDict):
    code: int
    message: str
    reason: str


class AdmissionResponse(TypedDict):
    uid: str
    allowed: bool
    patch: NotRequired[str]  # base64 of an RFC 6902 JSON patch; always with patchType
    patchType: NotRequired[Literal["JSONPatch"]]
    status: NotRequired[Status]
    warnings: NotRequired[list[str]]
    auditAnnotations: NotRequired[dict[str, str]]


class ReviewAnswer(TypedDict):
    apiVersion: Literal["admission.k8s.io/v1"]
    kind: Literal["AdmissionReview"]
    response: AdmissionResponse


def encode(
    uid: str,
    decision: Decision,
    *,
    warnings: list[str] | None = None,
    audit: dict[str, str] | None = None,
) -> ReviewAnswer:
    """The AdmissionReview answer for a decision: Converted allows with its patch, Unchanged
    allows, Refusal denies with its code. `warnings` follow the decision's own; each is cut
    here, once, to what kube-apiserver shows."""
    answer: AdmissionResponse = {"uid": uid, "allowed": not isinstance(decision, Refusal)}
    if isinstance(decision, Converted) and decision.patch:
        answer["patch"] = base64.b64encode(orjson.dumps(decision.patch)).decode()
        answer["patchType"] = "JSONPatch"
    if isinstance(decision, Refusal):
        code = decision.code
        answer["status"] = {"code": code, "message": decision.message, "reason": _reason(code)}
    every = decision.warnings + warnings if warnings else decision.warnings
    if every:
        answer["warnings"] = [short_warning(w) for w in every]
    if audit:
        answer["auditAnnotations"] = audit
    return {"apiVersion": API_VERSION, "kind": KIND, "response": answer}


def _reason(code: int) -> str:
    """The Status reason for a code; other 4xx codes read as Forbidden, 5xx as InternalError."""
    named = {
        400: "BadRequest",
        409: "Conflict",
        422: "Invalid",
        503: "ServiceUnavailable",
        504: "Timeout",
    }
    return named.get(code, "Forbidden" if code < 500 else "InternalError")
