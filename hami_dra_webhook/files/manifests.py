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
# An object with its YAML aliases written out holds at most this many values (kube-apiserver
# takes 3 MiB a request: no object it stores holds a million); Lists nest at most this deep.
MAX_VALUES = 1_000_000
MAX_LIST_DEPTH = 8

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
                aliased = may_alias(text)
                found = [m for item in parsed for m in _expand_lists(item, aliased)]
            except ManifestError as error:
                unreadable.append(str(error))
                continue
            if not parsed:
                empty.append(source)
            manifests += found
    return ReadResult(manifests, unreadable, empty)


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


def may_alias(text: str) -> bool:
    """Whether a YAML text can hold an alias at all (`*name`): without one no object is shared,
    and the bound on what aliases write out (`too_large`) need not be counted."""
    return "*" in text


def _expand_lists(manifest: Manifest, aliased: bool, depth: int = 0) -> list[Manifest]:
    """The objects of a document: itself, or the items of a List (or a YAML list) in it, each
    within the bounds of an object (`bounded`)."""
    items = _list_items(manifest.document)
    if items is None or depth >= MAX_LIST_DEPTH:
        return [bounded(manifest) if aliased else manifest]
    return [
        m
        for item in items
        for m in _expand_lists(Manifest(manifest.source, item, manifest.index), aliased, depth + 1)
    ]


def _list_items(document: object) -> list[Any] | None:
    """The objects of a List (or a YAML list of objects); None for one object."""
    if isinstance(document, list):
        return document
    if (
        isinstance(document, dict)
        and str(document.get("kind", "")).endswith("List")
        and isinstance(document.get("items"), list)
    ):
        return list(document["items"])
    return None


def bounded(manifest: Manifest) -> Manifest:
    """The manifest, if its object is within what an API object can be (`too_large`); else
    ManifestError, which says where and why."""
    problem = too_large(manifest.document)
    if problem:
        raise ManifestError(f"{manifest.source}: document {manifest.index + 1}: {problem}")
    return manifest


def too_large(document: object, depth: int = 0) -> str:
    """What makes `document` larger than any API object once every YAML alias is written out
    (more than MAX_VALUES values, or an alias inside itself); "" when nothing does. Aliases let
    a few lines stand for 10^8 values (each list naming the one before ten times, eight deep),
    and an alias inside itself for an endless object: each would stall or break whatever reads
    or prints the object."""
    items = _list_items(document)
    if items is not None and depth < MAX_LIST_DEPTH:  # each object of a List on its own
        return next((p for item in items if (p := too_large(item, depth + 1))), "")
    if expanded_size(document, MAX_VALUES) is not None:
        return ""
    return (
        f"its YAML aliases write out to more than {MAX_VALUES:,} values, or one holds itself:"
        " no Kubernetes object is that large; write the values out without aliases, or leave"
        " the file out"
    )


def expanded_size(document: object, limit: int) -> int | None:
    """How many maps, lists and values `document` holds with its aliases written out (each
    shared map or list counted once per place it appears, computed once); None when that is
    more than `limit` or a map or list holds itself."""
    sizes: dict[int, int] = {}
    path: set[int] = set()  # the maps and lists being counted, from the document down
    stack: list[tuple[object, bool]] = [(document, False)]
    while stack:
        node, children_counted = stack.pop()
        if not isinstance(node, dict | list):
            continue
        key = id(node)
        children = list(node.values()) if isinstance(node, dict) else node
        if children_counted:
            path.discard(key)
            sizes[key] = 1 + sum(sizes.get(id(c), 1) for c in children)
            if sizes[key] > limit:
                return None
            continue
        if key in sizes:
            continue
        if key in path:
            return None  # an alias inside itself
        path.add(key)
        stack.append((node, True))
        stack += [(c, False) for c in children if isinstance(c, dict | list)]
    return sizes.get(id(document), 1)


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
