"""`python -m tests.node build [VERSION...]` builds (or reuses) everything the real node of
tests/node runs (default: the versions of HAMI_NODE_VERSIONS, else 1.36 and 1.37) and makes the
Python base image (debootstrap, cached)."""

from __future__ import annotations

import argparse
import sys
import time

from tests.controlplane.build import GoMissing
from tests.controlplane.versions import release
from tests.node.build import DebianMissing, build_all, debian_missing
from tests.node.conftest import node_versions
from tests.node.images import python_base


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.node")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build or reuse the node's binaries and base image")
    build.add_argument("versions", nargs="*")
    commands.add_parser("debian", help="print the Debian packages the node needs that are missing")
    arguments = parser.parse_args(argv)
    if arguments.command == "debian":
        print(" ".join(debian_missing()))
        return 0
    try:
        for minor in arguments.versions or node_versions():
            started = time.monotonic()
            binaries = build_all(release(minor))
            state = (
                f"built in {binaries.built_seconds:.0f} s" if binaries.built_seconds else "reused"
            )
            print(f"node v{minor}: {state} ({time.monotonic() - started:.0f} s)")
        started = time.monotonic()
        print(f"python base: {python_base()} ({time.monotonic() - started:.0f} s)")
    except (GoMissing, DebianMissing) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
