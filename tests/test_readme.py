"""The README keeps its promises: at most 12 KB, the two set-up commands first, every link to a
file of the repository resolves (the docs site's own links are checked by `mkdocs build
--strict` in scripts/checks), and the licence it names is there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
MAX_BYTES = 12 * 1024


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.encode()) <= MAX_BYTES, f"README.md is {len(text.encode())} bytes"
    first = text.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split()[0] for line in first] == ["./scripts/run", "./scripts/test"]
    assert text.index("```sh") < text.index("\n## ")  # before any section


def test_readme_links_resolve() -> None:
    text = README.read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


def test_the_licence_is_apache_2() -> None:
    licence = (ROOT / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'license = "Apache-2.0"' in pyproject


def test_what_users_read_cites_only_what_they_have() -> None:
    """REFERENCE.md, VENDORS.md and NODE.md are this project's notes beside the repository, not
    in it: the package, the docs, the chart and the examples cite the docs instead."""
    cited = []
    for folder in ("hami_dra_webhook", "docs", "charts", "examples"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".md", ".yaml", ".tpl", ".txt", ".json"):
                text = path.read_text(errors="replace")
                cited += [f"{path.relative_to(ROOT)}: {name}" for name in
                          ("REFERENCE.md", "VENDORS.md", "NODE.md") if name in text]  # fmt: skip
    assert cited == []
