"""tests/support/rest_calls.py against each flavor's real kube-apiserver: the answer of one HTTPS
call is what `kubectl get -o json` prints for every form it reads (tests/test_rest_call_forms.py
holds which forms those are), and the namespace chores do what kubectl's do."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.cluster import Cluster, CommandFailed, wait_for
from tests.support.rest_calls import NotServed, RestCalls


def _kubectl(cluster: Cluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", "-o", "json", *args).stdout)


def test_rest_reads_answer_as_kubectl_does(cluster: Cluster) -> None:
    namespace = cluster.create_namespace("rest")
    for name, team in (("one", "a"), ("two", "b")):
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "labels": {"team": team}},
                "data": {"k": name},
            },
            namespace=namespace,
        )
    reads = RestCalls(cluster.plane.request)
    same = [
        ("configmap", "one", "-n", namespace),
        ("configmaps/two", "-n", namespace),
        ("cm", "-n", namespace),
        ("configmaps", "-n", namespace, "-l", "team=b"),
        ("configmaps", "-n", namespace, "--field-selector=metadata.name=one"),
        ("namespace", namespace),
        ("deviceclasses.resource.k8s.io",),
        ("configmaps,serviceaccounts", "-n", namespace),
    ]
    for args in same:
        assert reads.get(args) == _kubectl(cluster, *args), args
    everywhere = reads.get(("configmaps", "-A", "-l", "team"))
    assert everywhere is not None
    assert sorted(i["metadata"]["name"] for i in everywhere["items"]) == ["one", "two"]
    assert {(i["kind"], i["apiVersion"]) for i in everywhere["items"]} == {("ConfigMap", "v1")}
    nodes = reads.get(("nodes",))
    assert nodes is not None
    assert [n["metadata"]["name"] for n in nodes["items"]] == [
        n["metadata"]["name"] for n in _kubectl(cluster, "nodes")["items"]
    ]
    with pytest.raises(CommandFailed, match="404"):
        cluster.get("configmap", "absent", "-n", namespace)
    assert cluster.exists("configmap", "one", "-n", namespace)
    assert not cluster.exists("configmap", "absent", "-n", namespace)
    assert reads.get(("configmaps", "-n", namespace, "--sort-by=.metadata.name")) is None
    assert reads.get(("no-such-kind",)) is None


def test_namespace_chores_without_kubectl(cluster: Cluster) -> None:
    """What the fixtures do to their namespaces, as kubectl would: create, delete every object
    of a collection (one a controller makes again aside), delete the namespace."""
    reads = RestCalls(cluster.plane.request)
    name = "rest-chores"
    reads.create_namespace(name)
    with pytest.raises(NotServed, match="409"):
        reads.create_namespace(name)
    for made in ("one", "two"):
        cluster.kubectl("create", "configmap", made, "-n", name)
    reads.delete_all("configmaps,jobs", name, orphan=True)
    # An orphaning delete leaves each object to the garbage collector (its `orphan` finalizer):
    # gone a moment later, later still on a loaded machine (two seen left at once, 2026-12-06).
    wait_for(
        lambda: (
            not {c["metadata"]["name"] for c in cluster.get("configmaps", "-n", name)["items"]}
            & {"one", "two"}
        ),
        "the configmaps deleted by collection gone",
        timeout=60,
    )
    with pytest.raises(NotServed):
        reads.delete_all("no-such-kind", name)
    reads.delete_namespace(name)
    reads.delete_namespace(name)  # gone or going: as --ignore-not-found
    phase = (
        cluster.get("namespace", name)["status"]["phase"]
        if cluster.exists("namespace", name)
        else None
    )
    assert phase in (None, "Terminating")


def _kept(item: dict[str, Any]) -> dict[str, Any]:
    """An object without what only the client that wrote it keeps (kubectl's
    last-applied-configuration, managedFields) or what the server gives each (uid, times)."""
    metadata = {
        key: value
        for key, value in item["metadata"].items()
        if key in ("name", "namespace", "labels")
    }
    return {**{k: v for k, v in item.items() if k != "metadata"}, "metadata": metadata}


def test_rest_apply_stores_what_kubectl_apply_stores(cluster: Cluster) -> None:
    """Cluster.apply (the server's own apply, one HTTPS call an object) against `kubectl apply`
    of the same manifests: the same objects stored, created then updated, and a field the
    kind has not refused by both (in other words: the server's apply says "field not declared
    in schema", kubectl's strict validation "unknown field")."""
    ours, theirs = cluster.create_namespace("apply"), cluster.create_namespace("apply")

    def config_map(team: str, **extra: Any) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "one", "labels": {"team": team}},
            "data": {"k": team},
            **extra,
        }

    listed = {"apiVersion": "v1", "kind": "List", "items": [config_map("a")]}
    assert cluster.apply(listed, namespace=ours) == "configmap/one created\n"
    cluster.kubectl("apply", "-n", theirs, "-f", "-", stdin=json.dumps(listed))
    assert cluster.apply(config_map("b"), namespace=ours) == "configmap/one configured\n"
    cluster.kubectl("apply", "-n", theirs, "-f", "-", stdin=json.dumps(config_map("b")))
    stored = [_kept(cluster.get("configmap", "one", "-n", n)) for n in (ours, theirs)]
    assert stored[0] == {**stored[1], "metadata": {**stored[1]["metadata"], "namespace": ours}}
    assert stored[0]["data"] == {"k": "b"}
    wrong = config_map("c", spec={"replicas": 1})  # a field a ConfigMap has not
    with pytest.raises(CommandFailed, match=r"\.spec: field not declared in schema"):
        cluster.apply(wrong, namespace=ours)
    refused = cluster.kubectl(
        "apply", "-n", theirs, "-f", "-", stdin=json.dumps(wrong), check=False
    )
    assert refused.returncode != 0 and 'unknown field "spec"' in refused.stderr
    assert cluster.get("configmap", "one", "-n", ours)["data"] == {"k": "b"}
