"""One quota pass over a namespace of many converted pods: time and memory (issue 47).

    .venv/bin/python -m benchmarks.quota_pass [--pods 10000]

The in-memory API (tests/support/memory_api.py, a stand-in for kube-apiserver: pages of 500 as
the real client asks, each decoded afresh from its JSON; each pod as the webhook's conversion of
a ReplicaSet's pod makes it, with its claim allocated): creating ten thousand pods through a real control plane takes
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
from typing import Any

from hami_dra_webhook.cluster.quota.lease import Lease
from hami_dra_webhook.cluster.quota.view import QuotaView
from hami_dra_webhook.cluster.quota.work import QuotaGate
from hami_dra_webhook.core.outcome.decision import Converted
from hami_dra_webhook.core.quota.gpu_quota import GATE, HELD_LABEL, HELD_LABEL_VALUE, quota_keys
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
from hami_dra_webhook.kube.port import paths
from tests.support.memory_api import MemoryApi
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=10_000)
    args = parser.parse_args()
    made = [converted(i) for i in range(args.pods)]
    pods, claims = [p for p, _ in made], [c for _, c in made]
    pods[-1]["spec"]["schedulingGates"] = [{"name": GATE}]
    pods[-1]["metadata"].setdefault("labels", {})[HELD_LABEL] = HELD_LABEL_VALUE

    def cluster() -> MemoryApi:
        """The namespace as the pass finds it, afresh: its last pod held (the pass releases it)."""
        api = MemoryApi(page=PAGE)
        api.namespaces(NAMESPACE, "hami-system")
        hard = {"limits.nvidia.com/gpumem": str(10**9)}
        quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"}}
        api.put(paths.resource_quotas(NAMESPACE), {**quota, "spec": {"hard": hard}})
        for pod, claim in zip(pods, claims, strict=True):
            api.put(paths.pods(NAMESPACE), pod)
            api.put(paths.claims(NAMESPACE), claim)
        return api

    async def one_pass(api: MemoryApi) -> Any:
        lease = Lease(api, "hami-system", "lease", "bench")  # type: ignore[arg-type]
        await lease.hold()
        view = QuotaView(api, quota_keys(DEFAULT_POLICY))  # type: ignore[arg-type]
        gate = QuotaGate(api, lambda: DEFAULT_POLICY, lease, view)  # type: ignore[arg-type]
        return await gate.run_pass()

    asyncio.run(one_pass(cluster()))  # warm: imports, caches
    api = cluster()
    started = time.perf_counter()
    asyncio.run(one_pass(api))
    plain = time.perf_counter() - started
    api = cluster()
    tracemalloc.start()
    started = time.perf_counter()
    report = asyncio.run(one_pass(api))
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
