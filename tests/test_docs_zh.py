"""The Chinese README and pages (README.zh.md, docs/zh/) are kept in step with the code and the
English ones: every hami-dra-webhook command they show parses with the real parser, every
chart value they set exists in the chart's values, every label, annotation and reason tag they
name is one the code uses, and the README's commands are the English README's."""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import pytest
import yaml

from hami_dra_webhook.cli.main import build_parser

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.zh.md", *sorted((ROOT / "docs" / "zh").glob("*.md"))]
FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL)
INLINE = re.compile(r"`([^`\n]+)`")


def command_lines(text: str) -> list[str]:
    """Shell lines of the code blocks (continuations joined) and inline code spans."""
    lines = []
    for block in FENCE.findall(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        lines += [line.strip() for line in joined.splitlines() if line.strip()]
    prose = FENCE.sub("", text)
    return lines + [span.strip() for span in INLINE.findall(prose)]


def ours(line: str) -> list[list[str]]:
    """The hami-dra-webhook invocations of a line, as words (comments, pipes, redirections
    and `source <(...)` taken off)."""
    found = []
    for piece in re.split(r"\||&&", line.replace("source <(", "").replace(")", " ")):
        try:
            words = shlex.split(piece.split(">")[0], comments=True)
        except ValueError:
            continue
        if words[:1] == ["hami-dra-webhook"] and len(words) > 1:
            found.append(words[1:])
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_shown_parses(page: Path) -> None:
    invocations = [w for line in command_lines(page.read_text()) for w in ours(line)]
    assert len(invocations) >= 4, page
    for words in invocations:
        args, unknown = build_parser().parse_known_args(words)
        assert unknown == [], (page.name, words)
        assert callable(args.run), (page.name, words)


def _keys(values: object, prefix: str = "") -> set[str]:
    if not isinstance(values, dict):
        return {prefix}
    found = {prefix} if prefix else set()
    for key, value in values.items():
        found |= _keys(value, f"{prefix}.{key}" if prefix else str(key))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_chart_value_set_exists(page: Path) -> None:
    values = _keys(
        yaml.safe_load((ROOT / "charts" / "hami-dra-webhook" / "values.yaml").read_text())
    )
    for line in command_lines(page.read_text()):
        if "charts/hami-dra-webhook" not in line:
            continue  # HAMi's own chart (hami-charts/hami) has values of its own
        for key in re.findall(r"--set(?:-string)? ([\w.]+)=", line):
            assert key in values, (page.name, key)


def test_labels_annotations_and_reasons_are_the_codes() -> None:
    code = "\n".join(p.read_text() for p in (ROOT / "hami_dra_webhook").rglob("*.py"))
    table = (ROOT / "docs" / "translation.md").read_text().split("## Refusal reasons", 1)[1]
    tags = set(re.findall(r"^\| `([a-z0-9-]+)` \|", table, re.MULTILINE))
    for page in PAGES:
        text = page.read_text()
        for name in set(re.findall(r"hami\.io/[a-z]+(?:-[a-z]+)*", text)):
            assert name in code, (page.name, name)
        # the paragraphs about reason tags: each tag they show is one of the table's
        for paragraph in text.split("\n\n"):
            if "`reason`" in paragraph:
                shown = re.findall(r"`([a-z]+(?:-[a-z]+)+)`", paragraph)
                assert set(shown) <= tags, (page.name, set(shown) - tags)


def test_the_chinese_readme_shows_the_english_readmes_commands() -> None:
    def commands(path: Path) -> set[str]:
        return {
            re.sub(r"\s+#.*$", "", line).strip()
            for line in command_lines(path.read_text())
            if re.match(r"^(\./scripts|hami-dra-webhook|helm|kubectl|docker|skopeo|pipx) ", line)
        }

    english, chinese = commands(ROOT / "README.md"), commands(ROOT / "README.zh.md")
    assert english and english <= chinese, sorted(english - chinese)


# Issue 65: the known issues and the compatibility table, in the English README, on the site's
# home, in the Chinese README and on the Chinese home, say the same: the same number of known
# issues with the same facts (their issue numbers, versions, names), and the same Kubernetes
# versions with the same consumable-capacity state.
HOMES = [ROOT / "README.md", ROOT / "docs" / "index.md", ROOT / "README.zh.md",
         ROOT / "docs" / "zh" / "index.md"]  # fmt: skip
KNOWN = re.compile(r"^## (?:Known issues|已知问题)\n(.*?)(?=^## )", re.DOTALL | re.MULTILINE)
# What each known issue must name wherever it is told (facts carry over, words do not).
FACTS = ("#45", "1.34", "30", "wholeGpusByExtendedResource")


def _known(page: Path) -> list[str]:
    found = KNOWN.search(page.read_text())
    assert found, f"{page.relative_to(ROOT)} has no known issues section"
    return [item for item in re.split(r"^- ", found.group(1), flags=re.MULTILINE)[1:]]


def _table_rows(page: Path) -> list[tuple[str, ...]]:
    rows = [line for line in page.read_text().splitlines() if re.match(r"^\| 1\.3\d", line)]
    return [tuple(re.findall(r"1\.3\d", row.split("|")[1])) for row in rows]


@pytest.mark.parametrize("page", HOMES[1:], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_known_issues_and_compatibility_are_the_english_readmes(page: Path) -> None:
    english = _known(HOMES[0])
    told = _known(page)
    assert len(told) == len(english), page
    for fact, item in zip(FACTS, told, strict=True):
        assert fact in item, (page.name, fact, item)
    assert all(fact in item for fact, item in zip(FACTS, english, strict=True))
    assert _table_rows(page) == _table_rows(HOMES[0]), page
    shared = next(line for line in page.read_text().splitlines() if line.startswith("| 1.36"))
    assert "1.38" in shared and "GA" in shared, (page.name, shared)


CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
NEW_BLOCK = re.compile(r"^\s*(?:[-*+]\s|\d+\.\s|#|\||```|$)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_chinese_line_break_renders_as_a_space(page: Path) -> None:
    """A line break inside a paragraph renders as a space; between two Chinese characters that
    is a stray space, so a Chinese sentence is not broken between lines."""
    lines = FENCE.sub("", page.read_text()).splitlines()
    broken = [
        f"{number}: {line[-12:]}|{following.strip()[:12]}"
        for number, (line, following) in enumerate(itertools.pairwise(lines), 1)
        if line.strip()
        and not line.lstrip().startswith(("|", "#"))
        and CJK.match(line[-1])
        and not NEW_BLOCK.match(following)
        and CJK.match(following.strip()[:1] or " ")
    ]
    assert broken == [], (page.name, broken[:5])


def test_chinese_headings_get_anchors_of_their_own() -> None:
    """The site's anchors keep a heading's letters (#已知问题), not `#_2`."""
    config = (ROOT / "mkdocs.yml").read_text()
    assert "slugify: !!python/name:markdown.extensions.toc.slugify_unicode" in config
