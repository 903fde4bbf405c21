"""The machine's share of the real nodes: one lease for every confined cluster on this machine,
whatever process runs it (the default run has two pytest runs of node tests at once).

What a confined cluster changes in the machine's own namespaces is of two kinds:
- Its own, named with its process id: the network namespace `hami-<node>-<pid>` and the cgroup
  roots `<node>-<pid>`. A cluster checks at its end that its own are gone, and ignores another
  process's (they come and go while it runs).
- Shared: the `/run/netns` folder and the bind mount that `ip netns add` makes, the mount-point
  folders of the node's bound paths, and the global sysctls the kubelet sets. The first holder
  in reads the machine (the baseline) and makes the folders; the last one out unmounts and
  removes what was not there, restores the sysctls, and compares the whole machine with the
  baseline. No cluster undoes what another still uses.

Holders are processes (pid and start time, so that a crashed run's entry is dropped) with a
count each (one process may nest clusters: tests/node/test_host_restored.py). The lease is a
JSON file beside a lock file (flock(2)) in the cache folder; it is removed with the last holder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.controlplane.build import cache_root
from tests.node.host import KUBELET_SYSCTLS, HostState

NETNS_DIR = Path("/run/netns")
# Facts that every holder shares: compared only when no other process holds the lease.
SHARED_FACTS = ("mount points", *(f"sysctl {name}" for name in KUBELET_SYSCTLS))
SHARED_MOUNT_LINE = re.compile(r"^/run/netns \S+$")


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def netns_mounted() -> bool:
    return any(
        line.split()[4] == str(NETNS_DIR)
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
    )


@dataclass(frozen=True)
class Snapshot:
    """The machine's facts, and the other processes that held the lease when they were read."""

    state: HostState
    others: frozenset[int]


def _marked(item: str, pids: frozenset[int]) -> bool:
    return any(re.search(rf"-{pid}(?![0-9])", item) for pid in pids)


def changes(before: Snapshot, after: Snapshot) -> dict[str, tuple[object, object]]:
    """What differs between two snapshots, leaving out what belongs to another process that
    held the lease at either time: its own namespaces and cgroups, and the shared facts (the
    last holder out checks those against the baseline)."""
    others = before.others | after.others
    if not others:
        return before.state.differences(after.state)

    def kept(key: str, value: object) -> object:
        if not isinstance(value, list):
            return value
        return [
            item
            for item in value
            if not _marked(item, others) and not (key == "mounts" and SHARED_MOUNT_LINE.match(item))
        ]

    found: dict[str, tuple[object, object]] = {}
    for key, value in before.state.facts.items():
        if key in SHARED_FACTS:
            continue
        old, new = kept(key, value), kept(key, after.state.facts.get(key))
        if old != new:
            found[key] = (old, new)
    return found


@dataclass
class HostLease:
    """`enter()` before a confined cluster makes anything, `leave()` after it removed its own."""

    mount_points: tuple[Path, ...]
    folder: Path = field(default_factory=lambda: cache_root() / "node-host")
    # False for a test of the lease's own bookkeeping (tests/test_host_lease.py): it reads and
    # undoes its mount-point folders only, never the machine's /run/netns or sysctls.
    machine: bool = True

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """The lease's record, read and written back under the lock; live holders only."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with (self.folder / "lease.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                record = self._read()
                yield record
                self._write(record)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @property
    def _record_path(self) -> Path:
        return self.folder / "lease.json"

    def _read(self) -> dict[str, Any]:
        try:
            record: dict[str, Any] = json.loads(self._record_path.read_text())
        except (OSError, ValueError):
            return {}
        if record.get("boot") != _boot_id():
            return {}  # a lease from before a reboot: /run and the cgroups are new
        record["holders"] = {
            pid: holder
            for pid, holder in record.get("holders", {}).items()
            if _process_start(int(pid)) == holder["started"]
        }
        return record

    def _write(self, record: dict[str, Any]) -> None:
        if not record.get("holders"):
            self._record_path.unlink(missing_ok=True)
            return
        scratch = self._record_path.with_suffix(".tmp")
        scratch.write_text(json.dumps(record))
        scratch.replace(self._record_path)

    def _snapshot(self, record: dict[str, Any]) -> Snapshot:
        others = frozenset(int(pid) for pid in record.get("holders", {})) - {os.getpid()}
        if self.machine:
            return Snapshot(HostState.read(self.mount_points), others)
        folders = [str(path) for path in self.mount_points if path.exists()]
        return Snapshot(HostState({"mount points": folders}), others)

    def look(self) -> Snapshot:
        """The machine now, and who else holds the lease, without holding it."""
        with self._locked() as record:
            return self._snapshot(record)

    def enter(self) -> Snapshot:
        """Hold the lease; the machine as it was (read before anything of this holder's)."""
        with self._locked() as record:
            before = self._snapshot(record)
            if not record.get("holders"):
                record.clear()
                record.update(
                    boot=_boot_id(),
                    baseline=before.state.facts,
                    netns_dir=NETNS_DIR.is_dir(),
                    netns_mount=netns_mounted(),
                    made=self._make_mount_points(),
                    holders={},
                )
            me = str(os.getpid())
            holder = record["holders"].setdefault(
                me, {"started": _process_start(os.getpid()), "count": 0}
            )
            holder["count"] += 1
            return before

    def leave(self, before: Snapshot) -> dict[str, tuple[object, object]]:
        """Give the lease back (the holder's own namespaces and cgroups already removed); what
        it left changed. The last holder out undoes the shared changes and compares the whole
        machine with the baseline too."""
        with self._locked() as record:
            me = str(os.getpid())
            holder = record.get("holders", {}).get(me)
            if holder is not None:
                holder["count"] -= 1
                if holder["count"] <= 0:
                    del record["holders"][me]
            if record.get("holders"):
                return changes(before, self._snapshot(record))
            self._undo_shared(record)
            after = self._snapshot(record)
            baseline = Snapshot(HostState(record.get("baseline", before.state.facts)), frozenset())
            return {**changes(baseline, after), **changes(before, after)}

    def _make_mount_points(self) -> list[str]:
        made = []
        for path in self.mount_points:
            real = path.resolve()
            if not real.exists():
                real.mkdir(parents=True)
                made.append(str(real))
        return made

    def _undo_shared(self, record: dict[str, Any]) -> None:
        for path in reversed(record.get("made", [])):
            with contextlib.suppress(OSError):
                Path(path).rmdir()
        if not self.machine:
            return
        if not record.get("netns_mount", True) and netns_mounted():
            subprocess.run(["umount", str(NETNS_DIR)], check=False, timeout=30)
        if not record.get("netns_dir", True):
            with contextlib.suppress(OSError):
                NETNS_DIR.rmdir()
        for name in KUBELET_SYSCTLS:
            value = record.get("baseline", {}).get(f"sysctl {name}", "-")
            path = Path("/proc/sys") / name
            with contextlib.suppress(OSError):
                if value != "-" and path.read_text().strip() != value:
                    path.write_text(value)
