"""Why a pod's ResourceClaimTemplate could not be confirmed (`TemplateUnavailable`), from what
the API answered: the refusal the pod gets, with what to do."""

from __future__ import annotations

import logging

from hami_dra_webhook.kube.port import ApiError

log = logging.getLogger("hami_dra_webhook.templates")


class TemplateUnavailable(Exception):
    """A template could not be confirmed; the pod must be refused with `message`."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def foreign(namespace: str, name: str, wrong: str) -> TemplateUnavailable:
    """The refusal for a pod whose template's name is held by an object the webhook did not
    write (nothing is stamped or changed on it)."""
    what = f"ResourceClaimTemplate {namespace}/{name}"
    log.warning("refused to use %s, which the webhook did not write: %s", what, wrong)
    return TemplateUnavailable(
        409,
        f"{what} exists but is not the one this webhook writes ({wrong}): someone else"
        f" created or changed it, so it is not used; delete it (kubectl -n {namespace}"
        f" delete resourceclaimtemplate {name}) and create the pod again",
    )


def unavailable(error: ApiError, namespace: str, name: str) -> TemplateUnavailable:
    """The refusal for an API error while creating, reading or stamping the template."""
    what = f"ResourceClaimTemplate {namespace}/{name}"
    if error.status in (401, 403):
        return TemplateUnavailable(
            500,
            f"the webhook may not create {what} ({error.status} {error.reason}:"
            f" {error.message}); check its RBAC",
        )
    if error.status in {400, 422}:
        return TemplateUnavailable(422, f"the API server rejected {what}: {error.message}")
    if error.status == 0:
        return TemplateUnavailable(
            503, f"the Kubernetes API did not answer while creating {what} ({error}); retry"
        )
    return TemplateUnavailable(503, f"the Kubernetes API failed to create {what} ({error}); retry")
