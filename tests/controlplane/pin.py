"""Write the go.mod of one pinned Kubernetes version (a maintainer's tool, run when a pin moves).

    python tests/controlplane/pin.py 1.36.3      # then: cd tests/controlplane/v1.36 && go mod tidy

k8s.io/kubernetes points its k8s.io/* staging modules at v0.0.0 with replace directives that only
apply inside its own repository; a module that depends on it must replace each of them with the
matching v0.X.Y release itself. The list is read from k8s.io/kubernetes's own go.mod.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGING = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", re.MULTILINE)


def staging_modules(version: str) -> list[str]:
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@v{version}"],
        check=True,
        capture_output=True,
        text=True,
        cwd=HERE,
    ).stdout
    gomod = Path(json.loads(out)["GoMod"]).read_text()
    return sorted(set(STAGING.findall(gomod)))


def write_gomod(version: str) -> Path:
    """`version` is a release ("1.37.2") or a pre-release ("1.38.0-beta.0", "1.38.0-rc.1")."""
    major, minor, patch = version.split(".", 2)
    staging = staging_modules(version)
    folder = HERE / f"v{major}.{minor}"
    folder.mkdir(exist_ok=True)
    lines = [
        f"// Kubernetes v{version}: kube-apiserver, kube-controller-manager and kube-scheduler.",
        "// Written by ../pin.py; go.sum by `go mod tidy`.",
        f"module hami-dra-webhook/tests/controlplane/v{major}.{minor}",
        "",
        "go 1.26",
        "",
        f"require k8s.io/kubernetes v{version}",
        "",
        "replace (",
        *(f"\t{module} => {module} v0.{minor}.{patch}" for module in staging),
        ")",
        "",
    ]
    (folder / "go.mod").write_text("\n".join(lines))
    (folder / "tools.go").write_text(
        "//go:build tools\n\n"
        "// Package tools pins the commands that build.py compiles, so that `go mod tidy` keeps\n"
        "// everything they need in go.sum.\n"
        "package tools\n\n"
        "import (\n"
        '\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n'
        '\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"\n'
        '\t_ "k8s.io/kubernetes/cmd/kube-scheduler"\n'
        ")\n"
    )
    return folder


if __name__ == "__main__":
    print(write_gomod(sys.argv[1]))
