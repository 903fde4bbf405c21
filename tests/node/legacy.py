"""Legacy HAMi beside DRA on the test cluster: STAND-INS for what cannot run here, each saying
what it copies and what it cannot show.

- `device_plugin_daemonset`: HAMi's device plugin as a DaemonSet (tests/node/go/draplugin/
  deviceplugin, in the plugin stand-in's image) on the kubelet's real device-plugin API,
  selected as HAMi's chart selects it (`gpu: "on"`) and kept to the legacy pool with the
  nodeSelector entry docs/migration.md tells users to add.
- `HamiScheduler`: a second, real kube-scheduler named `hami-scheduler`, configured as HAMi's
  chart configures it: an extender that manages `nvidia.com/gpumem` and `nvidia.com/gpucores`
  with `ignoredByScheduler` (kube-scheduler leaves them out of its fit; the kubelet leaves
  extended resources the node does not advertise out of its own admission check, so such pods
  run). The extender here (`Extender`) answers `filter` with every node it is given: HAMi's
  per-card fit (memory and cores of each card, from its node annotations) is not copied, so
  legacy pods are placed by `nvidia.com/gpu` slots only.
- `HamiWebhook`: HAMi v2.10's mutating webhook (`vgpu.hami.io`, pkg/scheduler/webhook.go
  `Handle` and the NVIDIA device's MutateAdmission) as an in-process HTTPS server: a pod with a
  scheduler other than the default (or hami-scheduler) is left alone; a container that names
  `nvidia.com/gpu`, or only `gpumem`, `gpumem-percentage` or `gpucores` (then
  `nvidia.com/gpu: 1`, defaultGPUNum, is added), makes the pod a GPU pod; a GPU pod with a
  privileged container or a `spec.nodeName` is denied; a GPU pod gets
  `schedulerName: hami-scheduler`. Not copied: quota checks, GPU bindings, priority env,
  overwriteEnv, other vendors.
"""

from __future__ import annotations

import base64
import http.server
import json
import ssl
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hami_dra_webhook.certs.pki import issue
from tests.controlplane.cluster import ControlPlane
from tests.node.images import PLUGIN_IMAGE
from tests.support.cluster import wait_for

SCHEDULER = "hami-scheduler"
NAMESPACE = "hami-legacy"
GPU = "nvidia.com/gpu"
SHARE_KEYS = ("nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores")
CARDS = 2
SPLIT = 10  # HAMi's default deviceSplitCount


def device_plugin_daemonset() -> dict[str, Any]:
    """HAMi's device plugin DaemonSet (its stand-in), with docs/migration.md's patch."""
    labels = {"app.kubernetes.io/name": "hami-device-plugin"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "hami-device-plugin", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    # HAMi's chart selects `gpu: "on"`; docs/migration.md adds the pool
                    # (devicePlugin.nvidiaNodeSelector, merged by Helm).
                    "nodeSelector": {"gpu": "on", "hami.io/gpu-pool": "legacy"},
                    "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {
                            "name": "device-plugin",
                            "image": PLUGIN_IMAGE,
                            "imagePullPolicy": "Never",
                            "command": [
                                "hami-device-plugin",
                                f"-cards={CARDS}",
                                f"-device-split-count={SPLIT}",
                            ],
                            "env": [
                                {
                                    "name": "NODE_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                                }
                            ],
                            "volumeMounts": [
                                {"name": "plugins", "mountPath": "/var/lib/kubelet/device-plugins"}
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "plugins",
                            "hostPath": {"path": "/var/lib/kubelet/device-plugins"},
                        }
                    ],
                },
            },
        },
    }


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return

    def _json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def _answer(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@dataclass
class Extender:
    """The stand-in extender: `filter` keeps every node; counts the pods it was asked about."""

    asked: list[str] = field(default_factory=list)

    def handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        extender = self

        class Handler(_Quiet):
            def do_POST(self) -> None:
                args = self._json()
                pod = (args.get("Pod") or args.get("pod") or {}).get("metadata") or {}
                extender.asked.append(f"{pod.get('namespace')}/{pod.get('name')}")
                self._answer(
                    {
                        "Nodes": args.get("Nodes") or args.get("nodes"),
                        "NodeNames": args.get("NodeNames") or args.get("nodenames"),
                        "FailedNodes": {},
                        "Error": "",
                    }
                )

        return Handler


def _serve(
    handler: type[http.server.BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None
) -> tuple[http.server.ThreadingHTTPServer, int]:
    """A server on 127.0.0.1 (in the test network namespace: started from the main thread)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


@contextmanager
def hami_scheduler(plane: ControlPlane, folder: Path) -> Iterator[Extender]:
    """kube-scheduler as `hami-scheduler` with the extender stand-in, for as long as the block."""
    extender = Extender()
    server, port = _serve(extender.handler())
    kubeconfig = plane.kubeconfig(SCHEDULER, plane.pki.issue(SCHEDULER, "system:kube-scheduler"))
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": SCHEDULER}],
        "extenders": [
            {
                "urlPrefix": f"http://127.0.0.1:{port}",
                "filterVerb": "filter",
                "enableHTTPS": False,
                "nodeCacheCapable": False,
                "weight": 1,
                "managedResources": [
                    {"name": "nvidia.com/gpumem", "ignoredByScheduler": True},
                    {"name": "nvidia.com/gpucores", "ignoredByScheduler": True},
                ],
            }
        ],
    }
    path = folder / "hami-scheduler.yaml"
    path.write_text(json.dumps(config))
    process = plane.start_scheduler(SCHEDULER, path)
    try:
        yield extender
    finally:
        process.stop(grace=10)
        plane.processes.remove(process)
        server.shutdown()
        server.server_close()


@dataclass
class _Webhook:
    """HAMi's webhook logic (see the module's docstring); `seen` counts what it answered."""

    seen: list[str] = field(default_factory=list)

    def review(self, request: dict[str, Any]) -> dict[str, Any]:
        pod = request.get("object") or {}
        spec = pod.get("spec") or {}
        answer: dict[str, Any] = {"uid": request.get("uid"), "allowed": True}
        scheduler = spec.get("schedulerName") or ""
        if scheduler and scheduler not in ("default-scheduler", SCHEDULER):
            self.seen.append("other scheduler")
            return answer
        ops: list[dict[str, Any]] = []
        gpu = False
        privileged = False
        for kind in ("initContainers", "containers"):
            for index, container in enumerate(spec.get(kind) or []):
                limits = (container.get("resources") or {}).get("limits") or {}
                if (container.get("securityContext") or {}).get("privileged"):
                    privileged = True
                if GPU in limits:
                    gpu = True
                elif any(key in limits for key in SHARE_KEYS):
                    gpu = True
                    ops.append(
                        {
                            "op": "add",
                            "path": f"/spec/{kind}/{index}/resources/limits/nvidia.com~1gpu",
                            "value": "1",
                        }
                    )
        if gpu and privileged:
            self.seen.append("denied privileged")
            return answer | {"allowed": False, "status": {"code": 403, "message": "privileged"}}
        if gpu:
            if spec.get("nodeName"):
                self.seen.append("denied nodeName")
                return answer | {
                    "allowed": False,
                    "status": {"code": 403, "message": "pod has node assigned"},
                }
            ops.append({"op": "add", "path": "/spec/schedulerName", "value": SCHEDULER})
            self.seen.append("gpu pod")
        else:
            self.seen.append("no gpu resource")
        if ops:
            answer["patchType"] = "JSONPatch"
            answer["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
        return answer

    def handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        webhook = self

        class Handler(_Quiet):
            def do_POST(self) -> None:
                review = self._json()
                response = webhook.review(review.get("request") or {})
                self._answer(
                    {
                        "apiVersion": "admission.k8s.io/v1",
                        "kind": "AdmissionReview",
                        "response": response,
                    }
                )

        return Handler


@contextmanager
def hami_webhook(cluster: Any, configuration_name: str) -> Iterator[_Webhook]:
    """HAMi's webhook stand-in registered as `configuration_name` (its name orders it among
    the cluster's mutating webhooks), reinvoked IfNeeded, for as long as the block."""
    webhook = _Webhook()
    bundle = issue(["127.0.0.1"])
    folder = Path(tempfile.mkdtemp(prefix="hami-webhook-"))
    (folder / "tls.crt").write_bytes(bundle.cert_pem)
    (folder / "tls.key").write_bytes(bundle.key_pem)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    server, port = _serve(webhook.handler(), tls)
    configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": configuration_name},
        "webhooks": [
            {
                "name": "vgpu.hami.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "reinvocationPolicy": "IfNeeded",
                "failurePolicy": "Fail",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}/webhook",
                    "caBundle": bundle.ca_bundle,
                },
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]},
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": ["kube-system", "hami-system", NAMESPACE],
                        },
                    ]
                },
                "objectSelector": {
                    "matchExpressions": [
                        {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}
                    ]
                },
            }
        ],
    }
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))
    try:
        yield webhook
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", configuration_name)
        server.shutdown()
        server.server_close()


def legacy_slots(cluster: Any, node: str) -> int:
    """nvidia.com/gpu allocatable on the node (the device plugin's virtual devices)."""
    allocatable = cluster.get("node", node)["status"].get("allocatable") or {}
    return int(allocatable.get(GPU, "0"))


def wait_legacy_served(cluster: Any, node: str) -> None:
    wait_for(lambda: legacy_slots(cluster, node) == CARDS * SPLIT, f"{GPU} on {node}", timeout=90)
