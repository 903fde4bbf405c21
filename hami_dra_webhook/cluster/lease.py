"""One holder at a time among the webhook's replicas, through a coordination.k8s.io Lease
written with optimistic concurrency (as client-go's leader election does): the holder renews
it; another takes it only once it has not been renewed for its duration."""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass

from hami_dra_webhook.core.model.types import JsonObject
from hami_dra_webhook.kube.port import ApiError, KubeApi, paths


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _age(stamp: object) -> float:
    """Seconds since a MicroTime (an unreadable one: forever)."""
    try:
        when = datetime.datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return float("inf")
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    return (now - when).total_seconds()


@dataclass
class Lease:
    api: KubeApi
    namespace: str
    name: str
    identity: str
    duration: int = 15  # seconds
    timeout: float = 5.0
    _valid_until: float = 0.0  # monotonic: this process holds it until then

    @property
    def held(self) -> bool:
        """Held now, with a margin for the time a pass's calls take."""
        return time.monotonic() < self._valid_until - self.duration / 3

    async def hold(self) -> bool:
        """Take or renew the lease; False when another replica holds it (or a writer raced)."""
        started = time.monotonic()
        try:
            current = await self.api.get_path(
                paths.lease(self.namespace, self.name), timeout=self.timeout
            )
        except ApiError as error:
            if error.status != 404:
                raise
            return await self._write(None, started)
        spec = current.get("spec") or {}
        holder = spec.get("holderIdentity")
        expired = _age(spec.get("renewTime")) > int(spec.get("leaseDurationSeconds") or 0)
        if holder not in (self.identity, None, "") and not expired:
            self._valid_until = 0.0
            return False
        return await self._write(current, started)

    async def _write(self, current: JsonObject | None, started: float) -> bool:
        now = _now()
        spec: JsonObject = dict((current or {}).get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
                1 if current else 0
            )
        spec |= {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration}
        spec["renewTime"] = now
        body: JsonObject = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec,
        }
        collection = paths.leases(self.namespace)
        try:
            if current is None:
                await self.api.create_object(collection, body, timeout=self.timeout)
            else:
                version = (current.get("metadata") or {}).get("resourceVersion")
                body["metadata"]["resourceVersion"] = version
                await self.api.replace_object(collection, body, timeout=self.timeout)
        except ApiError as error:
            if error.status == 409:  # another replica wrote it first
                self._valid_until = 0.0
                return False
            raise
        self._valid_until = started + self.duration
        return True
