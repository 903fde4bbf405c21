"""HAMi's feedback loop (core.region.feedback), checked against what HAMi v2.10's real
`Observe` did to the same regions (../shared/NODE-MONITOR.md section 6, and the fixtures'
README): written into copies of the fixtures through the monitor's writer and read back."""

from __future__ import annotations

from pathlib import Path

from hami_dra_webhook.core.region.feedback import Observed, Writes, observe
from hami_dra_webhook.monitor.region_files import Read, read_claim, write_fields
from tests.monitor.conftest import place

GPU = "GPU-00000000-0000-4000-8000-000000000000"


def _tick(root: Path, claims: list[str], gpus: dict[str, frozenset[str]] | None = None) -> None:
    reads = {}
    for claim in claims:
        read = read_claim(root, claim)
        assert isinstance(read, Read)
        reads[claim] = read
    observed = [
        Observed(
            claim,
            read.region.header.priority,
            read.region.header.recent_kernel,
            read.region.header.utilization_switch,
            (gpus or {}).get(claim, frozenset(u for u in read.region.header.uuids if u)),
        )
        for claim, read in reads.items()
    ]
    for write in observe(observed):
        assert isinstance(write.key, str)
        assert write_fields(
            root, reads[write.key].identity, write.recent_kernel, write.utilization_switch
        )


def _fields(root: Path, claim: str) -> tuple[int, int]:
    read = read_claim(root, claim)
    assert isinstance(read, Read)
    return read.region.header.recent_kernel, read.region.header.utilization_switch


def test_priority_zero_blocks_priority_one_as_hami_did(tmp_path: Path) -> None:
    high, _ = place(tmp_path, "e-priority-0")
    low, _ = place(tmp_path, "e-priority-1")
    _tick(tmp_path, [high, low])
    assert _fields(tmp_path, high) == (1, 0)  # alone at its priority: SM limit off
    assert _fields(tmp_path, low) == (-1, 1)  # blocked under an active priority 0
    _tick(tmp_path, [high, low])  # no new kernels
    assert _fields(tmp_path, high) == (0, 0)
    assert _fields(tmp_path, low) == (0, 0)


def test_a_region_alone_gets_its_sm_limit_switched_off(tmp_path: Path) -> None:
    alone, _ = place(tmp_path, "a-one-process-running")
    _tick(tmp_path, [alone])
    assert _fields(tmp_path, alone) == (1, 0)
    _tick(tmp_path, [alone])
    assert _fields(tmp_path, alone) == (0, 0)


def test_two_active_peers_keep_their_limits_and_one_alone_loses_it() -> None:
    peers = [Observed(n, 1, 2, 0, frozenset({GPU})) for n in ("a", "b")]
    assert observe(peers) == [Writes("a", 1, 1), Writes("b", 1, 1)]
    # a peer on another GPU is no peer
    apart = [Observed("a", 1, 2, 1, frozenset({GPU})), Observed("b", 1, 2, 1, frozenset({"x"}))]
    assert observe(apart) == [Writes("a", 1, 0), Writes("b", 1, 0)]


def test_the_gpus_are_the_callers_not_the_files(tmp_path: Path) -> None:
    """A region that names another card in its file blocks no one there: the caller gives the
    cards the cluster allocated."""
    high, _ = place(tmp_path, "e-priority-0")
    low, _ = place(tmp_path, "e-priority-1")
    _tick(tmp_path, [high, low], {high: frozenset({"GPU-elsewhere"}), low: frozenset({GPU})})
    assert _fields(tmp_path, low) == (1, 0)  # not blocked, and alone on its card


def test_negative_and_huge_priorities() -> None:
    regions = [
        Observed("negative", -1, 2, 1, frozenset({GPU})),
        Observed("huge", 2**31 - 1, 2, 1, frozenset({GPU})),
        Observed("normal", 1, 2, 1, frozenset({GPU})),
    ]
    writes = {w.key: w for w in observe(regions)}
    assert writes["negative"] == Writes("negative", 1, 0)  # never counted, never blocked
    assert writes["huge"] == Writes("huge", -1, None)  # blocked under priority 1, in no time
    assert writes["normal"] == Writes("normal", 1, 0)


def test_nothing_is_written_that_is_already_there() -> None:
    assert observe([Observed("idle", 1, 0, 0, frozenset({GPU}))]) == [Writes("idle", None, None)]
