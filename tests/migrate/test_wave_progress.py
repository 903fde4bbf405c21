"""`migrate wave`'s terminal progress: a line per wave and per node step, and after each wave
what it did and how far the fleet is (the moves themselves: tests/node)."""

from __future__ import annotations

import io
import re

from hami_dra_webhook.cli.progress import WaveSteps as _Progress


def test_each_wave_ends_with_what_it_did_and_how_far_the_fleet_is() -> None:
    out = io.StringIO()
    progress = _Progress(out, quiet=False, nodes=3)
    progress.wave(1, 2, ["gpu-1"])
    gpu_1 = progress.node("gpu-1")
    gpu_1.step("evicted", "team/a")
    gpu_1.step("evicted", "team/b")
    gpu_1.step("done", "gpu-1 is in the dra pool, uncordoned")
    progress.wave(2, 2, ["gpu-2", "gpu-3"])
    progress.node("gpu-2").step("done", "gpu-2 is in the dra pool")
    progress.node("gpu-3").step("done", "gpu-3 is in the dra pool")
    progress.finish()
    lines = [re.sub(r"^\[ *[\d.]+s\] ", "", line) for line in out.getvalue().splitlines()]
    assert lines[0] == "wave 1/2: wave: gpu-1"
    assert re.fullmatch(
        r"wave 1/2: finished: 1 node\(s\) moved in [\d.]+ s, 2 GPU pod\(s\) evicted;"
        r" 1 of 3 node\(s\) moved so far",
        lines[4],
    ), lines
    assert lines[5] == "wave 2/2: wave: gpu-2, gpu-3"
    assert re.fullmatch(
        r"wave 2/2: finished: 2 node\(s\) moved in [\d.]+ s, 0 GPU pod\(s\) evicted;"
        r" 3 of 3 node\(s\) moved so far",
        lines[-1],
    ), lines
    assert [e["step"] for e in progress.timeline].count("finished") == 2


def test_quiet_progress_keeps_the_timeline_only() -> None:
    out = io.StringIO()
    progress = _Progress(out, quiet=True, nodes=1)
    progress.wave(1, 1, ["gpu-1"])
    progress.finish()
    assert out.getvalue() == "" and [e["step"] for e in progress.timeline] == ["wave", "finished"]
