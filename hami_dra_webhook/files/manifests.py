"""Reading Kubernetes manifests (YAML or JSON: files, folders, stdin); finding pod templates."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.files.fast_yaml import FastSafeLoader, dump_block

# libyaml's parser and emitter where PyYAML has them, and the Python half made faster
# (files/fast_yaml.py).
_Loader: Any = FastSafeLoader

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

# Where each built-in workload kind, by API group and kind, keeps the pod it creates.
POD_TEMPLATE_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): (),
    ("", "PodTemplate"): ("template",),
    ("", "ReplicationController"): ("spec", "template"),
    ("apps", "Deployment"): ("spec", "template"),
    ("apps", "ReplicaSet"): ("spec", "template"),
    ("apps", "StatefulSet"): ("spec", "template"),
    ("apps", "DaemonSet"): ("spec", "template"),
    ("batch", "Job"): ("spec", "template"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template"),
}


class ManifestError(ValueError):
    """Input that cannot be read as Kubernetes manifests; the message names the source."""


@dataclass(frozen=True, slots=True)
class Manifest:
    source: str
    document: Any
    index: int = 0  # the document's place in its file, from 0 (items of a List share it)

    @property
    def where(self) -> str:
        """`file` for a file's only document, else `file#N` (N from 1, as editors count)."""
        return f"{self.source}#{self.index + 1}" if self.index else self.source


@dataclass(frozen=True, slots=True)
class ReadResult:
    manifests: list[Manifest]
    # "<file>: <why>" for each file that could not be read or parsed; the rest was read.
    unreadable: list[str]
    empty: list[str] = field(default_factory=list)  # sources with no document in them


def read_manifests(paths: list[str], stdin: TextIO) -> ReadResult:
    """Every manifest of the files, folders and `-` named. A file that cannot be read or parsed
    (a Helm template in the tree, say) is reported and skipped; a path that does not exist
    raises ManifestError (the command line is wrong)."""
    manifests: list[Manifest] = []
    unreadable: list[str] = []
    empty: list[str] = []
    for path in paths:
        if path == "-":
            sources: list[tuple[str, str | None]] = [("<stdin>", stdin.read())]
        else:
            sources = [(str(file), _read(file, unreadable)) for file in _files(Path(path))]
        for source, text in sources:
            if text is None:
                continue
            try:
                parsed = _parse(text, source)
            except ManifestError as error:
                unreadable.append(str(error))
                continue
            if not parsed:
                empty.append(source)
            manifests += parsed
    expanded = [m for item in manifests for m in _expand_lists(item)]
    return ReadResult(expanded, unreadable, empty)


def _read(file: Path, unreadable: list[str]) -> str | None:
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        unreadable.append(f"{file}: {not_utf8(error)}")
        return None
    except OSError as error:
        unreadable.append(f"{file}: cannot read: {error.strerror or error}")
        return None


def not_utf8(error: UnicodeDecodeError) -> str:
    """What is wrong with a file that is not UTF-8, in words (not the codec's)."""
    return (
        f"not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset {error.start}):"
        " manifests are UTF-8; convert it, or leave the file out"
    )


def _files(path: Path) -> Iterator[Path]:
    if path.is_dir():
        yield from sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and p.suffix in MANIFEST_SUFFIXES and not hidden(p, path)
        )
    elif path.exists():
        yield path
    else:
        raise ManifestError(f"{path}: no such file or folder")


def hidden(file: Path, folder: Path) -> bool:
    """Whether `file` is inside a hidden folder, or hidden itself, below the folder named:
    `.git`, `.github`, and the `..data` and `..<timestamp>` folders of a mounted ConfigMap,
    whose files would otherwise be read twice."""
    return any(part.startswith(".") for part in file.relative_to(folder).parts)


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
    return [Manifest(source, doc, index) for index, doc in enumerate(documents) if doc is not None]


def _expand_lists(manifest: Manifest) -> list[Manifest]:
    document = manifest.document
    if isinstance(document, list):
        return [
            m
            for item in document
            for m in _expand_lists(Manifest(manifest.source, item, manifest.index))
        ]
    if (
        isinstance(document, dict)
        and str(document.get("kind", "")).endswith("List")
        and isinstance(document.get("items"), list)
    ):
        return [
            m
            for item in document["items"]
            for m in _expand_lists(Manifest(manifest.source, item, manifest.index))
        ]
    return [manifest]


def api_group(document: Any) -> str:
    """The API group of an object: `apps` for `apps/v1`, "" for the core `v1`."""
    version = document.get("apiVersion") if isinstance(document, dict) else None
    return version.rpartition("/")[0] if isinstance(version, str) else ""


def pod_template(document: Any) -> tuple[tuple[str, ...], JsonObject] | None:
    """The pod (template) inside a built-in workload and its path, or None for other kinds
    (matched by API group and kind: an `example.com/v1` Deployment is not a Deployment)."""
    if not isinstance(document, dict):
        return None
    path = POD_TEMPLATE_PATHS.get((api_group(document), str(document.get("kind"))))
    if path is None:
        return None
    node: Any = document
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return (path, node) if isinstance(node, dict) else None


def dump_yaml(documents: list[Any]) -> str:
    """Block style, keys in their order, `---` before each document, never an alias."""
    return dump_block(documents)
