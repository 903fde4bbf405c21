"""A container's name wherever one is written (issue 49, class 1): the name its controller gives
it (KServe's model is always `kserve-container`, whatever the map says: `name: ""` is common in
real InferenceServices), or its place, said plainly, when it has none. Every place goes through
`ContainerRef.shown`."""

from __future__ import annotations

from pathlib import Path

from hami_dra_webhook.core.model.containers import containers
from hami_dra_webhook.core.model.types import ContainerRef
from tests.migrate.test_round_three import INFERENCE_SERVICE, converted, dry_run, run, scanned

NAMELESS_MODEL = INFERENCE_SERVICE.replace("    model:\n", '    model:\n      name: ""\n', 1)
NAMELESS_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: team-a}
spec:
  initContainers:
  - {name: setup, image: x}
  containers:
  - {name: side, image: x}
  - image: registry.example/app:1
    resources:
      limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 2000}
"""


def test_a_missing_or_empty_name_is_written_as_the_containers_place() -> None:
    spec = {"containers": [{"name": "a"}, {"name": ""}, {}, {"name": 7}, "not a map"]}
    assert [ref.name for ref, _ in containers(spec)] == ["a", "", "", "", ""]
    assert [ref.shown for ref, _ in containers(spec)] == [
        "a",
        "#2 (no name)",
        "#3 (no name)",
        "#4 (no name)",
        "#5 (no name)",
    ]
    assert ContainerRef("initContainers", 0, "").label == "init container #1 (no name)"
    assert ContainerRef("containers", 1, "main").label == 'container "main"'


def test_a_kserve_model_named_empty_is_kserve_container_everywhere(tmp_path: Path) -> None:
    assert 'name: ""' in NAMELESS_MODEL
    _code, item, _ = dry_run(NAMELESS_MODEL)
    assert 'container "kserve-container": 1 GPU' in item["embedded"][0]["info"][0]
    _code, workloads = scanned(NAMELESS_MODEL)
    assert [w["containers"][0]["name"] for w in workloads] == ["kserve-container"]
    _code, documents, _err = converted(NAMELESS_MODEL, tmp_path, "--embedded")
    predictor = documents[0]["spec"]["predictor"]
    assert predictor["resourceClaims"][0]["name"] == "kserve-container-gpu"
    assert predictor["annotations"]["hami.io/converted-from"].startswith("kserve-container: ")
    assert predictor["model"]["name"] == ""  # the manifest's own words are kept


def test_a_nameless_container_is_named_by_its_place_in_every_output(tmp_path: Path) -> None:
    _code, item, _ = dry_run(NAMELESS_POD)
    assert "container #2 (no name): 1 GPU, 2000 MiB" in " ".join(item["info"])
    _code, workloads = scanned(NAMELESS_POD)
    assert [c["name"] for c in workloads[0]["containers"]] == ["#2 (no name)"]
    _code, table, _ = run(NAMELESS_POD, "scan", "-")
    assert "None" not in table and '""' not in table and "#2 (no name)" in table
    _code, documents, _err = converted(NAMELESS_POD, tmp_path)
    annotation = documents[0]["metadata"]["annotations"]["hami.io/converted-from"]
    assert annotation == "#2 (no name): gpu=1,gpumem=2000"
