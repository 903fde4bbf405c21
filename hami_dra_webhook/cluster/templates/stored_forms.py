"""The spec kube-apiserver stores for each template the webhook writes, which may differ from
the spec written (a feature gate that drops consumable capacity, say): learnt once per name
from a server-side dry run, and kept for at most MAX_STORED_FORMS names."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from hami_dra_webhook.cluster.templates.errors import TemplateUnavailable
from hami_dra_webhook.core.model.types import JsonObject

MAX_STORED_FORMS = 4096
# Creates `template` in `namespace` as a server-side dry run: the object as it would be stored.
DryRun = Callable[[str, JsonObject], Awaitable[JsonObject | None]]


class StoredForms:
    def __init__(self, limit: int = MAX_STORED_FORMS) -> None:
        self._limit = limit
        self._forms: dict[str, JsonObject] = {}  # template name -> its spec as stored

    async def of(self, namespace: str, template: JsonObject, dry_run: DryRun) -> JsonObject:
        """The spec kube-apiserver stores for `template`, from a dry run under a generated name
        (the name itself is taken) the first time."""
        name = template["metadata"]["name"]
        known = self._forms.get(name)
        if known is not None:
            return known
        probe = {
            **template,
            "metadata": {
                "generateName": f"{name}-",
                "namespace": namespace,
                "labels": template["metadata"]["labels"],
                "annotations": template["metadata"]["annotations"],
            },
        }
        answer = await dry_run(namespace, probe)
        stored_spec = (answer or {}).get("spec")
        if not isinstance(stored_spec, dict):
            raise TemplateUnavailable(
                503, f"the dry run of ResourceClaimTemplate {namespace}/{name} returned no spec"
            )
        if len(self._forms) >= self._limit:
            del self._forms[next(iter(self._forms))]
        self._forms[name] = stored_spec
        return stored_spec
