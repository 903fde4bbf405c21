"""What the server's apps and jobs use (`Services`), built by the `serve` command's builder (or
by a test)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hami_dra_webhook.admission.mutator import PodMutator
from hami_dra_webhook.cluster.state import ClusterState
from hami_dra_webhook.kube.port import KubeApi
from hami_dra_webhook.server.listening import Lifecycle
from hami_dra_webhook.server.metrics import Metrics
from hami_dra_webhook.server.settings import Settings
from hami_dra_webhook.server.supervisor import Job, Supervisor
from hami_dra_webhook.server.tls import ReloadingTLS


@dataclass
class Services:
    settings: Settings
    mutator: PodMutator
    metrics: Metrics
    tls: ReloadingTLS | None = None
    api: KubeApi | None = None
    cluster: ClusterState | None = None
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    # Every background job (server/jobs.py builds them); the app's lifespan supervises them.
    background: list[Job] = field(default_factory=list)
    supervisor: Supervisor | None = None  # set while the app runs
