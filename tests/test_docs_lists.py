"""scripts/docs_lists.py: the site's Markdown (Python-Markdown) needs four spaces and a blank
line where GitHub's needs two and none; a list written for GitHub renders as a run-on
paragraph, and `mkdocs build --strict` says nothing. The check finds each such list, and the
docs have none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import docs_lists  # noqa: E402

EXTENSIONS = docs_lists.site_extensions()


@pytest.mark.parametrize(
    "text",
    [
        "Some words:\n- one\n- two\n",  # no blank line before the list
        "- item\n\n  second paragraph\n- next\n",  # two-space continuation
        "- item\n\n    words:\n\n        - nested\n",  # eight spaces after a blank: code
        "Steps:\n1. a\n2. b\n",
    ],
)
def test_a_list_rendered_as_a_paragraph_or_code_is_found(text: str) -> None:
    assert docs_lists.run_on_lists(text, EXTENSIONS)


@pytest.mark.parametrize(
    "text",
    [
        "Some words:\n\n- one\n- two\n",
        "- item\n\n    second paragraph\n\n- next\n",
        "- item\n    - nested\n",
        "```\n- a list in a fence is code, as written\n```\n",
        "A line with - a dash inside, and 1. a number.\n",
    ],
)
def test_lists_the_site_renders_as_lists_pass(text: str) -> None:
    assert docs_lists.run_on_lists(text, EXTENSIONS) == []


def test_the_docs_have_no_list_rendered_as_a_paragraph(capsys: pytest.CaptureFixture[str]) -> None:
    assert docs_lists.main() == 0, capsys.readouterr().out
