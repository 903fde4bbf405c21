"""A real interactive shell on a pseudo-terminal, typed into as a user types: what completion
does at a <TAB> is what the terminal shows. Every wait is bounded."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|\x1b\][^\x07]*\x07")


class Shell:
    def __init__(self, argv: list[str], env: Mapping[str, str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        # util-linux's setsid --ctty: a session of its own whose controlling terminal is the pty
        # (fish refuses to run interactively without one).
        self.process = subprocess.Popen(
            ["setsid", "--ctty", *argv],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=dict(env),
            cwd=cwd,
            close_fds=True,
        )
        os.close(slave)
        self.seen = ""

    def read_until(self, pattern: str, timeout: float = 15.0) -> str:
        """Everything the terminal showed (escapes removed) once `pattern` (a regex) is in it."""
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.screen):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{pattern!r} not shown in {timeout} s; shown: {self.screen!r}")
            ready, _, _ = select.select([self.master], [], [], min(left, 0.5))
            if ready:
                try:
                    self.seen += os.read(self.master, 65536).decode(errors="replace")
                except OSError:  # the shell ended
                    break
        return self.screen

    @property
    def screen(self) -> str:
        return _ESCAPES.sub("", self.seen).replace("\r", "")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def mark(self, name: str) -> None:
        """Prints a marker and waits for it: what was shown before it is settled."""
        self.seen = ""
        # Any shell's words (fish has no $((...))); what the shell prints is not what was typed.
        self.type(f"\x15echo {name}-Q | tr Q R\r")
        self.read_until(f"{name}-R")
        self.seen = ""

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        os.close(self.master)
