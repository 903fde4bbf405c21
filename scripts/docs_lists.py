"""Fails on a list that the docs site renders as a paragraph (or as an indented code block).

Python-Markdown (what MkDocs uses) needs four spaces to nest a list or continue a list item;
with two, `- a\n  - b` becomes one run-on paragraph, and `mkdocs build --strict` says nothing.
This renders every page of docs/ (and the READMEs) with the site's own extensions and reports
each paragraph or list item whose text still holds a line that starts a list.

    python scripts/docs_lists.py            # exit 1 with each place, 0 when none
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import markdown
import yaml

ROOT = Path(__file__).resolve().parents[1]
# A line that starts a list item: "- x", "* x", "+ x", "1. x".
LIST_START = re.compile(r"\n\s*(?:[-*+]|\d+\.)\s+\S")


class _Blocks(HTMLParser):
    """The text of each <p> and <li>, without the text of lists nested in it."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.code_lists: list[str] = []  # indented code blocks that read as lists
        self._highlight = 0  # inside a fenced block's <div class="highlight">
        self._pre: list[str] | None = None
        self._open: list[list[str]] = []
        self._skip = 0  # inside <pre>/<code>: code may hold anything

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "div" and ("class", "highlight") in attrs:
            self._highlight += 1
        if tag == "pre" and not self._highlight:
            self._pre = []
        if tag in ("pre", "code"):
            self._skip += 1
        elif tag in ("p", "li"):
            self._open.append([])
        elif tag in ("ul", "ol") and self._open:
            self._open.append([])  # a nested list's text is its own

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._highlight:
            self._highlight -= 1
        if tag == "pre" and self._pre is not None:
            text = "".join(self._pre)
            if LIST_START.search("\n" + text):
                self.code_lists.append(text)
            self._pre = None
        if tag in ("pre", "code"):
            self._skip -= 1
        elif tag in ("p", "li", "ul", "ol") and self._open:
            text = "".join(self._open.pop())
            if tag in ("p", "li"):
                self.found.append(text)

    def handle_data(self, data: str) -> None:
        if self._pre is not None:
            self._pre.append(data)
        if self._open:
            self._open[-1].append("`" if self._skip else data)


def run_on_lists(text: str, extensions: list[str]) -> list[str]:
    """The paragraphs and items of `text` (Markdown) that hold a line starting a list."""
    html = markdown.markdown(text, extensions=extensions)
    blocks = _Blocks()
    blocks.feed(html)
    return [block for block in blocks.found if LIST_START.search(block)] + blocks.code_lists


def site_extensions() -> list[str]:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    found = []
    for item in config.get("markdown_extensions", []):
        found.append(next(iter(item)) if isinstance(item, dict) else item)
    return found


def pages() -> list[Path]:
    """The site's pages (the READMEs are rendered by GitHub's CommonMark, where two spaces
    nest a list)."""
    return sorted((ROOT / "docs").rglob("*.md"))


def main() -> int:
    extensions = site_extensions()
    bad = 0
    for page in pages():
        for block in run_on_lists(page.read_text(), extensions):
            bad += 1
            first = block.strip().splitlines()[0][:80]
            print(f"{page.relative_to(ROOT)}: a list rendered as a paragraph: {first!r}...")
    if bad:
        print(
            f"{bad} list(s) rendered as paragraphs: indent nested lists and continuation"
            " lines by four spaces (Python-Markdown), not two"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
