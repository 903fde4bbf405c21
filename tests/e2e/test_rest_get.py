"""tests/support/rest_get.py against each flavor's real kube-apiserver: the answer of one HTTPS
call is what `kubectl get -o json` prints for every form it reads (tests/test_rest_get_forms.py
holds which forms those are)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.cluster import Cluster, CommandFailed
from tests.support.rest_get import RestGet


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
    reads = RestGet(cluster.plane.request)
    same = [
        ("configmap", "one", "-n", namespace),
        ("configmaps/two", "-n", namespace),
        ("cm", "-n", namespace),
        ("configmaps", "-n", namespace, "-l", "team=b"),
        ("configmaps", "-n", namespace, "--field-selector=metadata.name=one"),
        ("namespace", namespace),
        ("deviceclasses.resource.k8s.io",),
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
    assert reads.get(("configmaps", "-n", namespace, "--sort-by=.metadata.name")) is None
    assert reads.get(("no-such-kind",)) is None
