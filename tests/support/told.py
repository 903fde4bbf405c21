"""What a node move, a fleet or a `migrate wave` run tells its screen, kept for a test's
assertions: one recorder for MoveEvents, FleetEvents and the wave use case's WaveScreen."""

from __future__ import annotations

from typing import Any


class Told:
    def __init__(self) -> None:
        self.steps: list[tuple[str, str]] = []  # (step, detail), every node's and the fleet's
        self.waves: list[tuple[int, int, list[str]]] = []  # (index, total, nodes) as each starts
        self.plans: list[tuple[Any, Any]] = []  # (FleetRead, Ending or None) of each run

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.steps]

    def step(self, name: str, detail: str) -> None:
        self.steps.append((name, detail))

    def wave(self, index: int, total: int, nodes: list[str]) -> None:
        self.waves.append((index, total, nodes))

    def node(self, name: str) -> Told:
        return self

    def planned(self, read: Any, ending: Any) -> None:
        self.plans.append((read, ending))
