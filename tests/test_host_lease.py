"""The host lease (tests/node/host_lease.py) shared by node runs in several processes: the shared
changes are made by the first holder in and undone by the last one out, and a holder's check
leaves out what another process holds. These run without a node and beside the node's runs:
the mount points are folders of the test's own, the lease reads only them (`machine=False`),
and the other holder is a child process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.node.host import HostState
from tests.node.host_lease import HostLease, Snapshot, changes

ROOT = Path(__file__).resolve().parents[1]


def _lease(tmp_path: Path) -> HostLease:
    return HostLease(
        (tmp_path / "mounts" / "kubelet", tmp_path / "mounts" / "cdi"), tmp_path / "lease"
    )


def _child(tmp_path: Path, body: str) -> subprocess.Popen[str]:
    """A second process that holds the same lease; it prints `held`, waits for a line on its
    standard input, then runs `body` (with `lease` and `before` bound) and exits."""
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from tests.node.host_lease import HostLease
        lease = HostLease(
            (Path({str(tmp_path)!r}) / "mounts" / "kubelet", Path({str(tmp_path)!r}) / "mounts" / "cdi"),
            Path({str(tmp_path)!r}) / "lease",
            machine=False,
        )
        before = lease.enter()
        print("held", flush=True)
        sys.stdin.readline()
        {body}
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def _finish(child: subprocess.Popen[str]) -> str:
    out, _ = child.communicate("go\n", timeout=60)
    assert child.returncode == 0, out
    return out


def test_the_first_in_makes_and_the_last_out_removes_the_mount_points(tmp_path: Path) -> None:
    lease = _lease(tmp_path)
    before = lease.enter()
    assert (tmp_path / "mounts" / "kubelet").is_dir()
    child = _child(tmp_path, "print(lease.leave(before))")
    assert lease.look().others == frozenset({child.pid})
    assert _finish(child).strip() == "{}"  # not the last: nothing of its own is left
    assert (tmp_path / "mounts" / "kubelet").is_dir(), "the child removed a folder still in use"
    assert lease.leave(before) == {}
    assert not (tmp_path / "mounts" / "kubelet").exists()
    assert not (tmp_path / "lease" / "lease.json").exists()


def test_a_holder_that_is_not_last_keeps_the_shared_changes(tmp_path: Path) -> None:
    lease = _lease(tmp_path)
    child = _child(tmp_path, "")  # first in: it made the folders
    before = lease.enter()
    assert before.others == frozenset({child.pid})
    assert lease.leave(before) == {}
    assert (tmp_path / "mounts" / "kubelet").is_dir()
    _finish(child)  # it exits holding the lease: a dead holder's entry is dropped
    assert lease.look().others == frozenset()


def test_nested_holders_in_one_process_count(tmp_path: Path) -> None:
    lease = _lease(tmp_path)
    outer = lease.enter()
    inner = lease.enter()
    assert lease.leave(inner) == {}
    assert (tmp_path / "mounts" / "kubelet").is_dir(), "the inner holder was taken for the last"
    assert lease.leave(outer) == {}
    assert not (tmp_path / "mounts" / "kubelet").exists()


def _state(**facts: str | list[str]) -> HostState:
    return HostState(facts)


def test_changes_leave_out_another_holders_marks_and_the_shared_facts() -> None:
    before = _state(
        netns=["hami-node-1-4242", "hami-node-1-7"],
        cgroups=["cpu/node-1-4242"],
        mounts=["/ ext4", "/run/netns tmpfs"],
        **{"mount points": ["/var/lib/kubelet"], "sysctl vm/panic_on_oom": "0"},
    )
    after = _state(
        netns=["hami-node-1-7"],
        cgroups=["cpu/node-legacy-42424"],  # not 4242's: 42424 is another number
        mounts=["/ ext4"],
        **{"mount points": [], "sysctl vm/panic_on_oom": "1"},
    )
    found = changes(Snapshot(before, frozenset({4242})), Snapshot(after, frozenset()))
    assert found == {"cgroups": ([], ["cpu/node-legacy-42424"])}
    # alone, everything counts, the process's own marks included
    alone = changes(Snapshot(before, frozenset()), Snapshot(after, frozenset()))
    assert set(alone) == {"netns", "cgroups", "mounts", "mount points", "sysctl vm/panic_on_oom"}
