"""The tests' own calls to the real kube-apiserver, one HTTPS call each, without starting
kubectl: the reads the tests poll (`kubectl get -o json`) and the set-up and tear-down of their
namespaces. Each kubectl process costs about 75 ms of CPU (measured with process accounting on
2026-12-06: 5,978 kubectl processes took 451 s of the default run's 2,099 s of CPU, most of them
polls and namespace chores).

A read is answered as kubectl prints it (a list is a `List` whose items carry `apiVersion` and
`kind`; no `managedFields`). Only the forms the tests use are read here: `RESOURCE[/NAME] [NAME]
[-n NS | -A] [-l SELECTOR] [--field-selector SELECTOR] [-o json]`, RESOURCE as kubectl names it
(plural, singular, short name, or `plural.group`; several, comma-separated, without a NAME) for
resources the server's discovery lists. Any other form is None, and the caller runs kubectl
itself. A test's own set-up creates, applies, deletes and patches the status of objects here too
(`create`, `apply`, `delete`, `patch_status`); where a test checks what a user's tool says or
does (kubectl's words, its flags, `--as`), it runs the tool.

`apply` is kube-apiserver's own (server-side apply: one PATCH of type
application/apply-patch+yaml an object, forced, with the strict field validation kubectl's
default `--validate=strict` asks for): the object is created, or updated where it exists,
through the same admission chain as with `kubectl apply` (CREATE or UPDATE). kubectl's
client-side apply differs in what it keeps for itself (the `last-applied-configuration`
annotation) and in its words for a field the kind has not ("unknown field", where the
server's apply says "field not declared in schema"); it costs a process and a GET besides (a
default run started 642 `kubectl apply` processes on 2026-12-08, most of them tests' set-up)."""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# (method, path[, body]) -> (status, decoded body): the admin's HTTPS call
Request = Callable[..., tuple[int, Any]]
DEFAULT_NAMESPACE = "default"  # the admin kubeconfig's context names none
REDISCOVER_AFTER = 2.0  # seconds: a name not found again within this asks discovery once more


APPLY = {"Content-Type": "application/apply-patch+yaml"}  # a JSON body is YAML too
APPLY_QUERY = {"fieldManager": "hami-e2e-apply", "force": "true", "fieldValidation": "Strict"}


def _items(document: Any) -> list[Any]:
    """A List's items, or the document alone."""
    if isinstance(document, dict) and document.get("kind") == "List":
        items = document.get("items")
        return list(items) if isinstance(items, list) else [None]
    return [document]


class NotServed(AssertionError):
    """The server answered an error (kubectl would exit non-zero with its words)."""


@dataclass(frozen=True, slots=True)
class Resource:
    prefix: str  # "/api/v1", "/apis/resource.k8s.io/v1"
    plural: str
    namespaced: bool
    kind: str
    api_version: str


@dataclass(frozen=True, slots=True)
class Query:
    resource: str
    name: str | None
    namespace: str | None  # None: every namespace (-A)
    labels: str | None
    fields: str | None


def parse(args: tuple[str, ...]) -> Query | None:
    """The query kubectl would make of these `get` arguments; None: a form not read here."""
    positional: list[str] = []
    namespace: str | None = DEFAULT_NAMESPACE
    labels = fields = None
    rest = list(args)
    while rest:
        token = rest.pop(0)
        flag, equals, given = token.partition("=")
        value: str = given
        if flag in ("-n", "--namespace", "-l", "--selector", "--field-selector", "-o", "--output"):
            if not equals:
                if not rest:
                    return None
                value = rest.pop(0)
            if flag in ("-n", "--namespace"):
                namespace = value
            elif flag in ("-l", "--selector"):
                labels = value
            elif flag == "--field-selector":
                fields = value
            elif value != "json":
                return None
        elif token in ("-A", "--all-namespaces"):
            namespace = None
        elif token.startswith("-"):
            return None
        else:
            positional.append(token)
    if positional and "/" in positional[0]:
        kind, _, named = positional[0].partition("/")
        positional = [kind, named, *positional[1:]]
    if not positional or len(positional) > 2:
        return None
    if "," in positional[0] and len(positional) > 1:
        return None  # kubectl takes a NAME with one resource only
    name = positional[1] if len(positional) == 2 else None
    return Query(positional[0], name, namespace, labels, fields)


def _message(body: Any) -> Any:
    return body.get("message") if isinstance(body, dict) else body


def _shown(item: Any) -> Any:
    """The object as kubectl prints it: without `metadata.managedFields`
    (`--show-managed-fields` is false by default)."""
    metadata = item.get("metadata") if isinstance(item, dict) else None
    if isinstance(metadata, dict) and "managedFields" in metadata:
        item["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
    return item


class RestCalls:
    """The calls for one control plane, through `request` (the admin's HTTPS call)."""

    def __init__(self, request: Request) -> None:
        self._request = request
        self._send = request
        self._names: dict[str, Resource] = {}
        self._discovered_at = float("-inf")
        self._lock = threading.Lock()

    def get(self, args: tuple[str, ...]) -> Any | None:
        """What `kubectl get -o json ARGS` prints, decoded; None: ask kubectl."""
        query = parse(args)
        if query is None or (query.name is not None and query.namespace is None):
            return None  # (kubectl refuses a name with -A)
        resources = [self._resource(name) for name in query.resource.split(",")]
        if None in resources:
            return None
        answers = [self._one(query, resource) for resource in resources if resource is not None]
        if query.name is not None:
            return answers[0]
        return {
            "apiVersion": "v1",
            "kind": "List",
            "metadata": {"resourceVersion": ""},
            "items": [item for items in answers for item in items],
        }

    def _one(self, query: Query, resource: Resource) -> Any:
        """The object named, or the items of one resource (each with its kind)."""
        path = resource.prefix
        if resource.namespaced and query.namespace is not None:
            path += f"/namespaces/{urllib.parse.quote(query.namespace, safe='')}"
        path += f"/{resource.plural}"
        if query.name is not None:
            path += f"/{urllib.parse.quote(query.name, safe='')}"
        parameters = {
            key: value
            for key, value in (("labelSelector", query.labels), ("fieldSelector", query.fields))
            if value is not None
        }
        if parameters and query.name is None:
            path += "?" + urllib.parse.urlencode(parameters)
        status, body = self._request("GET", path)
        if status != 200:
            raise NotServed(f"GET {path}: {status} {_message(body)}")
        if query.name is not None:
            return _shown(body)
        return [
            _shown({"apiVersion": resource.api_version, "kind": resource.kind, **item})
            for item in body.get("items") or []
        ]

    def delete_all(
        self, names: str, namespace: str, orphan: bool = False, grace: int | None = None
    ) -> None:
        """`kubectl delete NAMES --all -n NAMESPACE [--cascade=orphan] [--grace-period=G]`:
        one DELETE of each collection (a kind the server does not serve is passed over, as
        kubectl fails on it only when none of the names is served)."""
        options = {"propagationPolicy": "Orphan"} if orphan else {}
        if grace is not None:
            options["gracePeriodSeconds"] = str(grace)
        query = "?" + urllib.parse.urlencode(options) if options else ""
        for name in names.split(","):
            resource = self._resource(name)
            if resource is None:
                raise NotServed(f"the server serves no resource {name!r}")
            quoted = urllib.parse.quote(namespace, safe="")
            path = f"{resource.prefix}/namespaces/{quoted}/{resource.plural}{query}"
            status, body = self._request("DELETE", path)
            if status != 200:
                raise NotServed(f"DELETE {path}: {status} {_message(body)}")

    def create(self, document: dict[str, Any], namespace: str) -> None:
        """`kubectl create -n NAMESPACE -f -` of one object (a cluster-scoped one where its
        kind is; one that exists already is an error, as there)."""
        resource = self._served(str(document.get("kind", "")).lower())
        path = self._collection(resource, namespace)
        status, answer = self._send("POST", path, document)
        if status != 201:
            raise NotServed(f"POST {path}: {status} {_message(answer)}")

    def apply(self, documents: list[Any], namespace: str) -> str | None:
        """`kubectl apply -n NAMESPACE -f -` of these objects (a List's items each), in order,
        the rest still applied after one is refused (as kubectl goes on); what kubectl prints
        (`pod/NAME created` or `configured`, a line each). None: a form not applied here (an
        object without a name or kind, of another namespace, of a kind the server does not
        serve), and the caller runs kubectl. NotServed: what the server refused, every one."""
        objects = [item for document in documents for item in _items(document)]
        targets = [self._apply_target(item, namespace) for item in objects]
        if not objects or any(target is None for target in targets):
            return None
        printed, refused = [], []
        for item, target in zip(objects, targets, strict=True):
            assert target is not None
            path, shown = target
            status, answer = self._send("PATCH", path, item, **APPLY)
            if status in (200, 201):
                printed.append(f"{shown} {'created' if status == 201 else 'configured'}\n")
            else:
                reason = answer.get("reason") if isinstance(answer, dict) else None
                refused.append(
                    f"Error from server ({reason or status}): error when applying {shown}:"
                    f" {_message(answer)}"
                )
        if refused:
            raise NotServed("\n".join(refused))
        return "".join(printed)

    def _apply_target(self, item: Any, namespace: str) -> tuple[str, str] | None:
        """The PATCH path that applies `item` and the name kubectl prints for it."""
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if not isinstance(metadata, dict):
            return None
        name, kind, version = metadata.get("name"), item.get("kind"), item.get("apiVersion")
        if not all(isinstance(value, str) and value for value in (name, kind, version)):
            return None
        group = str(version).rpartition("/")[0]
        resource = self._resource(f"{str(kind).lower()}.{group}" if group else str(kind).lower())
        if resource is None or resource.kind != kind:
            return None
        if resource.namespaced and metadata.get("namespace", namespace) != namespace:
            return None  # kubectl refuses it in its own words
        prefix = f"/apis/{version}" if group else f"/api/{version}"
        own = Resource(prefix, resource.plural, resource.namespaced, str(kind), str(version))
        path = f"{self._collection(own, namespace)}/{urllib.parse.quote(str(name), safe='')}"
        shown = f"{str(kind).lower()}{'.' + group if group else ''}/{name}"
        return f"{path}?{urllib.parse.urlencode(APPLY_QUERY)}", shown

    def delete(
        self, kind: str, name: str, namespace: str, grace: int | None = None, orphan: bool = False
    ) -> None:
        """`kubectl delete KIND NAME -n NAMESPACE --ignore-not-found --wait=false
        [--grace-period=G] [--cascade=orphan]`."""
        options = {"propagationPolicy": "Orphan"} if orphan else {}
        if grace is not None:
            options["gracePeriodSeconds"] = str(grace)
        resource = self._served(kind)
        path = f"{self._collection(resource, namespace)}/{urllib.parse.quote(name, safe='')}"
        path += "?" + urllib.parse.urlencode(options) if options else ""
        status, body = self._request("DELETE", path)
        if status not in (200, 202, 404):
            raise NotServed(f"DELETE {path}: {status} {_message(body)}")

    def patch_status(self, kind: str, name: str, namespace: str, patch: dict[str, Any]) -> None:
        """`kubectl patch KIND NAME -n NAMESPACE --subresource=status --type=merge -p PATCH`."""
        resource = self._served(kind)
        path = f"{self._collection(resource, namespace)}/{urllib.parse.quote(name, safe='')}/status"
        content = {"Content-Type": "application/merge-patch+json"}
        status, body = self._send("PATCH", path, patch, **content)
        if status != 200:
            raise NotServed(f"PATCH {path}: {status} {_message(body)}")

    def _served(self, name: str) -> Resource:
        resource = self._resource(name)
        if resource is None:
            raise NotServed(f"the server serves no resource {name!r}")
        return resource

    @staticmethod
    def _collection(resource: Resource, namespace: str) -> str:
        if not resource.namespaced:
            return f"{resource.prefix}/{resource.plural}"
        return f"{resource.prefix}/namespaces/{urllib.parse.quote(namespace, safe='')}/{resource.plural}"

    def create_namespace(self, name: str) -> None:
        """`kubectl create namespace NAME` (one that exists already is an error, as there)."""
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        status, answer = self._send("POST", "/api/v1/namespaces", body)
        if status != 201:
            raise NotServed(f"POST namespace {name}: {status} {_message(answer)}")

    def delete_namespace(self, name: str) -> None:
        """`kubectl delete namespace NAME --wait=false --ignore-not-found`."""
        path = f"/api/v1/namespaces/{urllib.parse.quote(name, safe='')}"
        status, body = self._request("DELETE", path)
        if status not in (200, 202, 404):
            raise NotServed(f"DELETE {path}: {status} {_message(body)}")

    def _resource(self, name: str) -> Resource | None:
        with self._lock:
            found = self._names.get(name.lower())
            if found is None and time.monotonic() - self._discovered_at > REDISCOVER_AFTER:
                self._names = self._discover()
                self._discovered_at = time.monotonic()
                found = self._names.get(name.lower())
            return found

    def _discover(self) -> dict[str, Resource]:
        """kubectl's names of every resource the server serves: the core group's first (kubectl
        prefers `events` of v1 over events.k8s.io's), then each group's preferred version in the
        server's order."""
        names: dict[str, Resource] = {}
        versions = [("", "v1", "/api/v1")]
        status, groups = self._request("GET", "/apis")
        for group in groups.get("groups", []) if status == 200 else []:
            preferred = group["preferredVersion"]["groupVersion"]
            versions.append((group["name"], preferred, f"/apis/{preferred}"))
        for group_name, group_version, prefix in versions:
            status, listed = self._request("GET", prefix)
            if status != 200:
                continue
            for entry in listed.get("resources", []):
                if "/" in entry["name"]:
                    continue  # a subresource
                resource = Resource(
                    prefix, entry["name"], entry["namespaced"], entry["kind"], group_version
                )
                singular = entry.get("singularName") or entry["kind"].lower()
                for alias in (entry["name"], singular, *entry.get("shortNames", [])):
                    names.setdefault(alias, resource)
                    if group_name:
                        names.setdefault(f"{alias}.{group_name}", resource)
        return names
