"""Server settings: one model, the one source of every `serve` flag, its environment variable
(`HAMI_DRA_<NAME>`) and its default. Flags win over the environment."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hami_dra_webhook.core.model.durations import parse_seconds


def _seconds(value: Any) -> Any:
    """A setting of seconds also takes a duration: `--gc-interval 10m`, HAMI_DRA_GC_GRACE=1h."""
    return parse_seconds(value) if isinstance(value, str) else value


Seconds = Annotated[float, BeforeValidator(_seconds)]

ENV_PREFIX = "HAMI_DRA_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True)

    host: str = Field("0.0.0.0", description="address the HTTPS webhook listens on")
    port: int = Field(8443, ge=1, le=65535, description="HTTPS port of /mutate")
    ops_host: str = Field("0.0.0.0", description="address of the plain-HTTP probes and metrics")
    ops_port: int = Field(
        8080,
        ge=0,
        le=65535,
        description="plain-HTTP port for /healthz, /livez, /readyz and /metrics (0: none; they"
        " are served on the HTTPS port as well)",
    )
    ops_max_connections: int = Field(
        256,
        ge=1,
        description="open connections on the operations port (its own limit: a flood of the"
        " HTTPS port cannot close the probes' connections)",
    )
    ops_idle_timeout: int = Field(
        5, ge=1, description="seconds a keep-alive connection of the operations port may idle"
    )
    cert_file: Path | None = Field(
        None, description="serving certificate (PEM); none: a self-signed one for localhost"
    )
    key_file: Path | None = Field(None, description="its private key (PEM)")
    client_ca_file: Path | None = Field(
        None,
        description="require callers of the HTTPS port to present a certificate this CA"
        " signed (kube-apiserver's webhook client certificate); none: any caller",
    )
    config: Path | None = Field(
        None, description="HAMi device-config.yaml with the hamiDraWebhook section"
    )
    tls_min_version: Literal["1.2", "1.3"] = Field("1.3", description="lowest TLS version")
    kubeconfig: Path | None = Field(
        None, description="cluster access; default: in-cluster, else offline"
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="log level")
    log_format: Literal["json", "text"] = Field(
        "json", description="one JSON object a line, or text with key=value fields"
    )
    admission_budget: Seconds = Field(
        5.0,
        gt=0,
        le=30,
        description="seconds one admission may take, API calls included (below the webhook's"
        " timeoutSeconds)",
    )
    cache_ttl: Seconds = Field(
        300.0, gt=0, description="seconds a template stays known without an API call"
    )
    gc_interval: Seconds = Field(
        600.0, ge=0, description="seconds between template garbage collections (0: none)"
    )
    gc_grace: Seconds = Field(3600.0, gt=0, description="seconds an unused template is kept")
    cluster_check_interval: Seconds = Field(
        300.0, gt=0, description="seconds between checks of the cluster (capacity, sizes)"
    )
    cluster_check_timeout: Seconds = Field(
        10.0, gt=0, description="seconds each API read of a cluster check may take"
    )
    cert_reload_interval: Seconds = Field(
        1.0, gt=0, description="seconds between looks at the certificate files"
    )
    max_body_bytes: int = Field(
        6 * 1024 * 1024, gt=0, description="largest AdmissionReview body accepted (bytes)"
    )
    request_read_timeout: Seconds = Field(
        10.0, gt=0, description="seconds a request body may take to arrive"
    )
    max_concurrency: int = Field(
        1024, ge=1, description="requests being answered at once on the HTTPS port; past it: 503"
    )
    max_connections: int = Field(
        2048,
        ge=1,
        description="open connections on a port; past it a new one pushes out the oldest that"
        " does not read its answers, else the oldest that has not sent a request, else the"
        " longest idle one",
    )
    max_unproven_connections: int = Field(
        256,
        ge=1,
        description="connections that have not yet sent a first request (TLS handshake"
        " included); past it a new one pushes out the oldest",
    )
    head_timeout: Seconds = Field(
        10.0,
        gt=0,
        description="seconds for a TLS handshake and first request head, and for each later"
        " request head, to arrive",
    )
    max_head_bytes: int = Field(
        32 * 1024, ge=1024, description="largest request line plus headers (bytes); past it: 431"
    )
    max_target_bytes: int = Field(
        8 * 1024, ge=64, description="longest request target (bytes); past it: 414"
    )
    max_headers: int = Field(
        128, ge=16, description="request headers a request may have; past it: 431"
    )
    max_pipelined: int = Field(
        4,
        ge=0,
        description="requests a connection may send ahead of the one being answered; past it"
        " the connection is closed",
    )
    max_queued_requests: int = Field(
        256,
        ge=0,
        description="pipelined requests waiting on all connections together; past it a"
        " connection that pipelines another is closed",
    )
    write_timeout: Seconds = Field(
        10.0,
        gt=0,
        description="seconds a connection may keep an answer unread (from when its send buffer"
        " fills); then it is closed",
    )
    max_write_paused: int = Field(
        64,
        ge=1,
        description="connections with a full send buffer at once; past it the oldest of them is"
        " closed",
    )
    max_write_paused_bytes: int = Field(
        32 * 1024 * 1024,
        ge=1024 * 1024,
        description="answers those connections may hold unread together (bytes); past it the"
        " oldest of them is closed",
    )
    max_bodies_bytes: int = Field(
        16 * 1024 * 1024,
        gt=0,
        description="bytes all request bodies in flight may hold together, beyond 64 KiB each;"
        " past it: 503",
    )
    translation_cache_bytes: int = Field(
        8 << 20,
        ge=0,
        description="memory for decisions already made (pods of one ReplicaSet, or of a"
        " StatefulSet, are alike in what is read); 0: none",
    )
    excluded_namespaces: str = Field(
        "kube-system",
        description="namespaces whose pods are never converted, comma-separated (the chart"
        " passes those its webhook configuration excludes)",
    )
    volcano_jobs: Literal["leave", "convert"] = Field(
        "leave",
        description="convert: POST /mutate-volcano-jobs converts a Volcano Job's task templates"
        " at its admission (the chart's volcano.convertJobs); leave: it answers unchanged",
    )
    volcano_schedulers: str = Field(
        "volcano",
        description="the schedulers of Volcano whose Jobs are converted, comma-separated",
    )
    template_rate: float = Field(
        20.0, gt=0, description="new ResourceClaimTemplates a second, per namespace"
    )
    template_burst: float = Field(
        100.0, ge=1, description="new ResourceClaimTemplates at once, per namespace"
    )
    migration_scope: Literal["all", "namespaces", "workloads"] = Field(
        "all",
        description="the chart's migration.scope; with workloads, POST /validate-workloads"
        " judges only pod templates labelled hami.io/gpu-migration=dra, as the pod webhook's"
        " objectSelector sends only those pods",
    )
    gpu_quota: bool = Field(
        True,
        description="keep GPU memory and cores ResourceQuotas (limits.nvidia.com/gpumem ...)"
        " for converted pods: hold GPU pods of such namespaces until they fit (docs/quotas.md)",
    )
    gpu_quota_interval: Seconds = Field(
        1.0,
        gt=0,
        description="the least seconds between two counts of one namespace's GPU quota",
    )
    gpu_quota_lease: str = Field(
        "hami-dra-webhook-gpu-quota",
        description="the Lease (in the webhook's namespace) that lets one replica at a time"
        " release held pods",
    )
    bare_endpoint: bool = Field(
        False, description="serve POST /bare (reads the body, fixed answer): for benchmarks"
    )
    probe_namespace: str = Field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE", "default"),
        description="the webhook's own namespace (default: $POD_NAMESPACE, else default)",
    )
    idle_timeout: int = Field(
        120,
        ge=1,
        description="seconds a keep-alive connection may stay idle: over kube-apiserver's 90, so"
        " that it closes idle connections, not the webhook (a close that crosses a request"
        " fails that admission)",
    )
    graceful_shutdown: Seconds = Field(
        15.0, ge=0, description="seconds in-flight requests get to finish on shutdown"
    )
    drain_delay: Seconds = Field(
        0.0,
        ge=0,
        description="seconds to keep serving after SIGTERM, while the pod leaves the Service's"
        " endpoints (/readyz says shutting down)",
    )
    self_managed_certs: bool = Field(
        False,
        description="issue and renew the certificate in --cert-secret and set the caBundle",
    )
    cert_secret: str = Field(
        "hami-dra-webhook-tls", description="self-managed: the Secret holding the certificate"
    )
    webhook_config: str = Field(
        "hami-dra-webhook",
        description="self-managed: the MutatingWebhookConfiguration to keep in step",
    )
    service_name: str = Field(
        "hami-dra-webhook", description="self-managed: the webhook's Service (certificate names)"
    )
    cert_hosts: str = Field(
        "", description="self-managed: more names or IPs for the certificate, comma-separated"
    )
    cert_dir: Path = Field(
        Path("/tmp/hami-dra-webhook-certs"),
        description="self-managed: where the certificate files are written",
    )
    self_signed_dir: Path | None = Field(
        None,
        description="without --cert-file: where the generated CA and certificate go (default:"
        " a temporary folder, removed on exit)",
    )
    cert_check_interval: Seconds = Field(
        3600.0, gt=0, description="self-managed: seconds between certificate checks"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.self_managed_certs and self.cert_file is not None:
            raise ValueError("--self-managed-certs and --cert-file exclude each other")
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("give both --cert-file and --key-file, or neither")
        if self.cache_ttl * 4 > self.gc_grace:
            raise ValueError(
                "the template cache TTL must be well below the GC grace period"
                " (at most a quarter): a cached template could otherwise be collected"
            )
        if self.max_bodies_bytes < self.max_body_bytes:
            raise ValueError(
                "--max-bodies-bytes must be at least --max-body-bytes: no body could be read"
            )
        if self.ops_port and self.ops_port == self.port and self.ops_host == self.host:
            raise ValueError("--ops-port must differ from --port")
        return self


def flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()
