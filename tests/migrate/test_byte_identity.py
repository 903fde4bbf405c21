"""`convert` touches only what it converts (issue 64): outside the lines it must change, a file
comes out byte for byte as it went in (comments, quoting, line breaks, indentation, flow maps,
trailing spaces, document markers, line endings), and what it adds follows the file's own
indentation. A property test over generated formatting styles, and every real-world document in
`../shared`."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from hami_dra_webhook.admission.admitted import AdmissionRules
from hami_dra_webhook.cli.inputs import DEFAULT_EXCLUDED
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY, policy_from_yaml
from hami_dra_webhook.migrate.convert import convert_text
from hami_dra_webhook.migrate.yaml_write import segments_of
from tests.support.shared import shared_path
from tests.support.text_changes import unexpected_changes

RULES = AdmissionRules(DEFAULT_POLICY, frozenset(DEFAULT_EXCLUDED.split(",")))
STYLES = 400  # generated files; each converts in about a millisecond


class _Writer:
    """One YAML file in a style drawn from `rng`: indentation, dash offsets, flow or block maps,
    quoting, comments, trailing spaces, line endings."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.unit = rng.choice((2, 2, 3, 4))
        self.lines: list[str] = []

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def put(self, depth: int, text: str) -> None:
        line = " " * depth + text
        if self.chance(0.08):
            line += " " * self.rng.randint(1, 3)  # trailing spaces
        elif self.chance(0.08) and not text.endswith((":", "|", ">-")):
            line += "  # " + self.rng.choice(("why", "keep this", "TODO: tune"))
        self.lines.append(line)
        if self.chance(0.05):
            self.lines.append(" " * depth + "# a comment between lines")
        if self.chance(0.03):
            self.lines.append("")

    def scalar(self, value: str) -> str:
        return self.rng.choice((value, f"'{value}'", f'"{value}"'))

    def dash(self, depth: int) -> int:
        """Where a list's dashes go under a key at `depth`: at its column or indented."""
        return depth + self.rng.choice((0, self.unit))

    def labels(self, depth: int, key: str, entries: dict[str, str]) -> None:
        form = self.rng.choice(("block", "flow", "spaced", "json", "empty", "absent"))
        if form == "absent":
            return
        if form == "empty":
            self.put(depth, f"{key}: {{}}")
        elif form == "block":
            self.put(depth, f"{key}:")
            for k, v in entries.items():
                self.put(depth + self.unit, f"{k}: {self.scalar(v)}")
        elif form == "json":
            inner = ", ".join(f'"{k}": "{v}"' for k, v in entries.items())
            self.put(depth, f"{key}: {{{inner}}}")
        else:
            gap = "  " if form == "spaced" else " "
            inner = ("," + gap).join(f"{k}: {v}" for k, v in entries.items())
            pad = " " if form == "spaced" else ""
            self.put(depth, f"{key}: {{{pad}{inner}{pad}}}")

    def container(self, item: int, name: str, gpu: bool) -> None:
        inner = item + 2
        first_resources = gpu and self.chance(0.15)
        if first_resources:
            self.lines.append(" " * item + "- resources:")
            self.resources(inner + self.unit)
            self.put(inner, f"name: {name}")
        else:
            self.lines.append(" " * item + f"- name: {name}")
        self.put(inner, f"image: {self.scalar('pytorch/pytorch:2.1')}")
        form = self.rng.choice(("flow", "flow2", "block", "none"))
        if form == "flow":
            self.put(inner, 'command: ["python", "-c", "print(1)"]')
        elif form == "flow2":
            self.put(inner, 'command: ["python", "-c",')
            self.lines.append(" " * (inner + 10) + '"print(1)"]')
        elif form == "block":
            self.put(inner, "command:")
            at = self.dash(inner)
            self.lines.append(" " * at + "- python")
            self.lines.append(" " * at + "- train.py")
        args = self.rng.choice(("quoted2", "folded", "literal", "none"))
        if args == "quoted2":
            self.put(inner, "args:")
            at = self.dash(inner)
            self.lines.append(" " * at + '- "a long argument that')
            self.lines.append(" " * (at + 4) + 'spans two lines"')
        elif args in ("folded", "literal"):
            self.put(inner, "args:")
            at = self.dash(inner)
            self.lines.append(" " * at + ("- >-" if args == "folded" else "- |"))
            self.lines.append(" " * (at + 4) + "echo one")
            self.lines.append(" " * (at + 4) + "echo two")
        if self.chance(0.4):
            self.put(inner, "env:")
            at = self.dash(inner)
            label = f"{name}{len(self.lines)}"
            anchor = f"&{label} " if self.chance(0.3) else ""
            self.lines += [" " * at + "- name: A", " " * (at + 2) + f'value: {anchor}"1"']
            if anchor:
                self.lines += [" " * at + "- name: B", " " * (at + 2) + f"value: *{label}"]
        if gpu and not first_resources:
            self.put(inner, "resources:")
            self.resources(inner + self.unit)

    def resources(self, depth: int) -> None:
        sections = self.rng.choice((("limits",), ("limits", "requests"), ("requests", "limits")))
        cpu = self.chance(0.4)
        for section in sections:
            self.put(depth, f"{section}:")
            if cpu and self.chance(0.5):
                self.put(depth + self.unit, "cpu: 2")
            self.put(depth + self.unit, "nvidia.com/gpu: 1")
            if section == "limits" or self.chance(0.5):
                self.put(depth + self.unit, f"nvidia.com/gpumem: {self.scalar('8000')}")
                if self.chance(0.5):
                    self.put(depth + self.unit, "nvidia.com/gpucores: 30")
            if cpu:
                self.put(depth + self.unit, "memory: 4Gi")

    def pod_spec(self, depth: int) -> None:
        if self.chance(0.2):
            self.put(depth, "restartPolicy: Never")
        self.put(depth, "containers:")
        item = self.dash(depth)
        self.container(item, "main", gpu=True)
        if self.chance(0.4):
            self.container(item, "side", gpu=False)

    def workload(self, depth: int, kind: str, name: str) -> None:
        api = {"Pod": "v1", "Job": "batch/v1"}.get(kind, "apps/v1")
        self.put(depth, f"apiVersion: {api}")
        self.put(depth, f"kind: {kind}")
        self.put(depth, "metadata:")
        self.put(depth + self.unit, f"name: {name}")
        labels = {"app": name, "tier": "gpu"}
        if kind == "Pod":
            self.labels(depth + self.unit, "labels", labels)
            if self.chance(0.3):
                self.labels(depth + self.unit, "annotations", {"team": "ml"})
            self.put(depth, "spec:")
            self.pod_spec(depth + self.unit)
            return
        self.labels(depth + self.unit, "labels", labels)
        self.put(depth, "spec:")
        inner = depth + self.unit
        if kind != "Job":
            self.put(inner, "selector:")
            self.put(inner + self.unit, "matchLabels:")
            self.put(inner + 2 * self.unit, f"app: {name}")
        self.put(inner, "template:")
        self.put(inner + self.unit, "metadata:")
        self.labels(inner + 2 * self.unit, "labels", labels)
        if self.chance(0.3):
            self.labels(inner + 2 * self.unit, "annotations", {"team": "ml"})
        if self.lines[-1].rstrip().endswith("metadata:") and self.chance(0.7):
            self.put(inner + 2 * self.unit, f"name: {name}-pod")
        self.put(inner + self.unit, "spec:")
        self.pod_spec(inner + 2 * self.unit)

    def service(self) -> None:
        self.put(0, "apiVersion: v1")
        self.put(0, "kind: Service")
        self.put(0, "metadata: {name: web,  labels: {app: web}}")
        self.put(0, "spec:")
        self.put(self.unit, "ports: [{port: 80, targetPort: 8080}]   ")

    def document(self) -> str:
        if self.chance(0.3):
            self.lines.append("# generated for the byte-identity test")
        if self.chance(0.5):
            self.lines.append("---")
        kind = self.rng.choice(("Pod", "Deployment", "Job", "StatefulSet", "List"))
        if kind == "List":
            self.put(0, "apiVersion: v1")
            self.put(0, "kind: List")
            self.put(0, "items:")
            dash = self.dash(0)
            for index in range(2):
                self.lines.append(" " * dash + "- apiVersion: v1")
                self.workload_rest(dash + 2, f"pod{index}")
        else:
            self.workload(0, kind, "train")
        service = self.chance(0.5)
        if service:
            self.lines.append("---")
            self.service()
        newline = "\r\n" if self.chance(0.1) else "\n"
        text = newline.join(self.lines)
        # Without its last line break only after the Service: a block scalar (`|`) on the last
        # line would gain one from whatever is added after it (its value would change).
        return text if service and self.chance(0.2) else text + newline

    def workload_rest(self, depth: int, name: str) -> None:
        """A Pod inside a List, its apiVersion already on the dash's line."""
        self.put(depth, "kind: Pod")
        self.put(depth, "metadata:")
        self.put(depth + self.unit, f"name: {name}")
        self.labels(depth + self.unit, "labels", {"app": name})
        self.put(depth, "spec:")
        self.pod_spec(depth + self.unit)


def _legacy_resources(node: object) -> bool:
    """Whether any `resources:` map below `node` still names an NVIDIA resource."""
    if isinstance(node, list):
        return any(map(_legacy_resources, node))
    if not isinstance(node, dict):
        return False
    resources = node.get("resources")
    if isinstance(resources, dict):
        for section in ("limits", "requests"):
            if any(str(k).startswith("nvidia.com/") for k in resources.get(section) or {}):
                return True
    return any(map(_legacy_resources, node.values()))


def _generated(seed: int) -> str:
    return _Writer(random.Random(seed)).document()


@pytest.mark.parametrize("block", range(8))
def test_generated_styles_change_only_the_converted_lines(block: int) -> None:
    per_block = STYLES // 8
    for seed in range(block * per_block, (block + 1) * per_block):
        text = _generated(seed)
        result = convert_text(text, RULES, "default", False)
        assert result.converted, (seed, text, result.notes, result.refused)
        wrong = unexpected_changes(text, result.text)
        assert not wrong, (seed, text, result.text, [str(w) for w in wrong])
        documents = [d for d in yaml.safe_load_all(result.text) if d is not None]
        assert not any(map(_legacy_resources, documents)), (seed, result.text)
        again = convert_text(result.text, RULES, "default", False)
        assert not again.changed, (seed, result.text, again.text)


def test_what_convert_adds_follows_the_files_indentation() -> None:
    """Four spaces and indented dashes in, four spaces and indented dashes in what is added."""
    text = (
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        "    name: p\n"
        "spec:\n"
        "    containers:\n"
        "        -   name: main\n"
        "            image: busybox\n"
        "            resources:\n"
        "                limits:\n"
        "                    nvidia.com/gpu: 1\n"
        "                    nvidia.com/gpumem: 1000\n"
    )
    result = convert_text(text, RULES, "default", False)
    body = result.text.split("\n---\n")[0] + "\n"
    assert body == (
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        "    name: p\n"
        "    labels:\n"
        "        hami.io/dra: 'true'\n"
        "    annotations:\n"
        "        hami.io/converted-from: 'main: gpu=1,gpumem=1000'\n"
        "spec:\n"
        "    containers:\n"
        "        -   name: main\n"
        "            image: busybox\n"
        "            resources:\n"
        "                claims:\n"
        "                    -   name: main-gpu\n"
        "    resourceClaims:\n"
        "        -   name: main-gpu\n"
        f"            resourceClaimTemplateName: {result.templates[0]}\n"
    ), result.text


def test_a_flow_map_gets_the_key_in_its_own_spacing_and_quoting() -> None:
    text = (
        "apiVersion: v1\nkind: Pod\n"
        'metadata: {name: p,  labels: {"app": "a"}, annotations: { team: ml }}\n'
        "spec:\n  containers:\n  - name: main\n    image: busybox   \n"
        "    resources: {limits: {nvidia.com/gpu: 1, cpu: 1}}\n"
    )
    result = convert_text(text, RULES, "default", False)
    body = result.text.split("\n---\n")[0] + "\n"
    assert body.splitlines()[2] == (
        'metadata: {name: p,  labels: {"app": "a", "hami.io/dra": "true"}, annotations: {'
        " team: ml, hami.io/converted-from: 'main: gpu=1' }}"
    )
    assert "    image: busybox   \n" in body
    assert "    resources: {limits: {cpu: 1}, claims: [{name: main-gpu}]}\n" in body


# Every real-world document in ../shared: SOURCES.md, SOURCES2.md, SOURCES3.md, SOURCES4.md and
# HAMi's own examples (hami-examples/SOURCE.md).
CORPORA = (
    ("realworld", "cases"),
    ("realworld", "cases2"),
    ("corpora", "realworld3", "cases3"),
    ("corpora", "realworld4", "cases4"),
)
VENDORS_CONFIG = (
    "realworld",
    "configs",
    "hami-v2.10-chart-default.vendors-converted.device-config.yaml",
)


def _corpus_files() -> list[Path]:
    files: list[Path] = []
    for parts in CORPORA:
        folder = shared_path(*parts, what="a real-world corpus")
        files += sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))
    examples = shared_path("hami-examples", what="HAMi's examples")
    files += sorted(p for p in examples.rglob("*") if p.suffix in (".yaml", ".yml"))
    return files


@pytest.mark.parametrize("embedded", [False, True], ids=["plain", "embedded"])
def test_every_real_world_document_changes_only_where_it_converts(embedded: bool) -> None:
    config = shared_path(*VENDORS_CONFIG, what="HAMi v2.10's chart default config")
    policy = policy_from_yaml(config.read_text()).policy
    rules = AdmissionRules(policy, frozenset(DEFAULT_EXCLUDED.split(",")))
    files = _corpus_files()
    counts = {"documents": 0, "unchanged": 0, "changed only where converted": 0, "unreadable": 0}
    wrong: dict[str, list[str]] = {}
    for path in files:
        text = path.read_text()
        try:
            result = convert_text(text, rules, "default", False, embedded=embedded)
        except yaml.YAMLError:
            counts["unreadable"] += 1  # a Helm template or a broken snippet: left as it is
            continue
        segments = [s for s in segments_of(text) if yaml.safe_load(s) is not None]
        counts["documents"] += len(segments)
        if not result.changed:
            assert result.text == text, path.name
            counts["unchanged"] += len(segments)
            continue
        kept = sum(1 for segment in segments if segment in result.text)
        counts["unchanged"] += kept
        counts["changed only where converted"] += len(segments) - kept
        found = unexpected_changes(text, result.text)
        if found:
            wrong[path.name] = [str(f) for f in found][:5]
    print(f"\nbyte identity ({'embedded' if embedded else 'plain'}): {counts}, files {len(files)}")
    assert not wrong, wrong
    assert counts["documents"] > 300, counts
    assert counts["changed only where converted"] > 100, counts


JSON_LIST = """\
{
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {
      "apiVersion": "apps/v1",
      "kind": "Deployment",
      "metadata": {"name": "web", "labels": {"app": "web"}},
      "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
          "metadata": {"labels": {"app": "web"}},
          "spec": {
            "containers": [
              {"name": "main", "image": "busybox",
               "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000}}}
            ]
          }
        }
      }
    },
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
     "spec": {"ports": [{"port": 80}]}}
  ]
}
"""


def test_a_json_list_is_edited_in_place_in_json() -> None:
    """JSON is YAML's flow style: a List's workloads are edited where they are, in JSON, and
    the templates join its items; the rest stays byte for byte."""
    result = convert_text(JSON_LIST, RULES, "default", True)
    assert not unexpected_changes(JSON_LIST, result.text), result.text
    converted = json.loads(result.text)
    kinds = [item["kind"] for item in converted["items"]]
    assert kinds == ["Deployment", "Service", "ResourceClaimTemplate"]
    assert '{"name": "web", "labels": {"app": "web"}}' in result.text  # untouched
    pod = converted["items"][0]["spec"]["template"]
    assert pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": "main-gpu"}]}
    assert not convert_text(result.text, RULES, "default", True).changed


def test_nested_aliases_are_found_without_walking_them_again() -> None:
    """Every node an alias reaches is shared (editing it would edit each place that names it);
    a chain of aliases ten wide and twenty-five deep (10^25 paths) is walked node by node."""
    from hami_dra_webhook.files.fast_yaml import FastSafeLoader
    from hami_dra_webhook.migrate.yaml_positions import shared_nodes

    lines = ["kept: {a: 1}", "a0: &a0 [x, y]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 25)]
    root = yaml.compose("\n".join(lines), Loader=FastSafeLoader)
    shared = shared_nodes(root)
    by_key = {key.value: value for key, value in root.value}
    assert id(by_key["a0"]) in shared and all(id(n) in shared for n in by_key["a0"].value)
    assert id(by_key["kept"]) not in shared and id(by_key["a24"]) not in shared
