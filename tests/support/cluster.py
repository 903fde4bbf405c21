"""Driving the real control plane from the end-to-end tests: kubectl, helm, waiting, and the
webhook run as a local process with the arguments the chart gives its Deployment."""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from hami_dra_webhook.kube.client import KubernetesApi
from hami_dra_webhook.kube.connect import load_configuration
from tests.controlplane.cluster import ControlPlane, free_port
from tests.controlplane.gpu_node import GpuNode
from tests.support.chart_tools import CHART
from tests.support.loop import run
from tests.support.metrics import sample_sum
from tests.support.rest_calls import NotServed, RestCalls
from tests.support.tools import tool
from tests.support.webhook_process import Webhook

T = TypeVar("T")
RELEASE_NAMESPACE = "hami-system"


class CommandFailed(AssertionError):
    pass


def wait_for(check: Callable[[], T | None], what: str, timeout: float = 60.0) -> T:
    """Poll `check` until it returns something truthy; fail naming `what`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


@dataclass
class Cluster:
    """One running control plane with its GPU node, as the tests see it."""

    plane: ControlPlane
    node: GpuNode
    stored_slice: dict[str, Any]
    folder: Path
    _namespaces: int = 0
    _reads: RestCalls | None = field(default=None, repr=False)

    @property
    def version(self) -> str:
        return self.plane.release.version

    @property
    def consumable_capacity(self) -> bool:
        return self.plane.consumable_capacity

    def run(
        self,
        program: str,
        *args: str,
        stdin: str | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        environment = {**os.environ, "KUBECONFIG": str(kubeconfig or self.plane.admin_kubeconfig)}
        environment["HELM_CACHE_HOME"] = str(self.folder / "helm-cache")
        environment["HELM_CONFIG_HOME"] = str(self.folder / "helm-config")
        environment["HELM_DATA_HOME"] = str(self.folder / "helm-data")
        result = subprocess.run(
            [tool(program), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=environment,
            check=False,
            timeout=120,
        )
        if check and result.returncode != 0:
            command = shlex.join([program, *args])
            raise CommandFailed(f"{command} exited {result.returncode}:\n{result.stderr}")
        return result

    def kubectl(self, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
        return self.run("kubectl", *args, **options)

    def helm(self, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
        return self.run("helm", *args, **options)

    def get(self, *args: str) -> Any:
        """What `kubectl get -o json ARGS` prints: asked of the server directly where
        tests/support/rest_calls.py reads the form (no kubectl process), else by kubectl."""
        try:
            answer = self._rest().get(args)
        except NotServed as error:
            raise CommandFailed(f"kubectl get {shlex.join(args)}: {error}") from None
        if answer is not None:
            return answer
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def _rest(self) -> RestCalls:
        """The tests' own calls to the server, without kubectl (tests/support/rest_calls.py)."""
        if self._reads is None:
            self._reads = RestCalls(self.plane.request)
        return self._reads

    def apply(self, manifest: str | dict[str, Any], *flags: str, namespace: str) -> str:
        """`kubectl apply -n NAMESPACE FLAGS -f -` of the manifest, as kubectl prints it: as
        the server's own apply in one HTTPS call an object where tests/support/rest_calls.py
        applies the form (no flags), else by kubectl."""
        documents = list(yaml.safe_load_all(manifest)) if isinstance(manifest, str) else [manifest]
        if not flags:
            try:
                printed = self._rest().apply([d for d in documents if d is not None], namespace)
            except NotServed as error:
                raise CommandFailed(f"kubectl apply -n {namespace} -f -: {error}") from None
            if printed is not None:
                return printed
        text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
        return self.kubectl("apply", "-n", namespace, *flags, "-f", "-", stdin=text).stdout

    def create(self, document: dict[str, Any], namespace: str) -> None:
        """The test's own object, made in one HTTPS call (no kubectl process)."""
        self._rest().create(document, namespace)

    def delete(self, kind: str, name: str, namespace: str, **options: Any) -> None:
        """The test's own object deleted, if there, in one HTTPS call (`grace`, `orphan`)."""
        self._rest().delete(kind, name, namespace, **options)

    def patch_status(self, kind: str, name: str, namespace: str, patch: dict[str, Any]) -> None:
        """A status written as a kubelet would (a merge patch), in one HTTPS call."""
        self._rest().patch_status(kind, name, namespace, patch)

    def create_namespace(self, prefix: str = "e2e") -> str:
        self._namespaces += 1
        name = f"{prefix}-{self._namespaces}"
        self.ensure_namespace(name)
        return name

    def exists(self, *args: str) -> bool:
        """Whether `kubectl get ARGS` finds it (asked of the server as `get` asks)."""
        try:
            self.get(*args)
        except CommandFailed:
            return False
        return True

    def ensure_namespace(self, name: str) -> None:
        """Namespace `name`, created if missing, once pods can be created in it."""
        if not self.exists("namespace", name):
            self._rest().create_namespace(name)
        # kube-controller-manager's service account controller gives each namespace `default`;
        # pods are refused by the ServiceAccount admission plugin until it exists.
        wait_for(
            lambda: self.exists("serviceaccount", "default", "-n", name),
            f"the default ServiceAccount of {name}",
        )

    def empty_namespace(self, name: str) -> None:
        """Make sure namespace `name` exists and holds no ResourceClaimTemplates."""
        self.ensure_namespace(name)
        self._rest().delete_all("resourceclaimtemplates", name)

    def release_pods(self, name: str, grace: int) -> None:
        """Delete the namespace, its workloads orphaning their pods and its pods with `grace`
        seconds to end (the kubelet takes its time; nothing waits here)."""
        workloads = "deployments,replicasets,statefulsets,daemonsets,jobs,cronjobs"
        self._rest().delete_all(workloads, name, orphan=True)
        self._rest().delete_all("pods", name, grace=grace)
        self._rest().delete_namespace(name)

    def release_namespace(self, name: str) -> None:
        """Delete the namespace and wait until its claims are gone. No kubelet confirms a pod's
        end, so its pods are force-deleted; the claim controller then frees their devices. Its
        ResourceQuotas go at once: the namespace controller's sweep comes later, and the
        checks that read every namespace's quotas (`check`, the quota work) ran meanwhile."""
        workloads = "deployments,replicasets,statefulsets,daemonsets,jobs,cronjobs"
        self._rest().delete_all(workloads, name, orphan=True)
        self._rest().delete_all("resourcequotas", name)
        self._rest().delete_all("pods", name, grace=0)
        wait_for(
            lambda: not self.get("resourceclaims", "-n", name)["items"],
            f"the claims of namespace {name} to be deleted",
        )
        self._rest().delete_namespace(name)

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return dict(self.get("pod", name, "-n", namespace))

    def pods(self, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        args = ["pods", "-n", namespace] + (["-l", selector] if selector else [])
        return list(self.get(*args)["items"])

    def scheduled(self, pod: dict[str, Any]) -> bool | None:
        """True: bound to a node; False: no node has the devices its claims need; None: not
        decided yet. kube-scheduler also reports passing states as Unschedulable (a claim not
        created yet, another pod's allocation in flight), so only the allocator's verdict counts."""
        for condition in pod.get("status", {}).get("conditions", []):
            if condition["type"] == "PodScheduled":
                if condition["status"] == "True":
                    return True
                if "cannot allocate all claims" in condition.get("message", ""):
                    return False
        return None

    def wait_scheduled(self, namespace: str, name: str, timeout: float = 60) -> dict[str, Any]:
        return self._wait_decided(namespace, name, True, timeout)

    def wait_unschedulable(self, namespace: str, name: str, timeout: float = 60) -> dict[str, Any]:
        return self._wait_decided(namespace, name, False, timeout)

    def wait_decided(self, namespace: str, name: str, timeout: float = 60) -> dict[str, Any]:
        """The pod once the scheduler has either bound it or found it unschedulable."""

        def decided() -> dict[str, Any] | None:
            pod = self.pod(namespace, name)
            return pod if self.scheduled(pod) is not None else None

        return wait_for(decided, f"the scheduler to decide on pod {namespace}/{name}", timeout)

    def wait_for_pods(self, namespace: str, selector: str, count: int) -> list[dict[str, Any]]:
        return wait_for(
            lambda: pods if len(pods := self.pods(namespace, selector)) == count else None,
            f"{count} pods {selector} in {namespace}",
        )

    def _wait_decided(
        self, namespace: str, name: str, scheduled: bool, timeout: float
    ) -> dict[str, Any]:
        def decided() -> dict[str, Any] | None:
            pod = self.pod(namespace, name)
            return pod if self.scheduled(pod) is scheduled else None

        what = "be scheduled" if scheduled else "be found unschedulable"
        return wait_for(decided, f"pod {namespace}/{name} to {what}", timeout)

    def allocation(self, pod: dict[str, Any]) -> list[dict[str, Any]]:
        """The device results of every claim of the pod (request, device, consumedCapacity)."""
        namespace = pod["metadata"]["namespace"]
        results = []
        for status in pod.get("status", {}).get("resourceClaimStatuses", []):
            claim = self.get("resourceclaim", status["resourceClaimName"], "-n", namespace)
            allocation = claim.get("status", {}).get("allocation")
            assert allocation, f"claim {status['resourceClaimName']} is not allocated: {claim}"
            results += allocation["devices"]["results"]
        return results

    def service_account_kubeconfig(self, namespace: str, name: str) -> Path:
        """A kubeconfig for the ServiceAccount with a token from the TokenRequest API (as
        `kubectl create token NAME -n NAMESPACE --duration=2h` asks it, in one HTTPS call)."""
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"}
        status, answer = self.plane.request(
            "POST", path, {**request, "spec": {"expirationSeconds": 7200}}
        )
        if status != 201:
            raise CommandFailed(f"kubectl create token {name} -n {namespace}: {status} {answer}")
        token = str(answer["status"]["token"])
        return self.plane.kubeconfig(f"sa-{namespace}-{name}", token=token)


@dataclass
class Release:
    """The chart installed into the real API server, its webhook running as a local process
    with the container arguments of the chart's Deployment."""

    cluster: Cluster
    name: str
    namespace: str
    sets: list[str]
    port: int = field(default_factory=free_port)
    webhook: Webhook | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    ca_file: Path | None = None  # custom mode: the CA of the certificate it serves
    values_file: Path | None = None  # helm -f, besides `sets` (values with commas, YAML)
    _manifests: dict[str, list[dict[str, Any]]] = field(default_factory=dict, repr=False)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/mutate"

    @property
    def fullname(self) -> str:
        return self.name if "hami-dra-webhook" in self.name else f"{self.name}-hami-dra-webhook"

    def install(self, *more: str) -> subprocess.CompletedProcess[str]:
        args = ["install", self.name, str(CHART), "-n", self.namespace, "--create-namespace"]
        args += ["--set", f"admission.url={self.url}", "--wait=false"]
        args += ["-f", str(self.values_file)] if self.values_file else []
        for item in [*self.sets, *more]:
            args += ["--set", item]
        return self.cluster.helm(*args)

    def upgrade(self, *more: str) -> subprocess.CompletedProcess[str]:
        """helm upgrade with the chart's defaults plus this release's and `more` settings."""
        args = ["upgrade", self.name, str(CHART), "-n", self.namespace, "--reset-values"]
        args += ["--set", f"admission.url={self.url}"]
        args += ["-f", str(self.values_file)] if self.values_file else []
        for item in self.sets:
            args += ["--set", item]
        return self.cluster.helm(*args, *more)

    def restart(self) -> None:
        """Stop the webhook process and start it again from the release's current manifest."""
        assert self.webhook is not None
        folder = self.webhook.folder
        self.stop()
        self.start(folder)

    def uninstall(self) -> None:
        self.stop()
        self.cluster.helm("uninstall", self.name, "-n", self.namespace, "--wait=false")

    def manifest(self) -> list[dict[str, Any]]:
        """What `helm get manifest` says of the release's last revision; asked of helm once a
        revision (helm keeps each revision in a Secret of its own, labelled `owner=helm`,
        `name` and `version`: a new Secret is a new revision, one of a release installed
        again included)."""
        revision = self._revision()
        if revision is None or revision not in self._manifests:
            text = self.cluster.helm("get", "manifest", self.name, "-n", self.namespace).stdout
            manifest = [d for d in yaml.safe_load_all(text) if d]
            if revision is None:
                return manifest
            self._manifests[revision] = manifest
        return copy.deepcopy(self._manifests[revision])

    def _revision(self) -> str | None:
        """The uid of the Secret of the release's last revision; None: none found."""
        stored = self.cluster.get(
            "secrets", "-n", self.namespace, "-l", f"owner=helm,name={self.name}"
        )["items"]
        versions = [
            (int(item["metadata"]["labels"].get("version", "0")), item["metadata"]["uid"])
            for item in stored
            if str(item["metadata"].get("labels", {}).get("version", "")).isdigit()
        ]
        return max(versions)[1] if versions else None

    def _rendered(self, kind: str, manifest: list[dict[str, Any]] | None) -> dict[str, Any]:
        return next(d for d in manifest or self.manifest() if d["kind"] == kind)

    def container_args(
        self, folder: Path, manifest: list[dict[str, Any]] | None = None
    ) -> list[str]:
        """The webhook container's args, with the in-pod paths moved into `folder` (from
        `manifest`, the release's as `helm get manifest` says, asked when not given)."""
        config = self._rendered("ConfigMap", manifest)["data"]["device-config.yaml"]
        config_file = folder / "device-config.yaml"
        config_file.write_text(config)
        deployment = self._rendered("Deployment", manifest)
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        args = []
        for arg in container["args"][1:]:  # [0] is the `serve` command
            flag, _, value = arg.partition("=")
            if flag in ("--ops-port", "--ops-host"):
                continue  # the Webhook helper gives the local process a free one
            if flag == "--drain-delay":
                # The chart's drain waits for the pod to leave the Service's endpoints; the
                # local process is reached by URL, so it would only wait (5 s every stop).
                value = "0"
            if flag == "--port":
                value = str(self.port)
            elif flag == "--config":
                value = str(config_file)
            elif flag == "--cert-dir":
                value = str(folder / "tls")
            elif flag in ("--cert-file", "--key-file"):
                value = str(folder / "tls" / Path(value).name)
            args.append(f"{flag}={value}" if value else flag)
        return args

    def container_env(self, manifest: list[dict[str, Any]] | None = None) -> dict[str, str]:
        container = self._rendered("Deployment", manifest)["spec"]["template"]["spec"][
            "containers"
        ][0]
        env = {"POD_NAMESPACE": self.namespace}
        for entry in container.get("env", []):
            if "value" in entry:
                env[entry["name"]] = entry["value"]
        return env

    def start(self, folder: Path, service_account: bool = True) -> Webhook:
        """Run the webhook as the chart's pod would: its args, its env, its identity."""
        folder.mkdir(parents=True, exist_ok=True)
        kubeconfig = (
            self.cluster.service_account_kubeconfig(self.namespace, self.fullname)
            if service_account
            else self.cluster.plane.admin_kubeconfig
        )
        manifest = self.manifest()
        args = [
            *self.container_args(folder, manifest),
            f"--kubeconfig={kubeconfig}",
            "--host=127.0.0.1",
        ]
        env = {**self.container_env(manifest), **self.extra_env}
        self.webhook = Webhook(
            folder, *args, env=env, own_certs=False, port=self.port, host="127.0.0.1"
        )
        self.webhook.ca_file = self.ca_file or folder / "tls" / "ca.crt"
        self.kubeconfig = kubeconfig
        return self.webhook

    def replica(self, folder: Path) -> Webhook:
        """Another replica with the chart's arguments and identity, serving nothing
        (kube-apiserver calls the one at this release's URL): what it does beside the first
        is the GPU quota work, for which they share the Lease."""
        folder.mkdir(parents=True, exist_ok=True)
        served = ("--self-managed", "--cert-", "--webhook-config", "--service-name", "--port")
        args = [a for a in self.container_args(folder) if not a.startswith(served)]
        assert self.kubeconfig is not None, "start the release's own webhook first"
        return Webhook(
            folder, *args, f"--kubeconfig={self.kubeconfig}", "--host=127.0.0.1",
            env=self.container_env(),
        )  # fmt: skip

    def stop(self) -> None:
        if self.webhook is not None:
            self.webhook.stop()
            self.webhook = None

    def metric(self, name: str, **labels: str) -> float:
        """The sum of a counter's samples whose labels include `labels`."""
        assert self.webhook is not None
        status, body = self.webhook.get("/metrics")
        assert status == 200
        return sample_sum(body.decode(), name, **labels)


def api_for(kubeconfig: Path, page_size: int | None = None) -> KubernetesApi:
    """The project's own API adapter, logged in as the kubeconfig says (lists `page_size`
    items at a time when given)."""
    configuration = run(load_configuration(str(kubeconfig)))
    assert configuration is not None
    return (
        KubernetesApi(configuration)
        if page_size is None
        else KubernetesApi(configuration, page_size)
    )


def ca_bundle_of(configuration: dict[str, Any]) -> bytes:
    return base64.b64decode(configuration["webhooks"][0]["clientConfig"].get("caBundle", ""))


# A ServiceAccount bound to nothing: what it may do, every identity may do.
NOBODY = f"system:serviceaccount:{RELEASE_NAMESPACE}:e2e-nobody"


def granted(cluster: Cluster, namespace: str, who: str) -> dict[str, tuple[set[str], str]]:
    """resource -> (verbs, resource names) that `who` may use in `namespace`, as `kubectl auth
    can-i --list` says, beyond what every identity may do."""
    listing = cluster.kubectl("auth", "can-i", "--list", f"--as={who}", "-n", namespace).stdout
    everyone = {} if who == NOBODY else granted(cluster, namespace, NOBODY)
    found = {}
    for line in listing.splitlines()[1:]:
        match = re.match(r"^(\S+)\s+\[\]\s+\[(.*?)\]\s+\[(.*)\]$", line)
        if match is None:
            continue  # non-resource URLs (discovery, health): every identity may get them
        resource, names, verbs = match.groups()
        if everyone.get(resource) != (set(verbs.split()), names):
            # A resource granted by name and by kind (a Lease: create any, get its own) is
            # listed on two rows: its verbs together, its names those that are named.
            before, named = found.get(resource, (set(), ""))
            found[resource] = (before | set(verbs.split()), named or names)
    return found
