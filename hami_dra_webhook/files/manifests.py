"""Reading Kubernetes manifests (YAML or JSON: files, folders, stdin); finding pod templates."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from hami_dra_webhook.core.types import JsonObject

# libyaml's parser and emitter are about ten times faster; PyYAML may be built without them.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

# Where each workload kind keeps the pod it creates.
POD_TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": (),
    "PodTemplate": ("template",),
    "Deployment": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


class ManifestError(ValueError):
    """Input that cannot be read as Kubernetes manifests; the message names the source."""


@dataclass(frozen=True, slots=True)
class Manifest:
    source: str
    document: Any


@dataclass(frozen=True, slots=True)
class ReadResult:
    manifests: list[Manifest]
    # "<file>: <why>" for each file that could not be read or parsed; the rest was read.
    unreadable: list[str]


def read_manifests(paths: list[str], stdin: TextIO) -> ReadResult:
    """Every manifest of the files, folders and `-` named. A file that cannot be read or parsed
    (a Helm template in the tree, say) is reported and skipped; a path that does not exist
    raises ManifestError (the command line is wrong)."""
    manifests: list[Manifest] = []
    unreadable: list[str] = []
    for path in paths:
        if path == "-":
            sources: list[tuple[str, str | None]] = [("<stdin>", stdin.read())]
        else:
            sources = [(str(file), _read(file, unreadable)) for file in _files(Path(path))]
        for source, text in sources:
            if text is None:
                continue
            try:
                manifests += _parse(text, source)
            except ManifestError as error:
                unreadable.append(str(error))
    return ReadResult([m for item in manifests for m in _expand_lists(item)], unreadable)


def _read(file: Path, unreadable: list[str]) -> str | None:
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        unreadable.append(f"{file}: cannot read: {error}")
        return None


def _files(path: Path) -> Iterator[Path]:
    if path.is_dir():
        yield from sorted(
            p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES
        )
    elif path.exists():
        yield path
    else:
        raise ManifestError(f"{path}: no such file or folder")


def _parse(text: str, source: str) -> list[Manifest]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [Manifest(source, json.loads(text))]
        except json.JSONDecodeError:
            pass  # YAML flow style also starts this way
    try:
        documents = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as error:
        raise ManifestError(f"{source}: not valid YAML or JSON: {error}") from error
    return [Manifest(source, doc) for doc in documents if doc is not None]


def _expand_lists(manifest: Manifest) -> list[Manifest]:
    document = manifest.document
    if isinstance(document, list):
        return [m for item in document for m in _expand_lists(Manifest(manifest.source, item))]
    if (
        isinstance(document, dict)
        and str(document.get("kind", "")).endswith("List")
        and isinstance(document.get("items"), list)
    ):
        return [
            m for item in document["items"] for m in _expand_lists(Manifest(manifest.source, item))
        ]
    return [manifest]


def pod_template(document: Any) -> tuple[tuple[str, ...], JsonObject] | None:
    """The pod (template) inside a workload and its path, or None for other kinds."""
    if not isinstance(document, dict):
        return None
    path = POD_TEMPLATE_PATHS.get(str(document.get("kind")))
    if path is None:
        return None
    node: Any = document
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return (path, node) if isinstance(node, dict) else None


class _NoAliasDumper(_Dumper):  # type: ignore[misc]
    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(documents: list[Any]) -> str:
    return yaml.dump_all(
        documents,
        Dumper=_NoAliasDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        explicit_start=True,
        width=1 << 16,
    )
