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
        if error.status == 0:
            raise ClusterUnavailable(
                f"the cluster did not answer: {error.message}; is it up, and is this the"
                " context you meant? (kubectl cluster-info says the same)"
            ) from error
        raise ClusterUnavailable(f"the Kubernetes API failed: {error}") from error


def context_namespace(args: argparse.Namespace) -> str:
    """`-n`'s default, as kubectl's: the context's namespace (raises ClusterUnavailable)."""
    from hami_dra_webhook.kube import kubeconfig

    try:
        return kubeconfig.namespace(args.kubeconfig, args.context)
    except kubeconfig.KubeconfigProblem as problem:
        raise ClusterUnavailable(str(problem)) from None


def say_unavailable(error: ClusterUnavailable, stderr: TextIO) -> None:
    stderr.write(f"error: {error}\n")
