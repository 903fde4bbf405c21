"""The monitor as a process (`python -m hami_dra_webhook monitor`), serving its metrics on
127.0.0.1, and a scrape of them parsed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.controlplane.cluster import free_port

Sample = tuple[str, dict[str, str], float]


class MonitorProcess:
    def __init__(self, folder: Path, root: Path, *arguments: str) -> None:
        """`root`: the claims folder it reads (--claims-root)."""
        self.root = root
        self.port = free_port()
        self.log_path = folder / "monitor.log"
        self._log = self.log_path.open("wb")
        environment = {**os.environ}
        environment.pop("KUBERNETES_SERVICE_HOST", None)
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "hami_dra_webhook", "monitor"),
                *("--host", "127.0.0.1", "--port", str(self.port)),
                *("--claims-root", str(root)),
                *arguments,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=environment,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                self.scrape_text()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError(f"the monitor did not serve: {self.log()}") from None
                time.sleep(0.1)

    def scrape_text(self) -> str:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            return str(answer.read().decode())

    def scrape(self) -> list[Sample]:
        return [
            (sample.name, dict(sample.labels), sample.value)
            for family in text_string_to_metric_families(self.scrape_text())
            for sample in family.samples
        ]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


def series(samples: list[Sample], name: str, **labels: str) -> list[Sample]:
    return [s for s in samples if s[0] == name and all(s[1].get(k) == v for k, v in labels.items())]
