"""`python -m tests.controlplane build VERSION...` builds (or reuses) the control-plane binaries;
`python -m tests.controlplane up VERSION [--gate-on|--gate-off]` starts one on 127.0.0.1 with a
GPU node, prints its admin kubeconfig and runs until interrupted (for poking at it by hand)."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

from tests.controlplane.build import GoMissing, build
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.gpu_node import GpuNode
from tests.controlplane.versions import RELEASES, release, selected_flavors


def _build(versions: list[str]) -> int:
    needed = versions or sorted({flavor.minor for flavor in selected_flavors()})
    for minor in needed:
        target = release(minor)
        started = time.monotonic()
        binaries = build(target)
        seconds = time.monotonic() - started
        state = f"built in {seconds:.0f} s" if binaries.built_seconds else "reused"
        print(f"v{target.version}: {binaries.folder} ({state}); etcd: {binaries.etcd}")
    return 0


def _up(minor: str, gate: bool | None) -> int:
    target = release(minor)
    binaries = build(target)
    folder = Path(tempfile.mkdtemp(prefix=f"hami-e2e-{target.version}-"))
    capacity = target.consumable_capacity_by_default if gate is None else gate
    started = time.monotonic()
    plane = ControlPlane(target, binaries, folder, consumable_capacity=capacity).start()
    GpuNode.default().register(plane)
    print(f"{plane.label} ready in {time.monotonic() - started:.1f} s")
    print(f"export KUBECONFIG={plane.admin_kubeconfig}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            time.sleep(3600)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        plane.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.controlplane")
    commands = parser.add_subparsers(dest="command", required=True)
    build_command = commands.add_parser("build", help="build or reuse the binaries")
    build_command.add_argument(
        "versions",
        nargs="*",
        help=f"of {', '.join(RELEASES)}; default: those the HAMI_E2E_FLAVORS flavors need (all)",
    )
    up_command = commands.add_parser("up", help="run a control plane until interrupted")
    up_command.add_argument("version")
    gate = up_command.add_mutually_exclusive_group()
    gate.add_argument("--gate-on", dest="gate", action="store_const", const=True)
    gate.add_argument("--gate-off", dest="gate", action="store_const", const=False)
    arguments = parser.parse_args(argv)
    try:
        if arguments.command == "build":
            return _build(arguments.versions)
        return _up(arguments.version, arguments.gate)
    except GoMissing as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
