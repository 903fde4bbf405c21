"""Cluster access for the server and the tools, found as kubectl finds it (a kubeconfig, else
the in-cluster service account), through the official client's configuration loaders."""

from __future__ import annotations

import os

import kubernetes.aio.config

from hami_dra_webhook.kube import kubeconfig as kubeconfig_file
from hami_dra_webhook.kube.client import Configuration, KubernetesApi
from hami_dra_webhook.kube.port import in_cluster


async def load_configuration(kubeconfig: str | None) -> Configuration | None:
    """From --kubeconfig, else the in-cluster service account, else None (offline)."""
    configuration = Configuration()
    if kubeconfig:
        await kubernetes.aio.config.load_kube_config(
            config_file=kubeconfig, client_configuration=configuration, persist_config=False
        )
    elif in_cluster():
        kubernetes.aio.config.load_incluster_config(client_configuration=configuration)
    else:
        return None
    configuration.retries = None
    return configuration


class ClusterAccessError(RuntimeError):
    """No usable cluster access; the message says what to pass."""


def _default_kubeconfig() -> str | None:
    """The files kubectl reads ($KUBECONFIG's present ones, else ~/.kube/config), as the
    client library takes a list of them; None when there is none."""
    return os.pathsep.join(kubeconfig_file.files(None)) or None


async def connect(kubeconfig: str | None, context: str | None = None) -> KubernetesApi:
    """The API for a command-line tool, found as kubectl finds it: --kubeconfig, else
    $KUBECONFIG, else ~/.kube/config, else the in-cluster service account."""
    configuration = Configuration()
    source = kubeconfig or _default_kubeconfig()
    try:
        kubeconfig_file.check(kubeconfig, context)
    except kubeconfig_file.KubeconfigProblem as problem:
        raise ClusterAccessError(str(problem)) from None
    try:
        if source is not None:
            await kubernetes.aio.config.load_kube_config(
                config_file=source,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        elif in_cluster():
            kubernetes.aio.config.load_incluster_config(client_configuration=configuration)
        else:
            raise ClusterAccessError(
                "no cluster: no --kubeconfig, $KUBECONFIG or ~/.kube/config, and not in a pod"
            )
    except ClusterAccessError:
        raise
    except Exception as error:  # the client raises many kinds for a bad kubeconfig
        raise ClusterAccessError(f"cannot load cluster access from {source}: {error}") from error
    configuration.retries = None
    return KubernetesApi(configuration)
