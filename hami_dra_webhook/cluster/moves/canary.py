"""The last gate of a move to the DRA pool, before the node is given back: its driver pod is
Ready, and a canary, a converted pod, runs there.

The canary is what the webhook makes of `nvidia.com/gpu: 1, nvidia.com/gpumem: 1000,
nvidia.com/gpucores: 10` (core/translate/pod.py, the one translation), with its claim created
directly (no template: nothing of it outlives the move). It runs on this node only (node
affinity on `metadata.name`), tolerating every taint (the node is still cordoned), in the
driver's own namespace, with the driver pod's own image (already on the node: no registry is
asked; it has a shell and `sleep`, which the canary needs); the driver is the chart's, found by
its ClusterRoleBinding, namespace, ServiceAccount and DaemonSet (cluster/moves/chart_driver.py). Its
container checks that it sees the environment its request means (`CUDA_DEVICE_MEMORY_LIMIT_0=1000m`,
`CUDA_DEVICE_SM_LIMIT_0=10`: docs/kubernetes-facts.md, the driver's CDI spec), and then stays up,
Ready; it fails at once, saying what it saw, otherwise. It passes when it is Ready and, read
while it runs (an ended pod's claim is deallocated), its claim is allocated by the driver on
this node and reserved for it. Either way the pod and the claim are deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from hami_dra_webhook.cluster.moves.chart_driver import (
    chart_driver_pods,
    driver_name,
    read_chart_driver,
)
from hami_dra_webhook.core.migration.holdings import claim_on_node
from hami_dra_webhook.core.migration.move_state import CALL_TIMEOUT, MoveError
from hami_dra_webhook.core.model.claim_view import ClaimView
from hami_dra_webhook.core.model.pod_view import PodView
from hami_dra_webhook.core.model.shapes import as_text
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.settings.policy import Policy
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths

T = TypeVar("T")
CANARY_MEMORY_MIB = 1000
CANARY_CORES = 10
CANARY_LABEL = "hami.io/gpu-pool-canary"
EXPECTED_ENV = {
    "CUDA_DEVICE_MEMORY_LIMIT_0": f"{CANARY_MEMORY_MIB}m",
    "CUDA_DEVICE_SM_LIMIT_0": str(CANARY_CORES),
}
PASSED = "/tmp/hami-gpu-canary-passed"
# Every variable as expected: marks it (its readiness probe) and stays up; else writes what it
# saw to the termination message (read back from the pod's status: no pods/log permission
# needed) and exits 1.
CHECK = " && ".join(f'test "${name}" = "{value}"' for name, value in EXPECTED_ENV.items())
SCRIPT = (
    f"if {CHECK}; then touch {PASSED} && exec sleep 600; fi; "
    + "echo "
    + " ".join(f'"{name}=${{{name}:-unset}}"' for name in EXPECTED_ENV)
    + " > /dev/termination-log; exit 1"
)


async def driver_pod(api: KubeApi, node: str, release: str) -> JsonObject | None:
    """The chart's driver's pod on `node` (cluster/moves/chart_driver.py: never by a label), a Ready
    one first."""
    driver = await read_chart_driver(api, release, CALL_TIMEOUT)
    if driver is None:
        return None
    pods = await chart_driver_pods(api, driver, CALL_TIMEOUT, node)
    live = [p for p in pods if not PodView.of(p).deleting]
    live.sort(key=lambda p: not PodView.of(p).ready)
    return live[0] if live else None


def driver_words(pod: JsonObject | None, node: str, release: str) -> str:
    """Why the driver is not ready on `node`, in words ("" when its pod is Ready)."""
    if pod is None:
        return (
            f"no driver pod (of the chart's DaemonSet {driver_name(release)}, release"
            f" {release}) on {node}: is the driver installed (driver.enabled), and does its"
            " nodeAffinity, or a taint it does not tolerate, keep it off?"
        )
    view = PodView.of(pod)
    if view.ready:
        return ""
    return f"the driver pod {view.namespace}/{view.name} is not Ready ({view.phase or 'no status'})"


def _on_node(node: str) -> JsonObject:
    """Node affinity to exactly `node`, by its name (matchFields: no label needed)."""
    names = {"key": "metadata.name", "operator": "In", "values": [node]}
    terms = [{"matchFields": [names]}]
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


def canary_objects(
    policy: Policy, node: str, namespace: str, image: str
) -> tuple[JsonObject, JsonObject]:
    """The canary's claim and pod, as the webhook would convert the legacy ask."""
    name = f"hami-gpu-canary-{node}"[:63].rstrip("-.")
    limits = {
        policy.legacy_resource_names.gpus: "1",
        policy.legacy_resource_names.memory: str(CANARY_MEMORY_MIB),
        policy.legacy_resource_names.cores: str(CANARY_CORES),
    }
    legacy: JsonObject = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {CANARY_LABEL: node}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "affinity": _on_node(node),
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "canary",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", SCRIPT],
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "readinessProbe": {
                        "exec": {"command": ["sh", "-c", f"test -f {PASSED}"]},
                        "periodSeconds": 1,
                    },
                    "resources": {"limits": limits},
                }
            ],
        },
    }
    decision = translate_pod(legacy, policy, namespace)
    if not isinstance(decision, Converted) or len(decision.templates) != 1:
        raise MoveError(f"the canary pod does not convert under this policy: {decision}")
    template = decision.templates[0]
    pod = decision.apply(legacy)
    entry = pod["spec"]["resourceClaims"][0]
    claim: JsonObject = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": {CANARY_LABEL: node}},
        "spec": template["spec"]["spec"],
    }
    pod["spec"]["resourceClaims"] = [{"name": entry["name"], "resourceClaimName": name}]
    return claim, pod


@dataclass
class Canary:
    api: KubeApi
    policy: Policy
    node: str
    deadline: float  # time.monotonic() by which it must have passed
    poll: float = 1.0
    release: str = "hami-dra-webhook"  # the chart's full name: its driver is the one trusted

    async def run(self) -> str:
        """Runs the canary; its result in words, or MoveError (the pod and claim are
        deleted either way)."""
        driver = await driver_pod(self.api, self.node, self.release)
        why = driver_words(driver, self.node, self.release)
        if driver is None or why:
            raise MoveError(f"canary: {why}")
        namespace = str(driver["metadata"]["namespace"])
        image = str(driver["spec"]["containers"][0]["image"])
        claim, pod = canary_objects(self.policy, self.node, namespace, image)
        name = str(pod["metadata"]["name"])
        await self._delete(namespace, name)  # a canary left by an interrupted run
        await self._gone(namespace, name)
        try:
            await self._call(
                self.api.create_object(paths.claims(namespace), claim, timeout=CALL_TIMEOUT)
            )
            await self._call(
                self.api.create_object(paths.pods(namespace), pod, timeout=CALL_TIMEOUT)
            )
            return await self._watch(namespace, name)
        finally:
            with contextlib.suppress(MoveError):
                await self._delete(namespace, name)

    async def _watch(self, namespace: str, name: str) -> str:
        while True:
            pod = await self._call(
                self.api.get_path(paths.pod(namespace, name), timeout=CALL_TIMEOUT)
            )
            view = PodView.of(pod)
            if view.phase == "Running" and view.ready:
                return await self._allocated_here(namespace, view)
            if view.ended:
                raise MoveError(
                    f"canary: pod {namespace}/{name} failed on {self.node}:"
                    f" {_termination(view) or 'no message'}; expected"
                    f" {', '.join(f'{k}={v}' for k, v in EXPECTED_ENV.items())}"
                )
            if time.monotonic() > self.deadline:
                raise MoveError(
                    f"canary: timed out waiting for pod {namespace}/{name} on {self.node}"
                    f" ({view.phase or 'no phase'}: {_waiting(view)})"
                )
            await asyncio.sleep(self.poll)

    async def _allocated_here(self, namespace: str, pod: PodView) -> str:
        name, uid = pod.name, pod.uid
        claim = await self._call(
            self.api.get_path(paths.claim(namespace, name), timeout=CALL_TIMEOUT)
        )
        driver = self.policy.webhook.driver_name
        view = ClaimView.of(claim)
        reserved = uid in view.reserved_pod_uids
        here = claim_on_node(view, self.node, frozenset(), {uid: self.node}, driver)
        if not (reserved and here):
            raise MoveError(
                f"canary: pod {namespace}/{name} runs, but its claim is not allocated by"
                f" {driver} on {self.node} and reserved for it"
            )
        return (
            f"a converted pod ran on {self.node}: its claim allocated there, its container saw"
            f" {', '.join(f'{k}={v}' for k, v in EXPECTED_ENV.items())}"
        )

    async def _delete(self, namespace: str, name: str) -> None:
        for path in (paths.pod(namespace, name), paths.claim(namespace, name)):
            try:
                await self.api.delete_path(path, timeout=CALL_TIMEOUT)
            except ApiError as error:
                if error.status != 404:
                    raise MoveError(f"canary: deleting {path}: {error}") from error

    async def _gone(self, namespace: str, name: str) -> None:
        """Until an earlier canary's pod and claim are gone (their names are reused)."""
        for path in (paths.pod(namespace, name), paths.claim(namespace, name)):
            while True:
                try:
                    await self.api.get_path(path, timeout=CALL_TIMEOUT)
                except ApiError as error:
                    if error.status == 404:
                        break
                    raise MoveError(f"canary: reading {path}: {error}") from error
                if time.monotonic() > self.deadline:
                    raise MoveError(f"canary: an earlier canary ({path}) is still being deleted")
                await asyncio.sleep(self.poll)

    async def _call(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except ApiError as error:
            raise MoveError(f"canary: the Kubernetes API failed: {error}") from error


def _termination(pod: PodView) -> str:
    """The first terminated container's message (the canary's termination log), or reason."""
    for terminated in pod.container_states("terminated"):
        if terminated:
            return as_text(terminated.get("message") or terminated.get("reason")).strip()
    return ""


def _waiting(pod: PodView) -> str:
    scheduled = pod.condition("PodScheduled")
    if scheduled and scheduled.get("status") != "True":
        why = as_text(scheduled.get("message")) or as_text(scheduled.get("reason"))
        return f"not scheduled: {why or None}"
    for waiting in pod.container_states("waiting"):
        if waiting:
            reason, message = as_text(waiting.get("reason")), as_text(waiting.get("message"))
            return f"{reason or None}: {message}".strip(": ")
    return "no container status yet"
