"""`hami-dra-webhook serve`: the HTTPS admission webhook."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import shutil
import signal
import typing
from pathlib import Path
from typing import Any, TextIO

from hami_dra_webhook.cli import exit_codes
from hami_dra_webhook.core.settings.policy import PolicyError
from hami_dra_webhook.files.policy_file import read_policy

log = logging.getLogger("hami_dra_webhook.serve")


def add_parser(commands: Any) -> None:
    """Every setting of `Settings` is a flag; its help, choices and default come from there."""
    from hami_dra_webhook.server.settings import Settings, env_name, flag

    parser = commands.add_parser(
        "serve",
        help="run the HTTPS admission webhook",
        description="Run the mutating admission webhook over HTTPS. Every flag also reads from"
        " an environment variable HAMI_DRA_<FLAG> (e.g. HAMI_DRA_PORT); flags win.",
    )
    for name, field in Settings.model_fields.items():
        unset = field.default_factory is not None or field.default is None
        default = "" if unset else f"; default {field.default}"
        text = f"{field.description} ({env_name(name)}{default})"
        if field.annotation is bool:
            parser.add_argument(
                flag(name), dest=name, action=argparse.BooleanOptionalAction, help=text
            )
            continue
        choices = typing.get_args(field.annotation)
        literal = typing.get_origin(field.annotation) is typing.Literal
        parser.add_argument(
            flag(name), dest=name, metavar=None if literal else name.upper(),
            choices=choices if literal else None, help=text,
        )  # fmt: skip
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from pydantic import ValidationError

    from hami_dra_webhook.server.logs import configure
    from hami_dra_webhook.server.settings import Settings, env_name, flag

    given = {
        name: value
        for name in Settings.model_fields
        if (value := getattr(args, name, None)) is not None
    }
    try:
        settings = Settings(**given)
    except ValidationError as error:
        fields = set()
        for problem in error.errors():
            field = str(problem["loc"][0]) if problem["loc"] else ""
            fields.add(field)
            where = f"{flag(field)} ({env_name(field)})" if field else "settings"
            message = problem["msg"].removeprefix("Value error, ")
            stderr.write(f"error: {where}: {message}\n")
        # a wrong flag is a usage error; a wrong environment variable, configuration
        return exit_codes.USAGE if fields <= set(given) else exit_codes.UNREADABLE
    configure(settings.log_level, settings.log_format == "json")
    try:
        loaded = read_policy(str(settings.config) if settings.config else None)
    except PolicyError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE
    if loaded.warning:
        log.warning("%s: %s", settings.config, loaded.warning)
    policy = loaded.policy
    if settings.config:  # what the legacy settings keep or lose under DRA, once
        from hami_dra_webhook.core.vendors.nvidia_notes import policy_notes

        for note in policy_notes(policy):
            log.info("%s: %s", settings.config, note)
    from hami_dra_webhook.server.builder import StartupError

    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            return runner.run(_serve(settings, policy))
    except StartupError as error:
        stderr.write(f"error: {error}\n")
        return exit_codes.UNREADABLE


def _loop_factory() -> Any:
    if importlib.util.find_spec("uvloop") is not None:
        import uvloop

        return uvloop.new_event_loop
    return None


async def _serve(settings: Any, policy: Any) -> int:
    from hami_dra_webhook.server.builder import build_server

    cleanup: list[Path] = []

    def remove_then_die(signum: int, _frame: Any) -> None:
        # uvicorn re-raises SIGTERM/SIGINT once it has shut down gracefully, after it has put
        # back the handler it found: this one, so that the temporary key goes first.
        for folder in cleanup:
            shutil.rmtree(folder, ignore_errors=True)
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, remove_then_die)
    try:
        server = await build_server(settings, policy, cleanup)
        return exit_codes.OK if await server.run() else exit_codes.UNREADABLE
    finally:
        for folder in cleanup:
            shutil.rmtree(folder, ignore_errors=True)
