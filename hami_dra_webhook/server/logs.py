"""Logging: one JSON object per line (or text: `time LEVEL message key=value ...`), fields from
`extra=` included. Nothing a caller sends can start a line of its own: JSON escapes it, and the
text format quotes any value with a space, a quote, `=` or a control character in it."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

import orjson

# uvicorn adds `color_message` (the message with ANSI colours) to its records: never printed.
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}
_PLAIN = re.compile(r"[^\s\x00-\x1f\x7f\"'=\\]*")


def text_value(value: Any) -> str:
    """A value as the text format prints it: bare when plain, else a JSON string (escaped)."""
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    if isinstance(value, str) and (not text or not _PLAIN.fullmatch(text)):
        return orjson.dumps(text).decode()
    return text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry |= {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        extra = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        text = super().format(record)
        # A message with a line break (a traceback, a forged name) stays one visible record:
        # continuation lines are indented, so no line of it starts like a log line.
        text = text.replace("\n", "\n    ")
        return text + "".join(f" {k}={text_value(v)}" for k, v in extra.items())


class UvicornStartLines(logging.Filter):
    """uvicorn's own start-up lines are dropped: each of its two servers logs "Started server
    process", and "Uvicorn running on http://..." names the HTTPS port as http (TLS is started
    by the protocol, so uvicorn does not know). The servers log what is true once they listen
    (server/listening.py)."""

    DROPPED = frozenset(
        {
            "Started server process [%d]",
            "Waiting for application startup.",
            "Application startup complete.",
        }
    )

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        return message not in self.DROPPED and not message.startswith("Uvicorn running on")


def configure(level: str = "info", json_format: bool = True) -> None:
    # One line per admission is on the hot path: skip the caller lookup (a stack walk per record)
    # and the thread and process fields, which these lines do not print.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_format else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.filters[:] = [
        f for f in uvicorn_log.filters if not isinstance(f, UvicornStartLines)
    ]
    uvicorn_log.addFilter(UvicornStartLines())


class AdmissionLog:
    """One line per admission, written in batches every `interval` seconds.

    Through the logging module each line costs a lock, a LogRecord, a formatter and a write
    system call: a fifth of an admission's time. Lines are formatted like the log's other lines
    and written to the same stream; `flush()` runs at shutdown too.
    """

    def __init__(self, json_format: bool, interval: float = 0.2) -> None:
        self.logger = logging.getLogger("hami_dra_webhook.server")
        self.json_format = json_format
        self.interval = interval
        self._lines: list[str] = []
        self._timer: asyncio.TimerHandle | None = None

    def write(self, fields: dict[str, Any]) -> None:
        if not self.logger.isEnabledFor(logging.INFO):
            return
        now = time.time()
        if self.json_format:
            stamp = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
            entry = {
                "time": stamp,
                "level": "info",
                "logger": self.logger.name,
                "message": "admission",
            }
            self._lines.append(orjson.dumps(entry | fields).decode())
        else:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
            pairs = "".join(f" {k}={text_value(v)}" for k, v in fields.items())
            self._lines.append(f"{stamp},{int(now % 1 * 1000):03d} INFO admission{pairs}")
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.interval, self.flush)

    def flush(self) -> None:
        self._timer = None
        if self._lines:
            lines, self._lines = self._lines, []
            sys.stderr.write("\n".join(lines) + "\n")
            sys.stderr.flush()
