"""The chart in the real kube-apiserver: helm install in each certificate mode that needs no
external controller, server-side validation of every object, the matchConditions compiled by
kube-apiserver, and RBAC as the webhook's own ServiceAccount."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path

import yaml

from hami_dra_webhook import __version__
from hami_dra_webhook.certs.pki import issue, write
from hami_dra_webhook.cli.main import main
from tests.support.cluster import RELEASE_NAMESPACE, Cluster, Release, granted, wait_for
from tests.support.pods import gpu_pod

SECURITY = Path(__file__).parents[2] / "docs" / "security.md"
SERVICE_ACCOUNT = f"system:serviceaccount:{RELEASE_NAMESPACE}:hami-dra-webhook"


def test_every_rendered_object_passes_strict_server_side_validation(
    cluster: Cluster, hami: Release
) -> None:
    manifest = cluster.helm("get", "manifest", hami.name, "-n", hami.namespace).stdout
    result = cluster.kubectl(
        "apply", "--dry-run=server", "--validate=strict", "--server-side", "--force-conflicts",
        "-n", hami.namespace, "-f", "-", stdin=manifest,
    )  # fmt: skip
    assert "Warning" not in result.stderr, result.stderr
    kinds = {d["kind"] for d in yaml.safe_load_all(manifest) if d}
    assert {"MutatingWebhookConfiguration", "DeviceClass", "DaemonSet", "Deployment"} <= kinds


def test_the_api_server_compiles_the_match_conditions(cluster: Cluster, hami: Release) -> None:
    stored = cluster.get("mutatingwebhookconfiguration", "hami-dra-webhook")
    [condition] = stored["webhooks"][0]["matchConditions"]
    assert "nvidia.com/gpu" in condition["expression"]
    broken = copy.deepcopy(stored)
    for key in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        broken["metadata"].pop(key, None)
    broken["metadata"]["name"] = "broken-match-condition"
    broken["webhooks"][0]["matchConditions"][0]["expression"] += " && object.spec.nope("
    result = cluster.kubectl(
        "create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(broken), check=False
    )
    assert result.returncode != 0
    assert "compilation failed" in result.stderr


def _documented_permissions() -> dict[str, set[str]]:
    """resource -> verbs, from the RBAC table of docs/security.md."""
    text = SECURITY.read_text()
    table = text[text.index("**What it can touch**") : text.index("It cannot read other Secrets")]
    rows = re.findall(r"^ +\| ([a-z0-9.]+) \| [^|]+ \| ([a-z ]+) \|", table, re.M)
    return {resource: set(verbs.split()) for resource, verbs in rows if resource != "resource"}


def test_rbac_grants_exactly_what_the_readme_documents(cluster: Cluster, hami: Release) -> None:
    documented = _documented_permissions()
    assert len(documented) == 13
    in_release = granted(cluster, RELEASE_NAMESPACE, SERVICE_ACCOUNT)
    assert {r: verbs for r, (verbs, _) in in_release.items()} == documented
    assert in_release["secrets"][1] == "hami-dra-webhook-tls"
    assert in_release["mutatingwebhookconfigurations.admissionregistration.k8s.io"][1] == (
        "hami-dra-webhook"
    )
    elsewhere = granted(cluster, "default", SERVICE_ACCOUNT)
    assert "secrets" not in elsewhere
    # Its certificate Secret and its Lease are in its own namespace only.
    assert set(elsewhere) == set(documented) - {"secrets", "leases.coordination.k8s.io"}
    assert in_release["leases.coordination.k8s.io"][1] == "hami-dra-webhook-gpu-quota"


def test_custom_certificate_mode_installs_and_admits(
    cluster: Cluster, hami: Release, namespace: str, tmp_path: Path
) -> None:
    bundle = issue(["127.0.0.1"])
    ca_file, cert_file, key_file = write(bundle, tmp_path / "tls")
    cluster.kubectl("create", "namespace", "hami-custom")
    cluster.kubectl(
        "create", "secret", "tls", "custom-tls", "-n", "hami-custom",
        f"--cert={cert_file}", f"--key={key_file}",
    )  # fmt: skip
    custom = Release(
        cluster,
        "custom",
        "hami-custom",
        sets=[
            "certificates.mode=custom",
            "certificates.custom.secretName=custom-tls",
            f"certificates.custom.caBundle={bundle.ca_bundle}",
            "deviceClass.create=false",  # the first release owns it
            "driver.enabled=false",
        ],
        ca_file=ca_file,
    )
    custom.install()
    try:
        custom.start(tmp_path)
        # Webhook configurations are called in name order: custom-... converts the pod first,
        # and hami-dra-webhook's matchConditions then see no legacy resource left.
        before = hami.metric("hami_dra_admissions_total")
        cluster.apply(gpu_pod("via-custom", {"nvidia.com/gpu": 1}), namespace=namespace)
        assert "resourceClaims" in cluster.pod(namespace, "via-custom")["spec"]
        wait_for(
            lambda: custom.metric("hami_dra_admissions_total", outcome="converted") == 1,
            "the custom-mode webhook to count its conversion",
        )
        assert hami.metric("hami_dra_admissions_total") == before
    finally:
        custom.uninstall()
        cluster.kubectl("delete", "namespace", "hami-custom", "--wait=false")


def test_version_reads_the_installed_webhook(cluster: Cluster, hami: Release) -> None:
    """`version --cluster`, as kubectl version shows client and server: the chart's Deployment
    with its version label, image and ready replicas (nothing runs its pods here: 0 ready)."""
    out, err = io.StringIO(), io.StringIO()
    kubeconfig = str(cluster.plane.admin_kubeconfig)
    code = main(["version", "--cluster", "--kubeconfig", kubeconfig], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    client, *webhooks = out.getvalue().splitlines()
    assert client == f"client: hami-dra-webhook {__version__}"
    expected = f"webhook: {__version__} in {hami.namespace}/{hami.fullname} ("
    assert any(line.startswith(expected) and line.endswith(" ready)") for line in webhooks)
    data = io.StringIO()
    main(["version", "--cluster", "--kubeconfig", kubeconfig, "-o", "json"], stdout=data)
    found = json.loads(data.getvalue())["webhooks"]
    assert {(w["namespace"], w["name"]) for w in found} >= {(hami.namespace, hami.fullname)}
