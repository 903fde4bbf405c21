"""What the command-line tools read from a kubeconfig before the client library does: the
context's namespace (kubectl's default for `-n`), and what is wrong with a kubeconfig, in plain
words, where the library would say `'NoneType' object does not support item assignment`.

Files are merged as kubectl merges `$KUBECONFIG`: the first file to set `current-context` sets it,
and the first definition of a context, cluster or user wins.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_NAMESPACE = "default"


class KubeconfigProblem(ValueError):
    """The kubeconfig cannot be used; the message says why and what to do."""


@dataclass
class Kubeconfig:
    files: list[str]
    current_context: str = ""
    contexts: dict[str, dict[str, Any]] = field(default_factory=dict)
    clusters: set[str] = field(default_factory=set)
    users: set[str] = field(default_factory=set)

    def context(self, name: str | None) -> tuple[str, dict[str, Any]]:
        """The context named (or the current one), checked to name a defined cluster."""
        where = ", ".join(self.files)
        known = ", ".join(sorted(self.contexts)) or "none"
        chosen = name or self.current_context
        if not chosen:
            raise KubeconfigProblem(
                f"{where} has no current-context: pass --context NAME (contexts: {known}) or run"
                " `kubectl config use-context NAME`"
            )
        context = self.contexts.get(chosen)
        if context is None:
            raise KubeconfigProblem(f"{where} has no context named {chosen!r} (contexts: {known})")
        cluster = context.get("cluster")
        if cluster not in self.clusters:
            raise KubeconfigProblem(
                f"context {chosen!r} in {where} names cluster {cluster!r}, which is not defined"
                " there: add it under clusters, or choose another --context"
            )
        user = context.get("user")
        if user and user not in self.users:
            raise KubeconfigProblem(
                f"context {chosen!r} in {where} names user {user!r}, which is not defined there:"
                " add it under users, or choose another --context"
            )
        return chosen, context


def files(kubeconfig: str | None) -> list[str]:
    """The files kubectl would read: --kubeconfig, else $KUBECONFIG's, else ~/.kube/config."""
    if kubeconfig:
        return [kubeconfig]
    named = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    present = [p for p in named if Path(p).expanduser().is_file()]
    if present:
        return present
    home = Path("~/.kube/config").expanduser()
    return [str(home)] if home.is_file() else []


def read(paths: list[str]) -> Kubeconfig:
    """The merged kubeconfig of `paths`; KubeconfigProblem names the file and what is wrong."""
    merged = Kubeconfig(files=paths)
    for path in paths:
        document = _document(path)
        merged.current_context = merged.current_context or str(
            document.get("current-context") or ""
        )
        for entry in _entries(document, "contexts", path):
            body = entry.get("context")
            merged.contexts.setdefault(str(entry["name"]), body if isinstance(body, dict) else {})
        merged.clusters |= {str(e["name"]) for e in _entries(document, "clusters", path)}
        merged.users |= {str(e["name"]) for e in _entries(document, "users", path)}
    return merged


def check(kubeconfig: str | None, context: str | None) -> None:
    """Raise KubeconfigProblem when the kubeconfig kubectl would use cannot be used."""
    paths = files(kubeconfig)
    if paths:
        read(paths).context(context)


def namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace kubectl would use without -n: the context's, else the pod's own in a
    cluster, else `default`. A kubeconfig that cannot be used raises KubeconfigProblem."""
    paths = files(kubeconfig)
    if paths:
        _, chosen = read(paths).context(context)
        return str(chosen.get("namespace") or DEFAULT_NAMESPACE)
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


def _document(path: str) -> dict[str, Any]:
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KubeconfigProblem(f"kubeconfig {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "it is not UTF-8 text"
        raise KubeconfigProblem(f"cannot read kubeconfig {path}: {reason}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        raise KubeconfigProblem(f"kubeconfig {path} is not valid YAML{line}") from None
    if not isinstance(document, dict) or not document:
        raise KubeconfigProblem(
            f"kubeconfig {path} is empty or not a kubeconfig: expected a YAML map with"
            " clusters, contexts, users and current-context (`kubectl config view` shows one)"
        )
    return document


def _entries(document: dict[str, Any], key: str, path: str) -> list[dict[str, Any]]:
    entries = document.get(key) or []
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("name"), str) for e in entries
    ):
        raise KubeconfigProblem(f"kubeconfig {path}: {key} must be a list of entries with a name")
    return entries
