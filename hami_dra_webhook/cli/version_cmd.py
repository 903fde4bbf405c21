"""`hami-dra-webhook version`: the package's version, and what it runs on; with `--cluster`,
also the webhook installed in the cluster (as `kubectl version` shows client and server)."""

from __future__ import annotations

import argparse
import platform
from typing import Any, TextIO

from hami_dra_webhook import __version__
from hami_dra_webhook.cli import exit_codes
from hami_dra_webhook.cli.cluster_access import (
    ClusterUnavailable,
    add_cluster_flags,
    on_cluster,
    say_unavailable,
)
from hami_dra_webhook.cli.inputs import add_output, write_data

# The chart's MutatingWebhookConfigurations, in whatever release it was installed. Only they
# say where its webhooks run (a Deployment of the same name as their Service, in its namespace):
# a configuration is cluster-scoped, which no tenant writes, while anyone may label a
# Deployment of their own namespace as the chart's (issue 61).
CHART_CONFIGURATIONS = "app.kubernetes.io/part-of=hami-dra-webhook"


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "version",
        help="print the version (--cluster: and the installed webhook's)",
        description="Print hami-dra-webhook's version (the chart and image carry the same one)."
        " With --cluster, also each webhook the chart installed in the cluster: its version,"
        " image and ready replicas.",
    )
    parser.add_argument(
        "--cluster", action="store_true", help="also read the installed webhook from the cluster"
    )
    add_cluster_flags(parser)
    add_output(parser)
    parser.set_defaults(run=run)


def facts() -> dict[str, str]:
    return {
        "version": __version__,
        "python": platform.python_version(),
        "platform": f"{platform.system().lower()}/{platform.machine()}",
    }


def served_by(configurations: list[Any]) -> list[tuple[str, str]]:
    """Where each of the chart's webhook configurations says its webhook runs: the Deployment
    named as the configuration (the chart names both after the release), in its Service's
    namespace, or, where it calls a URL (admission.url), in the namespace Helm installed it in
    (its meta.helm.sh/release-namespace annotation)."""
    found: dict[tuple[str, str], None] = {}
    for configuration in configurations:
        if not isinstance(configuration, dict):
            continue
        metadata = configuration.get("metadata") or {}
        webhooks = configuration.get("webhooks")
        services = [
            ((w or {}).get("clientConfig") or {}).get("service") or {}
            for w in (webhooks if isinstance(webhooks, list) else [])
        ]
        namespaces = [s.get("namespace") for s in services if s.get("namespace")]
        helm = (metadata.get("annotations") or {}).get("meta.helm.sh/release-namespace")
        namespace, name = (namespaces or [helm])[0], metadata.get("name")
        if isinstance(namespace, str) and isinstance(name, str) and namespace and name:
            found[(namespace, name)] = None
    return sorted(found)


def installed(deployments: list[Any]) -> list[dict[str, Any]]:
    """Each installed webhook: where, its version label, image, replicas ready of wanted."""
    found = []
    for item in deployments:
        metadata, spec = item.get("metadata") or {}, item.get("spec") or {}
        containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
        status = item.get("status") or {}
        found.append(
            {
                "namespace": str(metadata.get("namespace", "")),
                "name": str(metadata.get("name", "")),
                "version": str((metadata.get("labels") or {}).get("app.kubernetes.io/version", "")),
                "image": str(containers[0].get("image", "")) if containers else "",
                "ready": int(status.get("readyReplicas") or 0),
                "replicas": int(spec.get("replicas") or 0),
            }
        )
    return found


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    webhooks: list[dict[str, Any]] | None = None
    if args.cluster:

        async def read(api: Any) -> list[Any]:
            from hami_dra_webhook.kube.port import ApiError, paths

            query = [("labelSelector", CHART_CONFIGURATIONS)]
            configurations = await api.list_path(paths.WEBHOOKS, query, timeout=10)
            found: list[Any] = []
            for namespace, name in served_by(configurations):
                path = f"{paths.workloads('Deployment', namespace)}/{name}"
                try:
                    found.append(await api.get_path(path, timeout=10))
                except ApiError as error:
                    if error.status != 404:
                        raise
            return found

        try:
            webhooks = installed(on_cluster(args, read))
        except ClusterUnavailable as error:
            say_unavailable(error, stderr)
            return exit_codes.UNREADABLE
    if args.output != "text":
        data: dict[str, Any] = facts()
        if webhooks is not None:
            data["webhooks"] = webhooks
        write_data(data, args.output, stdout)
        return 0
    if webhooks is None:
        stdout.write(f"{args.prog_name} {__version__}\n")
        return 0
    stdout.write(f"client: {args.prog_name} {__version__}\n")
    for hook in webhooks:
        stdout.write(
            f"webhook: {hook['version'] or 'unknown version'} in {hook['namespace']}/"
            f"{hook['name']} ({hook['image']}, {hook['ready']}/{hook['replicas']} ready)\n"
        )
    if not webhooks:
        stdout.write("webhook: not installed (no Deployment of the chart in any namespace)\n")
    return 0
