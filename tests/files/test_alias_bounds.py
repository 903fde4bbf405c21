"""YAML aliases as hostile input (issue 66's review; the stall was noted at issue 64's close):
a few lines whose aliases write out to 10^8 values, or an alias inside itself, made
`dry-run` print for minutes and `scan --embedded`-style walks stall, and a self-holding alias
raised RecursionError (a traceback) in `dry-run`, `scan` and `convert`. Each such document is
now unreadable with words that say why (exit 3), and a template reached twice through an
alias is one template."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from hami_dra_webhook.cli.main import main
from hami_dra_webhook.files.embedded import embedded_pods
from hami_dra_webhook.files.fast_yaml import FastSafeLoader
from hami_dra_webhook.files.manifests import MAX_VALUES, expanded_size, read_manifests


def _bomb(levels: int = 8) -> str:
    lines = ["apiVersion: example.com/v1", "kind: Bomb", "metadata: {name: b}", "spec:"]
    lines.append("  l0: &l0 [{a: 1}]")
    for level in range(1, levels + 1):
        lines.append(f"  l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


SELF_HOLDING_POD = (
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: &s\n"
    "  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]\n"
    "  x: *s\n"
)
SELF_HOLDING_LIST = "&r [1, *r]\n"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdin=io.StringIO(""), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("text", [_bomb(), SELF_HOLDING_POD, SELF_HOLDING_LIST])
@pytest.mark.parametrize("command", [["dry-run"], ["scan"], ["convert", "--diff"]])
def test_an_alias_bomb_or_an_alias_inside_itself_is_unreadable(
    tmp_path: Path, text: str, command: list[str]
) -> None:
    manifest = tmp_path / "hostile.yaml"
    manifest.write_text(text)
    code, out, err = _run(*command, str(manifest))
    assert code == 3, (out, err)
    assert "its YAML aliases write out to more than 1,000,000 values, or one holds itself" in err
    assert "Traceback" not in err and len(out) < 10_000


def test_the_count_is_of_the_written_out_values_computed_once_per_alias() -> None:
    shared = [{"a": 1}]
    assert expanded_size({"x": shared, "y": shared}, 100) == 1 + 2 * (1 + 2)
    assert expanded_size(_loaded(_bomb(5)), MAX_VALUES) is not None  # 10^5 leaves: within
    assert expanded_size(_loaded(_bomb(8)), MAX_VALUES) is None


def _loaded(text: str) -> object:
    """The document as the YAML loader gives it, before any bound."""
    return yaml.load(text, Loader=FastSafeLoader)


def test_a_large_list_is_judged_object_by_object() -> None:
    """A `kubectl get -o json` of a big cluster holds millions of values: each object of it is
    within bounds, so it is read."""
    container = {"name": "c", "image": "x", "args": list("abcdefgh")}
    items = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
         "spec": {"containers": [container] * 40}}
        for i in range(2_500)
    ]  # fmt: skip
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    assert expanded_size(json.loads(text), MAX_VALUES) is None  # 1.25 million values in all
    result = read_manifests(["-"], io.StringIO(text))
    assert not result.unreadable and len(result.manifests) == 2_500


def test_a_template_named_twice_through_an_alias_is_one_template() -> None:
    text = (
        "apiVersion: example.com/v1\nkind: Runner\nmetadata: {name: r}\nspec:\n"
        "  main: &t {spec: {containers: [{name: c, image: x}]}}\n  spare: *t\n"
    )
    (manifest,) = read_manifests(["-"], io.StringIO(text)).manifests
    assert [e.path for e in embedded_pods(manifest.document)] == [("spec", "main")]
