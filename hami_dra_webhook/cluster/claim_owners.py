"""Whose each claim on one node is, as the cluster says it (the node monitor's only source: a
region file names no pod, and what it says is the tenant's): the pods of the node (one watch,
field selector `spec.nodeName`), the ResourceClaims they use (read once by name when a pod
names one, again only while it is unallocated or does not reserve the pod), and the node's
ResourceSlices (one watch: which device has which UUID). At idle nothing is read but the two
watches, however many claims the cluster holds.

A pod counts for a claim only when the claim's `status.reservedFor` names the pod's UID (a pod
can name any claim of its namespace; only the scheduler reserves one), and a container only
when its `resources.claims` names the pod's entry for that claim."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hami_dra_webhook.cluster.watched import Kept, Watched
from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths

log = logging.getLogger("hami_dra_webhook.monitor")
READ_AGAIN = 10.0  # seconds before a claim that does not yet hold up is read again
MAX_READS = 2  # claims read at once: each is a TLS connection kept open (16 held 4 MiB more)


@dataclass(frozen=True, slots=True)
class Device:
    driver: str
    pool: str
    name: str
    uuid: str | None  # the slice's `uuid` attribute; None while the slice is not seen


@dataclass(frozen=True, slots=True)
class ClaimOwner:
    namespace: str
    claim: str
    uid: str
    containers: tuple[tuple[str, str], ...]  # (pod, container), sorted
    devices: tuple[Device, ...]  # allocated by this monitor's driver

    @property
    def pods(self) -> tuple[str, ...]:
        return tuple(sorted({pod for pod, _ in self.containers}))

    @property
    def uuids(self) -> frozenset[str]:
        return frozenset(d.uuid for d in self.devices if d.uuid)


@dataclass
class _Claim:
    uid: str = ""
    reserved: frozenset[str] = frozenset()  # pod UIDs
    results: tuple[tuple[str, str, str], ...] = ()  # (driver, pool, device)
    read_at: float = 0.0
    missing: bool = False


@dataclass
class ClaimOwners:
    api: KubeApi
    node: str
    driver: str
    timeout: float = 10.0
    pods: Kept = field(default_factory=Kept)
    slices: Kept = field(default_factory=Kept)
    owners: Mapping[str, ClaimOwner] = field(default_factory=dict)  # by claim UID
    reads: int = 0  # claims read by name (the monitor's metric)
    _claims: dict[tuple[str, str], _Claim] = field(default_factory=dict)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        on_node = [("fieldSelector", f"spec.nodeName={self.node}")]
        self.pod_watch = Watched(
            self.api, paths.ALL_PODS, on_node, f"pods on {self.node}",
            on_list=self._pods_listed, on_event=self._pod_seen,
        )  # fmt: skip
        self.slice_watch = Watched(
            self.api, paths.RESOURCE_SLICES, on_node, f"ResourceSlices of {self.node}",
            on_list=self._slices_listed, on_event=self._slice_seen,
        )  # fmt: skip

    @property
    def synced(self) -> bool:
        return self.pod_watch.synced and self.slice_watch.synced

    async def run(self, settle: float = 0.2) -> None:
        """Forever: the two watches, and the owners made again after each change (and every
        READ_AGAIN seconds while a claim does not hold up yet)."""
        await asyncio.gather(self.pod_watch.run(), self.slice_watch.run(), self._resolve(settle))

    async def _resolve(self, settle: float) -> None:
        while True:
            with contextlib.suppress(TimeoutError):  # (not wait_for: it can lose a cancel)
                async with asyncio.timeout(READ_AGAIN):
                    await self._changed.wait()
            self._changed.clear()
            await asyncio.sleep(settle)  # a burst of events, one pass
            try:
                await self.refresh()
            except Exception:  # never a dead loop: the next change or READ_AGAIN tries again
                log.exception("naming the claims' owners failed")

    async def refresh(self) -> None:
        used = _claims_used(self.pods.items.values())
        for key in [k for k in self._claims if k not in used]:
            del self._claims[key]
        now = time.monotonic()
        due = []
        for key, pod_uids in used.items():
            kept = self._claims.get(key)
            if kept is None or (
                now - kept.read_at >= READ_AGAIN
                and (kept.missing or not kept.results or not pod_uids <= kept.reserved)
            ):
                due.append(key)
        for start in range(0, len(due), MAX_READS):
            batch = due[start : start + MAX_READS]
            for key, claim in zip(
                batch, await asyncio.gather(*map(self._read, batch)), strict=True
            ):
                self._claims[key] = claim
        self.owners = self._owners(used)

    async def _read(self, key: tuple[str, str]) -> _Claim:
        self.reads += 1
        now = time.monotonic()
        try:
            claim = await self.api.get_path(paths.claim(*key), timeout=self.timeout)
        except ApiError as error:
            if error.status != 404:
                log.warning("reading ResourceClaim %s/%s failed: %s", *key, error)
            return _Claim(read_at=now, missing=True)
        return _parse_claim(claim, now)

    def _owners(self, used: Mapping[tuple[str, str], frozenset[str]]) -> dict[str, ClaimOwner]:
        uuids = _slice_uuids(self.slices.items.values())
        containers = _containers_by_claim(self.pods.items.values())
        owners: dict[str, ClaimOwner] = {}
        for key, claim in self._claims.items():
            if claim.missing or not claim.uid or key not in used:
                continue
            named = tuple(
                sorted(
                    (pod, container)
                    for pod_uid, pod, container in containers.get(key, ())
                    if pod_uid in claim.reserved
                )
            )
            devices = tuple(
                Device(driver, pool, name, uuids.get((driver, pool, name)))
                for driver, pool, name in claim.results
                if driver == self.driver
            )
            if named and devices:
                owners[claim.uid] = ClaimOwner(key[0], key[1], claim.uid, named, devices)
        return owners

    # Only what naming owners reads is kept of each object: a node's pods and slices in full
    # (managed fields, env, volumes, every attribute) would hold ten times the memory.
    def _pods_listed(self, items: list[JsonObject] | None) -> None:
        self.pods.listed(None if items is None else [_trim_pod(item) for item in items])
        self._changed.set()

    def _pod_seen(self, kind: str, item: JsonObject) -> None:
        self.pods.seen(kind, _trim_pod(item))
        self._changed.set()

    def _slices_listed(self, items: list[JsonObject] | None) -> None:
        self.slices.listed(None if items is None else [_trim_slice(item) for item in items])
        self._changed.set()

    def _slice_seen(self, kind: str, item: JsonObject) -> None:
        self.slices.seen(kind, _trim_slice(item))
        self._changed.set()


def _object(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _objects(value: object) -> list[JsonObject]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _trim_pod(pod: JsonObject) -> JsonObject:
    metadata, spec = _object(pod.get("metadata")), _object(pod.get("spec"))
    status = _object(pod.get("status"))

    def uses(containers: object) -> list[JsonObject]:
        return [
            {
                "name": c.get("name"),
                "resources": {"claims": _object(c.get("resources")).get("claims")},
            }
            for c in _objects(containers)
        ]

    return {
        "metadata": {k: metadata.get(k) for k in ("name", "namespace", "uid")},
        "spec": {
            "resourceClaims": spec.get("resourceClaims"),
            "containers": uses(spec.get("containers")),
            "initContainers": uses(spec.get("initContainers")),
        },
        "status": {"resourceClaimStatuses": status.get("resourceClaimStatuses")},
    }


def _trim_slice(item: JsonObject) -> JsonObject:
    metadata, spec = _object(item.get("metadata")), _object(item.get("spec"))
    devices = [
        {"name": d.get("name"), "attributes": {"uuid": _object(d.get("attributes")).get("uuid")}}
        for d in _objects(spec.get("devices"))
    ]
    return {
        "metadata": {"name": metadata.get("name"), "namespace": ""},
        "spec": {"driver": spec.get("driver"), "pool": spec.get("pool"), "devices": devices},
    }


def _pod_claims(pod: JsonObject) -> dict[str, str]:
    """The pod's claim entries: entry name -> ResourceClaim name (a template's once made)."""
    spec, status = _object(pod.get("spec")), _object(pod.get("status"))
    made = {
        str(s.get("name")): str(s.get("resourceClaimName"))
        for s in _objects(status.get("resourceClaimStatuses"))
        if s.get("resourceClaimName")
    }
    names: dict[str, str] = {}
    for entry in _objects(spec.get("resourceClaims")):
        entry_name = str(entry.get("name", ""))
        claim = entry.get("resourceClaimName") or made.get(entry_name)
        if entry_name and isinstance(claim, str) and claim:
            names[entry_name] = claim
    return names


def _claims_used(pods: Iterable[JsonObject]) -> dict[tuple[str, str], frozenset[str]]:
    """Claim (namespace, name) -> the UIDs of the node's pods that name it."""
    used: dict[tuple[str, str], set[str]] = {}
    for pod in pods:
        metadata = _object(pod.get("metadata"))
        namespace, uid = str(metadata.get("namespace", "")), str(metadata.get("uid", ""))
        for claim in _pod_claims(pod).values():
            used.setdefault((namespace, claim), set()).add(uid)
    return {key: frozenset(uids) for key, uids in used.items()}


def _containers_by_claim(
    pods: Iterable[JsonObject],
) -> dict[tuple[str, str], list[tuple[str, str, str]]]:
    """Claim (namespace, name) -> (pod UID, pod name, container) of each container using it."""
    found: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for pod in pods:
        metadata, spec = _object(pod.get("metadata")), _object(pod.get("spec"))
        namespace = str(metadata.get("namespace", ""))
        entries = _pod_claims(pod)
        containers = _objects(spec.get("initContainers")) + _objects(spec.get("containers"))
        for container in containers:
            for use in _objects(_object(container.get("resources")).get("claims")):
                claim = entries.get(str(use.get("name", "")))
                if claim:
                    place = (str(metadata.get("uid", "")), str(metadata.get("name", "")))
                    found.setdefault((namespace, claim), []).append(
                        (*place, str(container.get("name", "")))
                    )
    return {key: sorted(set(value)) for key, value in found.items()}


def _parse_claim(claim: JsonObject, now: float) -> _Claim:
    metadata, status = _object(claim.get("metadata")), _object(claim.get("status"))
    reserved = frozenset(
        str(r.get("uid")) for r in _objects(status.get("reservedFor")) if r.get("uid")
    )
    devices = _object(_object(status.get("allocation")).get("devices"))
    results = tuple(
        (str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
        for r in _objects(devices.get("results"))
    )
    return _Claim(str(metadata.get("uid", "")), reserved, results, now)


def _slice_uuids(slices: Iterable[JsonObject]) -> dict[tuple[str, str, str], str]:
    found: dict[tuple[str, str, str], str] = {}
    for item in slices:
        spec = _object(item.get("spec"))
        driver, pool = str(spec.get("driver", "")), str(_object(spec.get("pool")).get("name", ""))
        for device in _objects(spec.get("devices")):
            uuid = _object(_object(device.get("attributes")).get("uuid")).get("string")
            if isinstance(uuid, str):
                found[(driver, pool, str(device.get("name", "")))] = uuid
    return found
