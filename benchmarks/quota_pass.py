"""One quota pass over a namespace of many converted pods: time and memory (issue 47).

    .venv/bin/python -m benchmarks.quota_pass [--pods 10000]

A stand-in for kube-apiserver (an in-process object answering the calls the pass makes, pages
of 500 as the real client asks, each pod as the webhook's conversion of a ReplicaSet's pod makes
it, with its claim allocated): creating ten thousand pods through a real control plane takes
longer than a benchmark should, and what is measured here is the pass's own work on what it
reads. One pod is held; the pass releases it. Prints the pass's wall time and the peak of the
Python heap during it (tracemalloc: every object the pass holds, pages included).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import time
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import orjson

from hami_dra_webhook.cluster.quota.lease import Lease
from hami_dra_webhook.cluster.quota.view import QuotaView
from hami_dra_webhook.cluster.quota.work import QuotaGate
from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.quota.gpu_quota import GATE, HELD_LABEL, HELD_LABEL_VALUE, quota_keys
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.kube.streams import json_or_empty
from tests.support.reviews import replica_pod

NAMESPACE = "tenant"
PAGE = 500


def converted(index: int) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = replica_pod()
    pod["metadata"] |= {"name": f"trainer-{index:06d}", "namespace": NAMESPACE, "uid": f"u{index}"}
    pod["metadata"]["creationTimestamp"] = (
        f"2026-12-04T00:{index // 600 % 60:02d}:{index % 60:02d}Z"
    )
    decision = translate_pod(pod, DEFAULT_POLICY, NAMESPACE)
    assert isinstance(decision, Converted)
    pod = decision.apply(pod)
    template = decision.templates[0]
    claim_name = f"{pod['metadata']['name']}-gpu"
    pod["status"] = {
        "phase": "Running",
        "resourceClaimStatuses": [
            {"name": entry["name"], "resourceClaimName": claim_name}
            for entry in pod["spec"]["resourceClaims"]
        ],
    }
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": claim_name, "namespace": NAMESPACE},
        "spec": copy.deepcopy(template["spec"]["spec"]),
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": DEFAULT_POLICY.webhook.driver_name,
                            "pool": "node-1",
                            "device": f"gpu-{index % 8}",
                            "consumedCapacity": {"memory": "3000Mi", "cores": "0"},
                        }
                    ]
                }
            }
        },
    }
    return pod, claim


class StandIn:
    """The calls a quota pass makes, answered from memory (a stand-in: no control plane)."""

    skipped_items = 0

    def __init__(self, pods: list[dict[str, Any]], claims: list[dict[str, Any]]) -> None:
        self.pods, self.claims, self.patched = pods, claims, 0

    async def list_path(self, path: str, query: Any, *, timeout: float) -> list[Any]:
        if path.endswith("/resourcequotas"):
            hard = {"limits.nvidia.com/gpumem": str(10**9)}
            return [{"metadata": {"name": "gpu", "namespace": NAMESPACE}, "spec": {"hard": hard}}]
        if path.endswith("/namespaces"):
            return [{"metadata": {"name": NAMESPACE}}]
        raise AssertionError(path)

    async def _pages(self, items: list[dict[str, Any]]) -> AsyncIterator[list[dict[str, Any]]]:
        for start in range(0, len(items), PAGE):
            # A page as the client hands it: decoded from its JSON text afresh.
            yield json_or_empty(orjson.dumps({"items": items[start : start + PAGE]}))["items"]

    def pod_pages(self, namespace: str, *, timeout: float, field_selector: str = "") -> Any:
        return self._pages(self.pods)

    def path_pages(self, path: str, query: Any, *, timeout: float) -> Any:
        if path == "/api/v1/pods":  # the pods labelled held
            return self._pages(
                [p for p in self.pods if p["metadata"].get("labels", {}).get(HELD_LABEL)]
            )
        return self._pages(self.claims)

    async def patch_pod(self, namespace: str, name: str, ops: Any, *, timeout: float) -> Any:
        self.patched += 1
        return {}

    async def list_versioned(self, path: str, query: Any, *, timeout: float) -> Any:
        return await self.list_path(path, query, timeout=timeout), "1"

    async def list_resource_slices(self, driver: str, *, timeout: float) -> list[Any]:
        return []  # no card sizes to read: the pods here ask their memory

    async def get_path(self, path: str, *, timeout: float) -> Any:
        return {"metadata": {"resourceVersion": "1"}, "spec": {}}

    async def replace_object(self, path: str, body: Any, *, timeout: float) -> Any:
        return body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=10_000)
    args = parser.parse_args()
    made = [converted(i) for i in range(args.pods)]
    pods, claims = [p for p, _ in made], [c for _, c in made]
    pods[-1]["spec"]["schedulingGates"] = [{"name": GATE}]
    pods[-1]["metadata"].setdefault("labels", {})[HELD_LABEL] = HELD_LABEL_VALUE
    api = StandIn(pods, claims)
    lease = Lease(api, "hami-system", "lease", "bench")  # type: ignore[arg-type]

    async def one_pass() -> Any:
        await lease.hold()
        view = QuotaView(api, quota_keys(DEFAULT_POLICY))  # type: ignore[arg-type]
        gate = QuotaGate(api, lambda: DEFAULT_POLICY, lease, view)  # type: ignore[arg-type]
        return await gate.run_pass()

    asyncio.run(one_pass())  # warm: imports, caches
    started = time.perf_counter()
    asyncio.run(one_pass())
    plain = time.perf_counter() - started
    tracemalloc.start()
    started = time.perf_counter()
    report = asyncio.run(one_pass())
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"{args.pods} converted pods and their claims in one namespace, pages of {PAGE}:"
        f" a pass took {plain:.2f} s ({elapsed:.2f} s with tracemalloc on; the pages' encoding"
        f" here included), its heap peaked at"
        f" {peak / 2**20:.1f} MiB above the data served; released {report.released},"
        f" used {report.usage[NAMESPACE]}"
    )


if __name__ == "__main__":
    main()
