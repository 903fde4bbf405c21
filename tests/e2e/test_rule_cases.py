"""Every object the translation emits for the rule cases (tests/cases), and every converted pod,
accepted by each real kube-apiserver under strict field validation (unknown or duplicate fields
are errors), in one server-side dry run per flavor."""

from __future__ import annotations

from typing import Any

import yaml

from hami_dra_webhook.core.translate.pod import translate_pod
from tests.support.cases import CASE_NAMES, load_case
from tests.support.cluster import Cluster


def test_every_case_output_is_accepted(cluster: Cluster) -> None:
    namespace = "team-a"  # the cases' own namespace
    cluster.ensure_namespace(namespace)
    items = []
    converted = 0
    for name in CASE_NAMES:
        pod, policy = load_case(name)
        result = translate_pod(pod, policy, namespace)
        if result.outcome != "converted":
            continue
        converted += 1
        items += result.templates
        changed = result.apply(pod)
        labels = {**changed["metadata"].get("labels", {}), "hami.io/webhook": "ignore"}
        # Ignored by a webhook the flavor's cluster may have registered: what is validated here
        # is the case's own output (custom-resource-names keeps nvidia.com/gpu, for one).
        changed["metadata"] = {**changed["metadata"], "name": f"case-{name}"[:63], "labels": labels}
        changed["metadata"].pop("generateName", None)
        # Ephemeral containers come only through their subresource, never on create.
        changed["spec"].pop("ephemeralContainers", None)
        items.append(changed)
    assert converted >= 40
    # The runtime classes the cases name (a policy's, or the pod's own) must exist.
    for runtime_class in {
        i["spec"]["runtimeClassName"]
        for i in items
        if i.get("kind") == "Pod" and i["spec"].get("runtimeClassName")
    }:
        if cluster.kubectl("get", "runtimeclass", runtime_class, check=False).returncode != 0:
            cluster.apply(
                {
                    "apiVersion": "node.k8s.io/v1",
                    "kind": "RuntimeClass",
                    "metadata": {"name": runtime_class},
                    "handler": runtime_class,
                },
                namespace=namespace,
            )
    # A case whose policy allows privileged GPU containers stands for a cluster whose chart
    # does too: where the chart's default (refusePrivileged) is installed, its
    # privileged-gpu-pods policy would refuse the pod, except in the namespaces it leaves out.
    privileged = [i for i in items if i.get("kind") == "Pod" and _privileged(i)]
    created = 0
    for where, batch in (
        (namespace, [i for i in items if i not in privileged]),
        (
            "kube-system",
            [{**i, "metadata": {**i["metadata"], "namespace": "kube-system"}} for i in privileged],
        ),
    ):
        listing = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": batch})
        result = cluster.kubectl(
            "create", "--dry-run=server", "--validate=strict", "-n", where, "-f", "-",
            stdin=listing, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "Warning" not in result.stderr, result.stderr
        created += result.stdout.count("created (server dry run)")
    assert privileged and created == len(items)


def _privileged(pod: dict[str, Any]) -> bool:
    spec = pod["spec"]
    return any(
        (c.get("securityContext") or {}).get("privileged") is True
        for c in spec.get("containers", []) + spec.get("initContainers", [])
    )
