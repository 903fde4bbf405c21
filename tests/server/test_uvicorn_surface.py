"""What the server uses of uvicorn (and asyncio) beyond their public API, checked by name on
the versions installed, so that an upgrade that removes one fails here, with the names, and
not in production. pyproject.toml pins uvicorn below its next minor version for the same
reason; when this test fails after raising that pin, adapt `server/protocol.py` and
`server/listening.py` before anything else.

Where each name is used:
- `server/protocol.py` subclasses `HttpToolsProtocol`: its request pipeline, current cycle,
  flow control, parser, URL, headers, tasks and keep-alive timer, and the module's
  `STATUS_LINE`; `flow_control.service_unavailable`.
- `server/protocol.py` `_step_now` drives a coroutine as asyncio's Task does, which sets a
  future's `_asyncio_future_blocking`.
- `server/listening.py` appends to `uvicorn.Server._captured_signals` to delay a signal's
  effect while draining, and overrides `capture_signals`, `handle_exit` and `on_tick`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.protocols.http import flow_control, httptools_impl
from uvicorn.server import ServerState

PROTOCOL_METHODS = (
    "connection_made",
    "connection_lost",
    "data_received",
    "on_headers_complete",
    "on_response_complete",
    "pause_writing",
    "resume_writing",
    "_unset_keepalive_if_required",
)
PROTOCOL_STATE = (
    "pipeline",
    "cycle",
    "flow",
    "transport",
    "parser",
    "url",
    "headers",
    "tasks",
    "loop",
)
CYCLE_STATE = ("more_body", "response_complete", "keep_alive")
FLOW_STATE = ("write_paused",)
SERVER_SURFACE = (
    "_captured_signals",
    "capture_signals",
    "handle_exit",
    "on_tick",
    "should_exit",
    "startup",
    "started",
)


async def _app(scope: Any, receive: Any, send: Any) -> None:  # never called: no task runs
    raise AssertionError("not reached")


class _Transport(asyncio.Transport):
    """Just enough of a transport for uvicorn's connection_made (no socket is needed to see
    which attributes a connection has)."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _missing(owner: Any, names: tuple[str, ...], where: str) -> list[str]:
    return [f"{where}.{name}" for name in names if not hasattr(owner, name)]


def _fail(missing: list[str]) -> None:
    assert missing == [], (
        f"uvicorn {uvicorn.__version__} lacks what server/protocol.py and server/listening.py"
        f" use: {', '.join(missing)}"
    )


def test_the_uvicorn_internals_the_server_relies_on_are_there() -> None:
    missing = _missing(httptools_impl, ("HttpToolsProtocol", "STATUS_LINE"), "httptools_impl")
    missing += _missing(flow_control, ("service_unavailable",), "flow_control")
    _fail(missing)
    missing += _missing(httptools_impl.HttpToolsProtocol, PROTOCOL_METHODS, "HttpToolsProtocol")
    _fail(missing)  # the connection below calls them
    loop = asyncio.new_event_loop()
    try:
        config = uvicorn.Config(_app, loop="none", http="httptools", lifespan="off")
        config.load()
        missing += _missing(uvicorn.Server(config), SERVER_SURFACE, "uvicorn.Server()")
        missing += _missing(loop.create_future(), ("_asyncio_future_blocking",), "asyncio.Future()")
        protocol = httptools_impl.HttpToolsProtocol(
            config=config, server_state=ServerState(), app_state={}, _loop=loop
        )
        protocol.connection_made(_Transport())
        protocol.data_received(b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n")
        missing += _missing(protocol, PROTOCOL_STATE, "HttpToolsProtocol()")
        missing += _missing(getattr(protocol, "cycle", None), CYCLE_STATE, "RequestResponseCycle()")
        missing += _missing(getattr(protocol, "flow", None), FLOW_STATE, "FlowControl()")
        for task in list(getattr(protocol, "tasks", ())):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    _fail(missing)
    assert protocol.cycle.more_body is True  # inside the request's body, as the protocol reads it
