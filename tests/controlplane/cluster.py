"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver and, on request,
kube-controller-manager and kube-scheduler, each a process of its own in a temporary folder.

kube-apiserver serves HTTPS with client-certificate authentication, RBAC authorization and a
service-account signing key; the controllers log in with certificates of their own identities
(system:kube-controller-manager, system:kube-scheduler). Every process is stopped by its PID in
`stop()`, whatever happened before; `stop()` is also registered with atexit.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tests.controlplane.build import Binaries
from tests.controlplane.pki import KeyPair, Pki
from tests.controlplane.versions import Release

SERVICE_CIDR = "10.0.0.0/24"
CONSUMABLE_CAPACITY = "DRAConsumableCapacity"
# Whose requests kube-apiserver's audit log keeps: the ServiceAccounts of the chart's release
# and driver namespaces in the tests (what the webhook's identity really uses is read there).
AUDITED_NAMESPACES = ("hami-system", "hami-driver")
# No kubelet ever reports: the node lifecycle controller would mark the GPU node NotReady and
# taint it. Everything else runs as in a real cluster.
CONTROLLERS = "*,-node-lifecycle-controller"


class ControlPlaneError(RuntimeError):
    pass


def _ephemeral_ports() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now, for a server started a moment later.
    Taken at random below the kernel's ephemeral range where there is room: a port the kernel
    handed out (bind to 0) is the next one it gives a client's outgoing connection, and with
    several test runs at once one such connection took a control plane's port before it
    listened (2026-12-06)."""
    low, _ = _ephemeral_ports()
    for _ in range(50 if low > 11000 else 0):
        port = random.randrange(10000, low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]

    def tail(self, characters: int = 3000) -> str:
        self.log_file.flush()
        return self.log_path.read_text(errors="replace")[-characters:]

    def stop(self, grace: float = 10.0) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        self.log_file.close()


@dataclass
class ControlPlane:
    release: Release
    binaries: Binaries
    folder: Path
    consumable_capacity: bool
    controllers: bool = True  # kube-controller-manager and kube-scheduler
    apiserver_args: tuple[str, ...] = ()  # e.g. --runtime-config for a test's special server
    # Slice flags (a second occurrence in apiserver_args would append, not replace): the real
    # node of tests/node runs Node,RBAC and every controller.
    authorization_modes: str = "RBAC"
    controller_list: str = CONTROLLERS
    controller_manager_args: tuple[str, ...] = ()  # e.g. --kube-api-qps (benchmarks/claims.py)
    processes: list[Process] = field(default_factory=list)
    _admin_context: ssl.SSLContext | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.pki = Pki(self.folder / "pki")
        self.apiserver_port = free_port()
        self.server = f"https://127.0.0.1:{self.apiserver_port}"
        self.admin = self.pki.issue("admin", "e2e-admin", organization="system:masters")
        self.admin_kubeconfig = self.kubeconfig("admin", self.admin)

    @property
    def gates(self) -> str:
        return f"{CONSUMABLE_CAPACITY}={str(self.consumable_capacity).lower()}"

    @property
    def label(self) -> str:
        state = "on" if self.consumable_capacity else "off"
        return f"v{self.release.version} ({CONSUMABLE_CAPACITY} {state})"

    @property
    def audit_log(self) -> Path:
        """kube-apiserver's audit log: the requests of ServiceAccounts of the namespaces
        AUDITED_NAMESPACES (the chart's), at Metadata level, one JSON event a line."""
        return self.folder / "audit.log"

    def _audit_policy(self) -> Path:
        groups = [f"system:serviceaccounts:{namespace}" for namespace in AUDITED_NAMESPACES]
        policy = {
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [{"level": "Metadata", "userGroups": groups}, {"level": "None"}],
        }
        path = self.folder / "audit-policy.json"
        path.write_text(json.dumps(policy))
        return path

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ControlPlane:
        atexit.register(self.stop)
        try:
            self._start_etcd()
            self._start_apiserver()
            if self.controllers:
                self._start_controller_manager()
                self._start_scheduler()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        atexit.unregister(self.stop)

    def spawn(self, name: str, command: list[str]) -> Process:
        """Run `command` beside the control plane (logged as `name`, stopped with it)."""
        return self._spawn(name, command)

    def _spawn(self, name: str, command: list[str]) -> Process:
        log_path = self.folder / f"{name}.log"
        log_file = log_path.open("wb")
        popen = subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.folder,
            start_new_session=True,
        )
        process = Process(name, popen, log_path, log_file)
        self.processes.append(process)
        return process

    def _wait(self, process: Process, probe: Any, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.popen.poll() is not None:
                raise ControlPlaneError(
                    f"{process.name} exited ({process.popen.returncode}):\n{process.tail()}"
                )
            with contextlib.suppress(OSError, http.client.HTTPException):
                if probe():
                    return
            time.sleep(0.2)
        raise ControlPlaneError(f"{process.name} not ready in {timeout:.0f} s:\n{process.tail()}")

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        process = self._spawn(
            "etcd",
            [
                str(self.binaries.etcd),
                "--name=e2e",
                f"--data-dir={self.folder / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=e2e={peer_url}",
                "--unsafe-no-fsync",  # a throwaway test database: speed over durability
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            connection = http.client.HTTPConnection("127.0.0.1", client, timeout=2)
            try:
                connection.request("GET", "/health")
                answer = connection.getresponse()
                return answer.status == 200 and b'"true"' in answer.read()
            finally:
                connection.close()

        self._wait(process, healthy)

    def _start_apiserver(self) -> None:
        serving = self.pki.issue(
            "apiserver",
            "kube-apiserver",
            hosts=(
                "127.0.0.1",
                "localhost",
                "10.0.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
            ),
        )
        process = self._spawn(
            "kube-apiserver",
            [
                str(self.binaries.path("kube-apiserver")),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                # 1.37 refuses a loopback address for the `kubernetes` Service's endpoints; no
                # pod here ever reaches the API through that Service.
                "--endpoint-reconciler-type=none",
                f"--secure-port={self.apiserver_port}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={self.pki.ca}",
                f"--authorization-mode={self.authorization_modes}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={self.pki.service_account_pub}",
                f"--service-account-signing-key-file={self.pki.service_account_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                f"--feature-gates={self.gates}",
                f"--cert-dir={self.folder / 'apiserver-certs'}",
                f"--audit-policy-file={self._audit_policy()}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--v=1",
                *self.apiserver_args,
            ],
        )
        self._wait(process, lambda: self._get_status("/readyz") == 200)

    def _start_controller(self, command: str, identity: str, *flags: str) -> None:
        """kube-controller-manager or kube-scheduler: logged in with a certificate of its own
        identity, serving /healthz on a port of its own, no leader election."""
        kubeconfig = self.kubeconfig(command, self.pki.issue(command, identity))
        port = free_port()
        process = self._spawn(
            command,
            [
                str(self.binaries.path(command)),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                "--leader-elect=false",
                f"--feature-gates={self.gates}",
                f"--cert-dir={self.folder / (command + '-certs')}",
                "--v=1",
                *flags,
            ],
        )
        self._wait(process, lambda: _local_healthz(port))

    def _start_controller_manager(self) -> None:
        self._start_controller(
            "kube-controller-manager",
            "system:kube-controller-manager",
            f"--controllers={self.controller_list}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={self.pki.service_account_key}",
            f"--root-ca-file={self.pki.ca}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            *self.controller_manager_args,
        )

    def _start_scheduler(self) -> None:
        self._start_controller("kube-scheduler", "system:kube-scheduler")

    def start_scheduler(self, name: str, config: Path) -> Process:
        """Another kube-scheduler, logged as `name`, configured by the KubeSchedulerConfiguration
        at `config` (which names its kubeconfig); stop it with `process.stop()` and remove it
        from `processes`."""
        port = free_port()
        process = self._spawn(
            name,
            [
                str(self.binaries.path("kube-scheduler")),
                f"--config={config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--feature-gates={self.gates}",
                f"--cert-dir={self.folder / (name + '-certs')}",
                "--v=1",
            ],
        )
        self._wait(process, lambda: _local_healthz(port))
        return process

    # -- access ----------------------------------------------------------------------------

    def kubeconfig(self, name: str, pair: KeyPair | None = None, token: str | None = None) -> Path:
        """A kubeconfig for this cluster with a client certificate or a bearer token."""
        user: dict[str, str] = {}
        if pair is not None:
            user = {"client-certificate": str(pair.cert), "client-key": str(pair.key)}
        if token is not None:
            user = {"token": token}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {"server": self.server, "certificate-authority": str(self.pki.ca)},
                }
            ],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": name, "context": {"cluster": "e2e", "user": name}}],
            "current-context": name,
        }
        path = self.folder / f"{name}.kubeconfig"
        path.write_text(json.dumps(config, indent=1))
        path.chmod(0o600)
        return path

    def _context(self) -> ssl.SSLContext:
        """The admin's TLS context, made once (an SSLContext is safe to share across threads)."""
        if self._admin_context is None:
            context = ssl.create_default_context(cafile=str(self.pki.ca))
            context.load_cert_chain(self.admin.cert, self.admin.key)
            self._admin_context = context
        return self._admin_context

    def _get_status(self, path: str) -> int:
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.apiserver_port, context=self._context(), timeout=5
        )
        try:
            connection.request("GET", path)
            answer = connection.getresponse()
            answer.read()
            return answer.status
        finally:
            connection.close()

    def request(self, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
        """One call as the admin: (status, decoded JSON body)."""
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.apiserver_port, context=self._context(), timeout=30
        )
        try:
            data = None if body is None else json.dumps(body).encode()
            sent = {"Accept": "application/json", **headers}
            if data is not None:
                sent.setdefault("Content-Type", "application/json")
            connection.request(method, path, body=data, headers=sent)
            answer = connection.getresponse()
            raw = answer.read()
            return answer.status, json.loads(raw) if raw else None
        finally:
            connection.close()

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.tail(1500)}" for p in self.processes)


def _local_healthz(port: int) -> bool:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=2)
    try:
        connection.request("GET", "/healthz")
        answer = connection.getresponse()
        answer.read()
        return answer.status == 200
    finally:
        connection.close()
