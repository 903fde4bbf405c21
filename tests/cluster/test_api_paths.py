"""Every API path comes from `kube.port.paths`, with names quoted; nothing else builds one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hami_dra_webhook.kube.port import paths

PACKAGE = Path(__file__).parents[2] / "hami_dra_webhook"


@pytest.mark.parametrize(
    ("built", "expected"),
    [
        (paths.templates("ml"), "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates"),
        (
            paths.template("../../kube-system", "a?b"),
            "/apis/resource.k8s.io/v1/namespaces/..%2F..%2Fkube-system/resourceclaimtemplates/a%3Fb",
        ),
        (paths.secret("ns", "x/y"), "/api/v1/namespaces/ns/secrets/x%2Fy"),
        (paths.device_class("a/b"), "/apis/resource.k8s.io/v1/deviceclasses/a%2Fb"),
        (paths.endpoint_slices("a b"), "/apis/discovery.k8s.io/v1/namespaces/a%20b/endpointslices"),
        (paths.workloads("Job", None), "/apis/batch/v1/jobs"),
        (paths.workloads("Pod", "ns"), "/api/v1/namespaces/ns/pods"),
    ],
)
def test_paths_quote_every_name(built: str, expected: str) -> None:
    assert built == expected


def test_no_module_outside_the_port_writes_an_api_path() -> None:
    literal = re.compile(r"""["'](/apis?/[a-z])""")
    offenders = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "port.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if literal.search(line)
    ]
    assert offenders == []
