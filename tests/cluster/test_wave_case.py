"""The `migrate wave` use case's decisions (cluster/moves/wave_case.py), in process: when a
fleet ends before it moves (a selection that cannot be planned, a dry run, a first wave with
blockers) and how a move that ran ended. The command maps each ending to its exit code
(tests/migrate/test_migrate_cmd.py runs the command on a real cluster)."""

from __future__ import annotations

import pytest

from hami_dra_webhook.cli.migrate_wave import _endings
from hami_dra_webhook.cluster.moves.fleet import WaveOutcome
from hami_dra_webhook.cluster.moves.wave_case import Ending, FleetRead, WaveRequest, ending_of
from hami_dra_webhook.core.migration.pool_plan import Inventory, Step
from hami_dra_webhook.core.migration.pools import Scope
from hami_dra_webhook.core.migration.wave_plan import FleetPlan
from hami_dra_webhook.core.settings.policy import Policy


def _step(fits: bool) -> Step:
    return Step("n1", "team", "p", "legacy", "ReplicaSet/r", "legacy node n2", fits)


def _read(errors: list[str], first_wave_fits: bool) -> FleetRead:
    inventory = Inventory({}, {}, [], {}, [], Scope())
    fleet = FleetPlan("dra", [["n1"], ["n2"]], gpus={"n1": 1, "n2": 1}, errors=errors)
    plans = [] if errors else [[_step(first_wave_fits)], [_step(False)]]
    return FleetRead(Policy(), inventory, fleet, plans)


@pytest.mark.parametrize(
    ("errors", "fits", "dry_run", "force", "ending"),
    [
        (["no node n9"], True, False, False, Ending.BAD_SELECTION),
        (["no node n9"], True, True, True, Ending.BAD_SELECTION),
        ([], True, False, False, None),  # it moves
        ([], True, True, False, Ending.PLANNED),
        ([], False, False, False, Ending.REFUSED),
        ([], False, False, True, None),  # --force moves anyway
        ([], False, True, True, Ending.REFUSED),  # a dry run says it would refuse
    ],
)
def test_when_a_fleet_ends_before_it_moves(
    errors: list[str], fits: bool, dry_run: bool, force: bool, ending: Ending | None
) -> None:
    request = WaveRequest(to="dra", nodes=("n1", "n2"), dry_run=dry_run, force=force)
    read = _read(errors, fits)
    assert read.ending_before_move(request) is ending
    # only the first wave's plan decides: a later wave is planned again before it starts
    assert read.first_blocked is (not errors and not fits)
    assert ("pacing" in read.as_json()) is (not errors)


def test_how_a_move_that_ran_ended() -> None:
    moved = WaveOutcome(["n1"], moved=["n1"])
    assert ending_of([]) is Ending.MOVED
    assert ending_of([moved, WaveOutcome(["n2"], moved=["n2"])]) is Ending.MOVED
    assert ending_of([moved, WaveOutcome(["n2"], refused=True)]) is Ending.REFUSED
    assert ending_of([moved, WaveOutcome(["n2"], failed={"n2": "timed out"})]) is Ending.STOPPED


def test_every_ending_has_its_exit_code() -> None:
    """docs/cli.md's table: 0 moved or planned, 2 refused, 3 stopped, 64 a bad selection."""
    assert {e.value: code for e, code in _endings().items()} == {
        "bad-selection": 64,
        "planned": 0,
        "refused": 2,
        "moved": 0,
        "stopped": 3,
    }
