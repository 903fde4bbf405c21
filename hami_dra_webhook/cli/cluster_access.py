"""What the commands that read a cluster (`check`, `gc`, `scan --cluster`) share: the flags that
find it, as kubectl finds it, and one way to connect, run, close, and say what failed."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TextIO, TypeVar

T = TypeVar("T")


class ClusterUnavailable(RuntimeError):
    """The cluster could not be reached or did not answer; the message says which."""


def add_cluster_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig", help="cluster access; default: $KUBECONFIG, ~/.kube/config, in-cluster"
    )
    parser.add_argument("--context", help="the kubeconfig context to use (default: current)")


def on_cluster(args: argparse.Namespace, work: Callable[[Any], Awaitable[T]]) -> T:
    """`work(api)` on the cluster the flags name, the connection closed after; raises
    ClusterUnavailable with what went wrong."""
    from hami_dra_webhook.kube.connect import ClusterAccessError, connect
    from hami_dra_webhook.kube.port import ApiError

    async def connected() -> T:
        api = await connect(args.kubeconfig, args.context)
        try:
            return await work(api)
        finally:
            await api.close()

    try:
        return asyncio.run(connected())
    except ClusterAccessError as error:
        raise ClusterUnavailable(str(error)) from error
    except ApiError as error:
        raise ClusterUnavailable(api_failure_words(error)) from error


def api_failure_words(error: Any) -> str:
    """What a failed call says: what happened, the call (method and URL), and the likely fix."""
    call = f" ({error.request})" if getattr(error, "request", "") else ""
    if error.status == 0:
        return (
            f"the cluster did not answer: {error.message}{call}; is it up, and is this the"
            " context you meant? (kubectl cluster-info says the same)"
        )
    if not getattr(error, "from_kubernetes", True):
        return (
            f"the server answered {error.status} {error.reason}{call} without a Kubernetes"
            " Status: it is likely no Kubernetes API server (or a proxy in front of one):"
            " check the kubeconfig's server URL (kubectl config view --minify)"
        )
    hints = {
        401: "the kubeconfig's credentials were refused: log in again or renew the token",
        403: "this identity may not do that: ask for the RBAC the command needs"
        " (docs/cli.md lists each command's)",
        404: "the object or API is not there: is the name, namespace or Kubernetes version"
        " (1.34+ for resource.k8s.io/v1) right?",
    }
    hint = f"; {hints[error.status]}" if error.status in hints else ""
    return f"the Kubernetes API failed{call}: {error}{hint}"


def context_namespace(args: argparse.Namespace) -> str:
    """`-n`'s default, as kubectl's: the context's namespace (raises ClusterUnavailable)."""
    from hami_dra_webhook.kube import kubeconfig

    try:
        return kubeconfig.namespace(args.kubeconfig, args.context)
    except kubeconfig.KubeconfigProblem as problem:
        raise ClusterUnavailable(str(problem)) from None


def say_unavailable(error: ClusterUnavailable, stderr: TextIO) -> None:
    stderr.write(f"error: {error}\n")
