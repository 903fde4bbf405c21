"""The Helm chart, with the real helm binary: lint, render, schemas, CEL, RBAC, golden file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import k8s_schema
from tests.support.cel_k8s import _ENV
from tests.support.chart_tools import (
    CHART,
    DRIVER,
    RELEASE,
    find,
    render,
    render_text,
    run_helm,
)

pytestmark = [
    pytest.mark.skipif(not k8s_schema.available(), reason=k8s_schema.SKIP_REASON),
]
MODES = {
    "selfManaged": [],
    "certManager": ["certificates.mode=certManager"],
    "certManager-own-issuer": [
        "certificates.mode=certManager",
        "certificates.certManager.issuerRef.name=corp-ca",
        "certificates.certManager.issuerRef.kind=ClusterIssuer",
    ],
    "custom": [
        "certificates.mode=custom",
        "certificates.custom.secretName=my-tls",
        "certificates.custom.caBundle=Y2E=",
    ],
    "callers-closed": [
        "admission.clientAuth.enabled=true",
        "admission.clientAuth.caBundle=PEM",
        "networkPolicy.enabled=true",
        "networkPolicy.controlPlaneCIDRs={10.0.0.0/28,192.0.2.10/32}",
    ],
}
CUSTOM_RESOURCES = {
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
}
GOLDEN = Path(__file__).parents[1] / "golden" / "chart-default.yaml"


@pytest.mark.parametrize("mode", sorted(MODES))
def test_lint_and_every_object_validates(mode: str) -> None:
    sets = [*MODES[mode], "serviceMonitor.enabled=true"]
    lint = run_helm("lint", "--strict", str(CHART), *[a for s in sets for a in ("--set", s)])
    assert lint.returncode == 0, lint.stdout + lint.stderr
    documents = render(*sets)
    unchecked = set()
    for document in documents:
        key = (document["apiVersion"], document["kind"])
        if key in CUSTOM_RESOURCES:
            unchecked.add(key)
            continue
        assert k8s_schema.knows(*key), f"{key} is in no Kubernetes schema"
        assert k8s_schema.object_errors(document) == [], document["metadata"]["name"]
    expected = {("monitoring.coreos.com/v1", "ServiceMonitor")}
    if mode.startswith("certManager"):
        expected.add(("cert-manager.io/v1", "Certificate"))
    if mode == "certManager":
        expected.add(("cert-manager.io/v1", "Issuer"))
    assert unchecked == expected


def test_values_outside_the_schema_are_refused() -> None:
    for bad in (
        "admission.failurePolicy=Maybe",
        "webhook.replicas=0",
        "webhook.typo=1",
        "certificates.mode=vault",
        "admission.timeoutSeconds=31",
    ):
        result = run_helm("lint", str(CHART), "--set", bad)
        assert result.returncode != 0, bad


@pytest.mark.parametrize(
    ("sets", "fragment"),
    [
        (["--set", "webhook.gc.grace=100"], "webhook.gc.grace (100) must be at least 4 x"),
        (["--set", "webhook.admissionBudget=12"], "must be below admission.timeoutSeconds (10)"),
        (["--set-string", "deviceConfig=garbage"], "deviceConfig is not a YAML map"),
        (["--set-string", "deviceConfig=nvidia: [1]"], "deviceConfig: nvidia must be a map"),
    ],
)
def test_values_the_webhook_would_refuse_fail_the_render(sets: list[str], fragment: str) -> None:
    result = run_helm("template", "x", str(CHART), *sets)
    assert result.returncode != 0
    assert fragment in result.stderr


def test_schema_describes_every_value() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(value: Any, node: dict[str, Any], path: str) -> None:
        assert node.get("type") is not None, f"{path} has no type"
        if isinstance(value, dict) and "properties" in node:
            for key, child in value.items():
                assert key in node["properties"], f"{path}.{key} is not in values.schema.json"
                walk(child, node["properties"][key], f"{path}.{key}")

    walk(values, schema, "values")


def test_default_render_matches_the_golden_file(update_golden: bool) -> None:
    text = render_text()
    if update_golden:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), "run pytest --update-golden and review the diff"


def test_webhook_configuration() -> None:
    documents = render("admission.excludeNamespaces={monitoring}", "admission.failurePolicy=Ignore")
    config = find(documents, "MutatingWebhookConfiguration")
    hook, ephemeral, gate, claims = config["webhooks"]
    assert gate["name"] == "gpu-quota.hami-dra-webhook.project-hami.io"
    assert claims["name"] == "gpu-quota-claims.hami-dra-webhook.project-hami.io"
    assert claims["clientConfig"]["service"]["path"] == "/gate-gpu-quota-claims"
    assert claims["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": ["resource.k8s.io"],
            "apiVersions": ["v1"],
            "resources": ["resourceclaims"],
            "scope": "Namespaced",
        }
    ]
    # The gate's webhook reads the quotas itself (issue 62); the claims' keeps to the
    # namespaces the quota work labelled (released pods exist only there).
    assert [e["key"] for e in gate["namespaceSelector"]["matchExpressions"]] == [
        "kubernetes.io/metadata.name"
    ]
    assert claims["namespaceSelector"]["matchExpressions"][1]["key"] == "hami.io/gpu-quota"
    assert hook["rules"] == [
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert ephemeral["clientConfig"] == hook["clientConfig"]
    assert ephemeral["failurePolicy"] == "Ignore" and ephemeral["sideEffects"] == "None"
    assert (
        hook["sideEffects"],
        hook["reinvocationPolicy"],
        hook["timeoutSeconds"],
        hook["failurePolicy"],
    ) == ("NoneOnDryRun", "IfNeeded", 10, "Ignore")
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system",
        "hami-system",
        "monitoring",
    ]
    assert hook["objectSelector"] == {
        "matchExpressions": [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]
    }
    assert hook["clientConfig"]["service"] == {
        "name": "hami-dra-webhook",
        "namespace": "hami-system",
        "path": "/mutate",
        "port": 443,
    }
    assert "caBundle" not in hook["clientConfig"]  # selfManaged: the webhook sets it
    cert_manager = find(render(*MODES["certManager"]), "MutatingWebhookConfiguration")
    assert cert_manager["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": "hami-system/hami-dra-webhook"
    }
    custom = find(render(*MODES["custom"]), "MutatingWebhookConfiguration")
    assert [w["clientConfig"]["caBundle"] for w in custom["webhooks"]] == ["Y2E="] * 4


def test_cert_manager_mode_signs_the_serving_certificate_with_a_ca_of_its_own() -> None:
    """Without issuerRef, the serving certificate is signed by a CA of the release's own, so a
    renewal of it leaves the caBundle unchanged; the CA keeps its key when renewed."""
    documents = render(*MODES["certManager"])
    certificates = {
        d["metadata"]["name"]: d["spec"] for d in documents if d["kind"] == "Certificate"
    }
    issuers = {d["metadata"]["name"]: d["spec"] for d in documents if d["kind"] == "Issuer"}
    assert issuers == {
        "hami-dra-webhook-selfsigned": {"selfSigned": {}},
        "hami-dra-webhook-ca": {"ca": {"secretName": "hami-dra-webhook-ca"}},
    }
    ca, serving = certificates["hami-dra-webhook-ca"], certificates["hami-dra-webhook"]
    assert ca["isCA"] is True and ca["secretName"] == "hami-dra-webhook-ca"
    assert ca["issuerRef"] == {"name": "hami-dra-webhook-selfsigned", "kind": "Issuer"}
    assert ca["privateKey"]["rotationPolicy"] == "Never"
    assert ca["duration"] == "87600h"
    assert serving["issuerRef"] == {"name": "hami-dra-webhook-ca", "kind": "Issuer"}
    assert serving["secretName"] == "hami-dra-webhook-tls"
    assert "hami-dra-webhook.hami-system.svc" in serving["dnsNames"]
    own = render(*MODES["certManager-own-issuer"])
    assert [d["metadata"]["name"] for d in own if d["kind"] in ("Issuer", "Certificate")] == [
        "hami-dra-webhook"
    ]
    assert find(own, "Certificate")["spec"]["issuerRef"] == {
        "name": "corp-ca",
        "kind": "ClusterIssuer",
    }


def _match(expression: str, pod: dict[str, Any]) -> bool:
    import celpy

    program = _ENV.program(_ENV.compile(expression))
    return bool(
        program.evaluate(
            {
                "object": celpy.json_to_cel(pod),
                "request": celpy.json_to_cel({"operation": "CREATE"}),
            }
        )
    )


def _pod(
    containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize(
    ("pod", "sent"),
    [
        (_pod([{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]), True),
        (_pod([{"name": "c", "resources": {"requests": {"nvidia.com/gpumem": "1000"}}}]), True),
        (
            _pod(
                [
                    {"name": "a"},
                    {"name": "b", "resources": {"limits": {"nvidia.com/gpucores": "30"}}},
                ]
            ),
            True,
        ),
        (
            _pod(
                [{"name": "c"}],
                init=[
                    {"name": "i", "resources": {"limits": {"nvidia.com/gpumem-percentage": "50"}}}
                ],
            ),
            True,
        ),
        (_pod([{"name": "c", "resources": {"limits": {"nvidia.com/priority": "1"}}}]), True),
        (
            _pod(
                [
                    {
                        "name": "c",
                        "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}},
                    }
                ]
            ),
            False,
        ),
        (_pod([{"name": "c"}]), False),
        (_pod([{"name": "c", "resources": {}}]), False),
        (_pod([{"name": "c", "resources": {"claims": [{"name": "x"}]}}], init=[]), False),
        (
            _pod(
                [{"name": "c", "resources": {"limits": {"example.com/gpu": "1"}}}],
                init=[{"name": "i"}],
            ),
            False,
        ),
    ],
    ids=[
        "gpu-limit",
        "gpumem-request",
        "second-container",
        "init-only",
        "priority",
        "cpu-only",
        "no-resources",
        "empty-resources",
        "dra-claims",
        "other-vendor",
    ],
)
def test_match_conditions_are_valid_cel_and_select_gpu_pods(
    pod: dict[str, Any], sent: bool
) -> None:
    config = find(render(), "MutatingWebhookConfiguration")
    (condition,) = config["webhooks"][0]["matchConditions"]
    assert _match(condition["expression"], pod) is sent


def _webhook_with(device_config: str) -> dict[str, Any]:
    """The MutatingWebhookConfiguration rendered with this deviceConfig."""
    result = run_helm("template", "x", str(CHART), "--set-string", f"deviceConfig={device_config}")
    assert result.returncode == 0, result.stderr
    return find([d for d in yaml.safe_load_all(result.stdout) if d], "MutatingWebhookConfiguration")


def test_match_conditions_follow_renamed_resources() -> None:
    config = _webhook_with("nvidia:\n  resourceCountName: example.com/vgpu\n")
    expression = config["webhooks"][0]["matchConditions"][0]["expression"]
    assert _match(
        expression, _pod([{"name": "c", "resources": {"limits": {"example.com/vgpu": "1"}}}])
    )
    assert not _match(
        expression, _pod([{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}])
    )


def test_match_conditions_leave_out_a_resource_named_empty() -> None:
    """`resourceMemoryName: ""` means no memory resource (legacy HAMi): gpumem alone does not
    send a pod, and "" itself is no name to look for; the other defaults stay."""
    config = _webhook_with('nvidia:\n  resourceMemoryName: ""\n')
    expression = config["webhooks"][0]["matchConditions"][0]["expression"]
    assert "''" not in expression
    assert not _match(
        expression, _pod([{"name": "c", "resources": {"limits": {"nvidia.com/gpumem": "1"}}}])
    )
    assert _match(
        expression,
        _pod([{"name": "c", "resources": {"limits": {"nvidia.com/gpumem-percentage": "5"}}}]),
    )


def test_overwrite_env_sends_every_pod_and_says_so() -> None:
    config_text = "nvidia:\n  overwriteEnv: true\n"
    assert "matchConditions" not in _webhook_with(config_text)["webhooks"][0]
    notes = run_helm(
        "install",
        "x",
        str(CHART),
        "--dry-run=client",
        "--set-string",
        f"deviceConfig={config_text}",
    )
    assert "EVERY pod of the selected namespaces goes through the webhook" in notes.stdout
    assert "blocks every pod creation" in notes.stdout


def test_rbac_is_least_privilege() -> None:
    documents = render()
    text = yaml.safe_dump(documents)
    assert "'*'" not in text and '"*"' not in text
    webhook = find(documents, "ClusterRole", "hami-dra-webhook")
    assert webhook["rules"] == [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaimtemplates"],
            "verbs": ["create", "get", "list", "watch", "patch", "delete"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["deviceclasses", "resourceslices"],
            "verbs": ["list"],
        },
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
        # GPU quotas (docs/quotas.md)
        {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch", "watch"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims"],
            "verbs": ["list", "watch"],
        },
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
            "resourceNames": ["hami-dra-webhook"],
            "verbs": ["get", "patch"],
        },
    ]
    role = find(documents, "Role", "hami-dra-webhook-certificates")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["hami-dra-webhook-tls"],
            "verbs": ["get", "update"],
        }
    ]
    lease = find(documents, "Role", "hami-dra-webhook-gpu-quota")
    assert lease["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["hami-dra-webhook-gpu-quota"],
            "verbs": ["get", "update", "watch"],
        },
    ]
    custom = render(*MODES["custom"])
    assert [d["metadata"]["name"] for d in custom if d["kind"] == "Role"] == [
        "hami-dra-webhook-gpu-quota"
    ]
    assert all(
        "mutatingwebhookconfigurations" not in r["resources"]
        and "validatingwebhookconfigurations" not in r["resources"]
        for r in find(custom, "ClusterRole", "hami-dra-webhook")["rules"]
    )


def test_webhook_deployment_is_restricted_and_rolls_on_config_change() -> None:
    deployment = find(render(), "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"][
        "seccompProfile"
    ] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # Probes on the plain-HTTP operations port, never the webhook's HTTPS port.
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "https": 8443,
        "metrics": 8080,
    }
    assert "--ops-port=8080" in container["args"] and "--port=8443" in container["args"]
    spread = spec["topologySpreadConstraints"][0]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert "--self-managed-certs" in container["args"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["app.kubernetes.io/version"] and pod_labels["app.kubernetes.io/managed-by"]
    assert find(render(), "PodDisruptionBudget")["spec"] == {
        "maxUnavailable": 1,
        "selector": deployment["spec"]["selector"],
    }
    before = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/device-config"]
    after = find(render("deviceConfig=nvidia: {defaultCores: 10}"), "Deployment")["spec"][
        "template"
    ]["metadata"]["annotations"]["checksum/device-config"]
    assert before != after


def test_the_policy_configmap_loads_as_the_webhook_reads_it() -> None:
    from hami_dra_webhook.core.settings.policy import policy_from_yaml

    config_map = find(render(), "ConfigMap")
    loaded = policy_from_yaml(config_map["data"]["device-config.yaml"])
    assert loaded.ignored_keys == () and loaded.policy.nvidia.default_gpu_num == 1


def test_driver_daemonset_and_device_class() -> None:
    documents = render()
    daemonset = find(documents, "DaemonSet", DRIVER)
    spec = daemonset["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == "docker.io/projecthami/k8s-dra-driver:v0.1.0"
    paths = {v["hostPath"]["path"] for v in spec["volumes"]}
    assert {
        "/var/lib/kubelet/plugins_registry",
        "/var/lib/kubelet/plugins",
        "/var/run/cdi",
        "/usr/local/vgpu",
        "/tmp/vgpulock",
    } <= paths
    assert "/tmp" not in paths, "not the whole host /tmp"
    # GPU feature discovery's label or Node Feature Discovery's NVIDIA PCI label: either term.
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert [t["matchExpressions"][0]["key"] for t in terms] == [
        "nvidia.com/gpu.present",
        "feature.node.kubernetes.io/pci-10de.present",
    ]
    plugin = spec["containers"][0]
    assert plugin["livenessProbe"]["grpc"] == {"port": 51516, "service": "liveness"}
    assert plugin["startupProbe"]["grpc"] == {"port": 51516, "service": "liveness"}
    assert {"name": "HEALTHCHECK_PORT", "value": "51516"} in plugin["env"]
    assert plugin["resources"]["requests"] and plugin["resources"]["limits"]["memory"]
    no_health = find(render("driver.healthcheckPort=-1"), "DaemonSet", DRIVER)["spec"]["template"][
        "spec"
    ]
    assert "livenessProbe" not in no_health["containers"][0]
    assert daemonset["spec"]["updateStrategy"] == {"type": "RollingUpdate"}
    device_class = find(documents, "DeviceClass")
    assert device_class["metadata"]["name"] == "hami-core-gpu.project-hami.io"
    assert "extendedResourceName" not in device_class["spec"]
    off = render("driver.enabled=false", "deviceClass.create=false", "monitor.enabled=false")
    assert not [d for d in off if d["kind"] in ("DaemonSet", "DeviceClass")]
    custom_tag = find(render("driver.image.tag=v0.2.0"), "DaemonSet", DRIVER)
    assert custom_tag["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":v0.2.0")


def test_device_class_follows_device_config() -> None:
    """One source of truth: the class the webhook's templates name, with the driver and type
    its selectors expect, comes from deviceConfig's hamiDraWebhook section."""
    from hami_dra_webhook.core.model import cel
    from hami_dra_webhook.core.settings.policy import policy_from_yaml

    config = (
        "hamiDraWebhook:\n  driverName: gpu.example.com\n  deviceClassName: shared-gpu\n"
        "  deviceType: vgpu\n  attributes: {type: kind}\n"
    )
    documents = render(f"deviceConfig={config}")
    device_class = find(documents, "DeviceClass")
    policy = policy_from_yaml(find(documents, "ConfigMap")["data"]["device-config.yaml"]).policy
    web = policy.webhook
    assert device_class["metadata"]["name"] == web.device_class_name == "shared-gpu"
    expression = " ".join(device_class["spec"]["selectors"][0]["cel"]["expression"].split())
    assert expression == cel.driver_device_of_type(
        web.driver_name, web.attributes.type, web.device_type
    )


def test_images_by_registry_digest_and_global_values() -> None:
    digest = "sha256:" + "b" * 64
    documents = render(
        "global.imageRegistry=mirror.example.com",
        "global.imagePullSecrets[0].name=shared",
        f"driver.image.digest={digest}",
        "webhook.image.tag=0.2.0",
    )
    deployment = find(documents, "Deployment")["spec"]["template"]["spec"]
    daemonset = find(documents, "DaemonSet", DRIVER)["spec"]["template"]["spec"]
    assert (
        deployment["containers"][0]["image"]
        == "mirror.example.com/projecthami/hami-dra-webhook:0.2.0"
    )
    assert (
        daemonset["containers"][0]["image"]
        == f"mirror.example.com/projecthami/k8s-dra-driver@{digest}"
    )
    assert deployment["imagePullSecrets"] == daemonset["imagePullSecrets"] == [{"name": "shared"}]
    failed = run_helm("template", "t", str(CHART), "--set", "driver.image.tag=")
    assert failed.returncode != 0 and "give an image tag or digest" in failed.stderr
    bad = run_helm("template", "t", str(CHART), "--set", "webhook.image.digest=latest")
    assert bad.returncode != 0 and "digest" in bad.stderr


def test_one_replica_gets_no_pod_disruption_budget() -> None:
    assert not [d for d in render("webhook.replicas=1") if d["kind"] == "PodDisruptionBudget"]
    assert not [
        d
        for d in render("webhook.podDisruptionBudget.enabled=false")
        if d["kind"] == "PodDisruptionBudget"
    ]


def test_names_args_env_host_network_and_probes_are_values() -> None:
    documents = render(
        "fullnameOverride=gpu-hook",
        "webhook.extraArgs={--max-concurrency=512}",
        "webhook.extraEnv[0].name=HAMI_DRA_LOG_LEVEL",
        "webhook.extraEnv[0].value=debug",
        "webhook.hostNetwork=true",
        "webhook.port=9443",
        "webhook.opsPort=9080",
        "webhook.readinessProbe.periodSeconds=2",
        "webhook.topologySpreadConstraints[0].maxSkew=1",
        "webhook.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
        "webhook.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
    )
    deployment = find(documents, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert deployment["metadata"]["name"] == "gpu-hook"
    assert "--max-concurrency=512" in container["args"] and "--port=9443" in container["args"]
    assert {"name": "HAMI_DRA_LOG_LEVEL", "value": "debug"} in container["env"]
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert container["readinessProbe"]["periodSeconds"] == 2
    assert spec["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    service = find(documents, "Service", "gpu-hook")
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {
        "https": "https",
        "metrics": "metrics",
    }
    named = render("nameOverride=gpuhook")
    assert find(named, "Deployment")["metadata"]["labels"]["app.kubernetes.io/name"] == "gpuhook"


def test_driver_in_a_namespace_of_its_own() -> None:
    documents = render("driver.namespace=gpu-system", "driver.createNamespace=true")
    namespace = find(documents, "Namespace")
    assert namespace["metadata"]["name"] == "gpu-system"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert find(documents, "DaemonSet", DRIVER)["metadata"]["namespace"] == "gpu-system"
    assert find(documents, "Deployment")["metadata"]["namespace"] != "gpu-system"


def test_service_monitor_scrapes_plain_http() -> None:
    monitor = find(render("serviceMonitor.enabled=true"), "ServiceMonitor", RELEASE)
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    ]


def test_helm_test_pod_checks_a_dry_run_admission() -> None:
    pod = next(d for d in render() if d["kind"] == "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    script = pod["spec"]["containers"][0]["args"][0]
    compile(script, "helm-test", "exec")  # the script is valid Python
    assert '"dryRun": True' in script and "/tls/ca.crt" in script
    assert not [d for d in render("tests.enabled=false") if d["kind"] == "Pod"]


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["home"] and chart["sources"] and chart["icon"].startswith("https://")


def _match_request(expression: str, pod: dict[str, Any], request: dict[str, Any]) -> bool:
    import celpy

    program = _ENV.program(_ENV.compile(expression))
    return bool(
        program.evaluate({"object": celpy.json_to_cel(pod), "request": celpy.json_to_cel(request)})
    )


def test_ephemeral_containers_are_sent_for_converted_pods_only() -> None:
    """Issue 11, finding 20: pods/ephemeralcontainers is routed, and only pods the webhook
    converted (its label, or a claim from one of its templates) are sent. Second
    hostile-callers issue, finding 6: by a webhook of its own, which no opt-out label skips
    (a converted pod labelled `hami.io/webhook: ignore` afterwards is still checked)."""
    config = find(render(), "MutatingWebhookConfiguration")
    pods, ephemeral, _, _ = config["webhooks"]
    assert "pods/ephemeralcontainers" not in pods["rules"][0]["resources"]
    assert ephemeral["rules"] == [
        {
            "operations": ["UPDATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods/ephemeralcontainers"],
            "scope": "Namespaced",
        }
    ]
    assert "objectSelector" not in ephemeral
    assert [e["key"] for e in ephemeral["namespaceSelector"]["matchExpressions"]] == [
        "kubernetes.io/metadata.name"
    ]
    (condition,) = ephemeral["matchConditions"]
    debug = {"operation": "UPDATE", "subResource": "ephemeralcontainers"}
    plain = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    labelled = {**plain, "metadata": {"name": "p", "labels": {"hami.io/dra": "true"}}}
    opted_out = {
        **plain,
        "metadata": {"name": "p", "labels": {"hami.io/dra": "true", "hami.io/webhook": "ignore"}},
    }
    claimed = {
        **plain,
        "spec": {
            **plain["spec"],
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "hami-gpu-1"}],
        },
    }
    other_claim = {
        **plain,
        "spec": {
            **plain["spec"],
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "x"}],
        },
    }
    assert _match_request(condition["expression"], labelled, debug)
    assert _match_request(condition["expression"], opted_out, debug)
    assert _match_request(condition["expression"], claimed, debug)
    assert not _match_request(condition["expression"], plain, debug)
    assert not _match_request(condition["expression"], other_claim, debug)
    # With overwriteEnv every pod goes to the pods webhook; the ephemeral one stays narrow.
    wide = _webhook_with("nvidia:\n  overwriteEnv: true\n")["webhooks"]
    assert "matchConditions" not in wide[0] and wide[1]["matchConditions"] == [condition]


def test_shutdown_exclusions_and_callers() -> None:
    """Issue 11, finding 15 and the callers: the drain (the webhook's own, not a preStop sleep:
    issue 24), grace period, the webhook's own namespace exclusions, client certificates and
    the NetworkPolicy."""
    documents = render(*MODES["callers-closed"], "webhook.shutdown.drainSeconds=7")
    pod = find(documents, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "lifecycle" not in container
    assert "--drain-delay=7" in container["args"]
    assert pod["terminationGracePeriodSeconds"] == 7 + 15 + 5
    assert "--graceful-shutdown=15" in container["args"]
    config = find(documents, "MutatingWebhookConfiguration")
    (excluded,) = [
        e["values"]
        for e in config["webhooks"][0]["namespaceSelector"]["matchExpressions"]
        if e["key"] == "kubernetes.io/metadata.name"
    ]
    assert f"--excluded-namespaces={','.join(excluded)}" in container["args"]
    assert "--client-ca-file=/etc/hami-dra-webhook/client-ca/ca.crt" in container["args"]
    assert find(documents, "ConfigMap", "hami-dra-webhook-client-ca")["data"] == {"ca.crt": "PEM"}
    policy = find(documents, "NetworkPolicy")["spec"]
    https, ops = policy["ingress"]
    assert https["ports"] == [{"port": 8443, "protocol": "TCP"}]
    assert [peer["ipBlock"]["cidr"] for peer in https["from"]] == ["10.0.0.0/28", "192.0.2.10/32"]
    assert ops == {"ports": [{"port": 8080, "protocol": "TCP"}]}  # probes: from anywhere
    refused = run_helm("template", "x", str(CHART), "--set", "networkPolicy.enabled=true")
    assert refused.returncode != 0 and "controlPlaneCIDRs" in refused.stderr


@pytest.mark.parametrize("preview", ["true", "false"])
def test_the_documented_uninstall_selects_every_webhook_configuration(preview: str) -> None:
    """docs/install.md deletes the webhook configurations by the release's label before
    `helm uninstall`: whatever the release is called and whether the workloads' preview is on,
    the label selects exactly the chart's configurations."""
    for release in ("hami-dra-webhook", "gpu"):
        documents = render(f"workloadPreview.enabled={preview}", release=release)
        configurations = [d for d in documents if d["kind"].endswith("WebhookConfiguration")]
        assert len(configurations) == (2 if preview == "true" else 1)
        for item in configurations:
            assert item["metadata"]["labels"]["app.kubernetes.io/instance"] == release
