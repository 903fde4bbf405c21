"""`convert` against `dry-run` over one file of N GPU pods (20,000 by default), as new processes.

Run: .venv/bin/python -m benchmarks.migrate [N]   (prints numbers; asserts nothing)

`convert` reads every document with libyaml, as `dry-run` does, and edits the text of those
that change in place; only documents it cannot edit that way (flow style on the path, anchors)
go through ruamel.yaml's pure-Python round trip, about ten times slower.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml


def pods(count: int) -> str:
    documents = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "ml", "labels": {"app": "train"}},
            "spec": {
                "containers": [
                    {
                        "name": "cuda",
                        "image": "nvidia/cuda:12.4.0-base-ubuntu22.04",
                        "resources": {
                            "limits": {
                                "cpu": "2",
                                "nvidia.com/gpu": 1,
                                "nvidia.com/gpumem": 1000 + i % 50,
                            }
                        },
                    }
                ]
            },
        }
        for i in range(count)
    ]
    return "# generated: one GPU pod per document\n" + yaml.safe_dump_all(documents)


def timed(*args: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "hami_dra_webhook", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - started


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "pods.yaml"
        source.write_text(pods(count))
        dry_run = timed("dry-run", str(source))
        convert = timed("convert", str(source), "--out", str(Path(folder) / "out"))
    print(f"{count} GPU pods in one file ({source.name}):")
    print(f"  dry-run  {dry_run:6.1f} s")
    print(f"  convert  {convert:6.1f} s  ({convert / dry_run:.1f}x dry-run)")


if __name__ == "__main__":
    main()
