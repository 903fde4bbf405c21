"""What long commands show while they work, in one place: a line that `scan --cluster` rewrites
on a terminal (`ListingLine`), and the timeline of a node move and of a fleet's waves (`Steps`,
`WaveSteps`): a `[   12.3s] where: step: detail` line each, and the same steps kept for `-o json`.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from hami_dra_webhook.cli.terminal import printable, raw


class ListingLine:
    """One line on a terminal, rewritten as a listing goes on and erased at the end; nothing
    when the stream is not a terminal (a pipe or a CI log gets the report only)."""

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream, self.total, self.done = stream, total, 0
        self.shown = stream.isatty()

    def __enter__(self) -> ListingLine:
        return self

    def advance(self, what: str) -> None:
        self.done += 1
        if self.shown:
            raw(self.stream).write(f"\r\x1b[K{printable(what)} ({self.done}/{self.total})")
            self.stream.flush()

    def __exit__(self, *_: object) -> None:
        if self.shown:
            raw(self.stream).write("\r\x1b[K")
            self.stream.flush()


class Steps:
    """A command's steps as they happen: a line each on `stdout` (unless `quiet`: `-o json`),
    and the timeline the JSON result holds."""

    def __init__(self, stdout: TextIO, quiet: bool) -> None:
        self.started = time.monotonic()
        self.stdout, self.quiet = stdout, quiet
        self.timeline: list[dict[str, Any]] = []

    def step(self, name: str, detail: str) -> None:
        self.record(name, detail)

    def record(self, name: str, detail: str, where: str = "", **fields: str) -> None:
        seconds = round(time.monotonic() - self.started, 1)
        self.timeline.append({"seconds": seconds, **fields, "step": name, "detail": detail})
        if not self.quiet:
            place = f"{where}: " if where else ""
            self.stdout.write(f"[{seconds:7.1f}s] {place}{name}: {detail}\n")
            self.stdout.flush()


class WaveSteps(Steps):
    """A fleet's steps: a line per wave and per step of each node, and after each wave what it
    did and how far the fleet is."""

    def __init__(self, stdout: TextIO, quiet: bool, nodes: int = 0) -> None:
        super().__init__(stdout, quiet)
        self.current = ""
        self.nodes, self.moved = nodes, 0
        self._wave_started, self._wave_moved, self._wave_evicted = self.started, 0, 0

    def finish(self) -> None:
        """The last wave's summary line (each earlier one is written as the next starts)."""
        if not self.current:
            return
        seconds = time.monotonic() - self._wave_started
        self._line(
            "",
            "finished",
            f"{self._wave_moved} node(s) moved in {seconds:.1f} s, {self._wave_evicted} GPU"
            f" pod(s) evicted; {self.moved} of {self.nodes} node(s) moved so far",
        )

    def _line(self, node: str, name: str, detail: str) -> None:
        if name == "done" and node:
            self.moved += 1
            self._wave_moved += 1
        elif name == "evicted" and node:
            self._wave_evicted += 1
        where = f"{self.current} {node}".strip()
        self.record(name, detail, where, wave=self.current, node=node)

    def step(self, name: str, detail: str) -> None:
        self._line("", name, detail)

    def wave(self, index: int, total: int, nodes: list[str]) -> None:
        self.finish()
        self._wave_started, self._wave_moved, self._wave_evicted = time.monotonic(), 0, 0
        self.current = f"wave {index}/{total}"
        self._line("", "wave", ", ".join(nodes))

    def node(self, name: str) -> Any:
        progress = self

        class _Node:
            def step(self, step: str, detail: str) -> None:
                progress._line(name, step, detail)

        return _Node()
