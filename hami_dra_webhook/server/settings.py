"""Server settings: flags and `HAMI_DRA_*` environment variables (flags win)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HAMI_DRA_", frozen=True)

    host: str = "0.0.0.0"  # a webhook listens on the pod's address
    port: int = Field(8443, ge=1, le=65535)
    cert_file: Path | None = None
    key_file: Path | None = None
    config: Path | None = None
    tls_min_version: Literal["1.2", "1.3"] = "1.3"
    kubeconfig: Path | None = None
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "text"] = "json"
    # The whole admission ends within this; keep it below the webhook's timeoutSeconds (10).
    admission_budget: float = Field(5.0, gt=0, le=30)
    cache_ttl: float = Field(300.0, gt=0)
    gc_interval: float = Field(600.0, ge=0)  # 0: no GC loop in the server
    gc_grace: float = Field(3600.0, gt=0)
    cluster_check_interval: float = Field(300.0, gt=0)
    cert_reload_interval: float = Field(1.0, gt=0)
    max_body_bytes: int = Field(6 * 1024 * 1024, gt=0)
    request_read_timeout: float = Field(10.0, gt=0)
    # Connections and requests at once; past it uvicorn answers 503 (failurePolicy applies).
    max_concurrency: int = Field(1024, ge=1)
    # POST /bare: reads the body, answers a fixed JSON; the benchmark's measure of the stack.
    bare_endpoint: bool = False
    probe_namespace: str = Field(default_factory=lambda: os.environ.get("POD_NAMESPACE", "default"))
    graceful_shutdown: float = Field(15.0, ge=0)
    # Self-managed certificates (the chart's default): kept in a Secret by the webhook itself.
    self_managed_certs: bool = False
    cert_secret: str = "hami-dra-webhook-tls"
    webhook_config: str = "hami-dra-webhook"
    service_name: str = "hami-dra-webhook"
    # Comma-separated names or IP addresses the certificate covers besides the Service's.
    cert_hosts: str = ""
    cert_dir: Path = Path("/tmp/hami-dra-webhook-certs")
    # No certificate files: the generated self-signed pair goes here (default: a temporary
    # folder, removed on exit).
    self_signed_dir: Path | None = None
    cert_check_interval: float = Field(3600.0, gt=0)

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
        return self
