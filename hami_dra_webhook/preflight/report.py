"""What `check` says: lines of PASS, WARN or FAIL with a fix, and the GPU nodes it saw."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from hami_dra_webhook.core.model.types import JsonObject

Level = Literal["PASS", "WARN", "FAIL"]
LEVELS: dict[Level, int] = {"PASS": 0, "WARN": 1, "FAIL": 2}


@dataclass
class Line:
    level: Level
    check: str
    detail: str
    fix: str = ""


@dataclass
class NodeGpus:
    node: str
    gpus: int
    memory: list[str]
    shareable: bool


@dataclass
class PoolRow:
    """One GPU pool of a cluster in migration (preflight/pools.py)."""

    pool: str
    nodes: int
    gpus: str
    used: str
    free: str
    pods: int


@dataclass
class Installation:
    namespace: str = "hami-system"
    webhook_configuration: str = "hami-dra-webhook"
    service: str = "hami-dra-webhook"
    tls_secret: str = "hami-dra-webhook-tls"


@dataclass
class Report:
    lines: list[Line] = field(default_factory=list)
    nodes: list[NodeGpus] = field(default_factory=list)
    pools: list[PoolRow] = field(default_factory=list)

    def add(self, level: Level, check: str, detail: str, fix: str = "") -> None:
        self.lines.append(Line(level, check, detail, fix))

    @property
    def worst(self) -> Level:
        return max((line.level for line in self.lines), key=LEVELS.__getitem__, default="PASS")

    def as_json(self) -> JsonObject:
        return {
            "worst": self.worst,
            "checks": [asdict(x) for x in self.lines],
            "nodes": [asdict(n) for n in self.nodes],
            "pools": [asdict(p) for p in self.pools],
        }


def counted(number: int, word: str) -> str:
    """`1 node`, `3 nodes`: a count in words, as a person writes it."""
    return f"{number} {word}" if number == 1 else f"{number} {word}s"
