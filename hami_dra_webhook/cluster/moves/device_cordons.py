"""A node's `hami.io/device-cordon` carried into DeviceTaintRules and back
(core/migration/device_cordons.py says what; this writes it). DeviceTaintRule is served as
resource.k8s.io/v1 from Kubernetes 1.37; 1.36 serves v1beta2 and 1.34/1.35 v1alpha3 only where
DRADeviceTaints and that API version are turned on. The same object is written in whichever
version the cluster serves."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from hami_dra_webhook.core.migration.device_cordons import (
    CORDON_ANNOTATION,
    NODE_LABEL,
    CordonError,
    CordonPlan,
    cordoned_uuids,
    node_label_value,
    plan_cordons,
)
from hami_dra_webhook.core.migration.move_state import MoveError
from hami_dra_webhook.core.migration.pools import LEGACY
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths

T = TypeVar("T")
VERSIONS = ("v1", "v1beta2", "v1alpha3")  # newest first
NOT_SERVED = (
    "{node}'s annotation {annotation} cordons {count} card(s), but this cluster serves no"
    " DeviceTaintRule, so DRA would give them work: use Kubernetes 1.37 or later (on 1.36 turn"
    " on the feature gate DRADeviceTaints and --runtime-config=resource.k8s.io/v1beta2=true), or"
    " remove the annotation to move the node without its cordon"
)


@dataclass
class DeviceCordons:
    api: KubeApi
    policy: Policy
    node: str
    timeout: float

    async def served_version(self) -> str | None:
        """The newest DeviceTaintRule version the cluster serves, or None."""
        for version in VERSIONS:
            try:
                await self.api.get_path(paths.device_taint_rules(version), timeout=self.timeout)
            except ApiError as error:
                if error.status == 404:
                    continue
                raise
            return version
        return None

    async def sync(self, uuids: list[str], slices: list[JsonObject]) -> CordonPlan | None:
        """The node's rules made what `uuids` (the annotation) asks for; None when the cluster
        serves no DeviceTaintRule and there is nothing to write."""
        version = await self.served_version()
        if version is None:
            if uuids:
                raise ApiError(404, "NotFound", self.not_served(len(uuids)))
            return None
        existing = await self._existing(version)
        plan = plan_cordons(self.node, uuids, slices, existing, self.policy)
        path = paths.device_taint_rules(version)
        for name in [*plan.delete, *(r["metadata"]["name"] for r in plan.replace)]:
            await self._delete(paths.device_taint_rule(version, name))
        for rule in [*plan.replace, *plan.create]:
            body = {**rule, "apiVersion": f"resource.k8s.io/{version}"}
            await self.api.create_object(path, body, timeout=self.timeout)
        return plan

    async def drop(self) -> int:
        """Every rule written for the node deleted (it leaves DRA: legacy HAMi reads the
        annotation itself); how many."""
        version = await self.served_version()
        if version is None:
            return 0
        names = [str(r["metadata"]["name"]) for r in await self._existing(version)]
        for name in names:
            await self._delete(paths.device_taint_rule(version, name))
        return len(names)

    def not_served(self, count: int) -> str:
        return NOT_SERVED.format(node=self.node, annotation=CORDON_ANNOTATION, count=count)

    async def _existing(self, version: str) -> list[JsonObject]:
        selector = f"{NODE_LABEL}={node_label_value(self.node)}"
        query = [("labelSelector", selector)]
        path = paths.device_taint_rules(version)
        return await self.api.list_path(path, query, timeout=self.timeout)

    async def _delete(self, path: str) -> None:
        try:
            await self.api.delete_path(path, timeout=self.timeout)
        except ApiError as error:
            if error.status != 404:
                raise


@dataclass
class MoveCordons:
    """The cordon's part in a node move (cluster/moves/node.py): checked before the move to DRA
    changes anything, carried once the driver serves the node, dropped on the way back."""

    cordons: DeviceCordons
    to: str

    async def carriable(self, node: JsonObject) -> None:
        """To DRA, cordoned cards need DeviceTaintRules: MoveError where none is served."""
        if self.to == LEGACY or not (uuids := self._uuids(node)):
            return
        if await self._call(self.cordons.served_version()) is None:
            raise MoveError(self.cordons.not_served(len(uuids)), resumable=False)

    async def carry(self, node: JsonObject) -> tuple[str, str] | None:
        """The rules made what the node's annotation asks for (to legacy: none); the step to
        tell, if anything was done."""
        if self.to == LEGACY:
            dropped = await self._call(self.cordons.drop())
            return ("cordonsDropped", f"{dropped} DeviceTaintRule(s) deleted") if dropped else None
        api, policy = self.cordons.api, self.cordons.policy
        driver, timeout = policy.webhook.driver_name, self.cordons.timeout
        slices = await self._call(api.list_resource_slices(driver, timeout=timeout))
        plan = await self._call(self.cordons.sync(self._uuids(node), slices))
        if plan is None or not (plan.cordoned or plan.delete):
            return None
        return ("cordonsCarried", plan.words)

    def _uuids(self, node: JsonObject) -> list[str]:
        try:
            return cordoned_uuids(node)
        except CordonError as error:
            raise MoveError(f"{self.cordons.node}: {error}", resumable=False) from error

    async def _call(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except ApiError as error:
            raise MoveError(f"the Kubernetes API failed: {error}") from error
