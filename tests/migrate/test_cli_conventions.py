"""The command line's conventions, each as a user meets it: `version`, `-o json|yaml`, exit 64
for every usage error, durations such as `1h`, kubectl's `--dry-run=client|server` and `-n`
defaulting to the context's namespace, plain messages for a broken kubeconfig or a file that is
not UTF-8, an empty input said to be empty, `info:` for what is not a warning, and `convert`
keeping every byte it does not change (CRLF line ends, a BOM).

The cluster's answers come from the shared real control plane (`kube`)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hami_dra_webhook import __version__
from hami_dra_webhook.cli.inputs import duration
from hami_dra_webhook.cli.main import main
from tests.support.cluster import Cluster

REPO = Path(__file__).parents[2]
EXAMPLE = REPO / "examples" / "pod.yaml"
HAMI_DEFAULT_CONFIG = (
    REPO.parent / "shared" / "realworld" / "configs" / "hami-v2.10-chart-default.device-config.yaml"
)
LEGACY_POD = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n"
    "    image: x\n    resources:\n      limits:\n        nvidia.com/gpu: 1\n"
    "        nvidia.com/gpumem: 1000\n"
)


def run(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdin=io.StringIO(stdin), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_version_in_text_json_and_yaml() -> None:
    assert run("version") == (0, f"hami-dra-webhook {__version__}\n", "")
    code, out, _ = run("version", "-o", "json")
    assert code == 0 and json.loads(out)["version"] == __version__
    code, out, _ = run("version", "-o", "yaml")
    assert code == 0 and yaml.safe_load(out)["version"] == __version__
    assert main(["--version"], stdout=io.StringIO()) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["scan"],  # neither PATHs nor --cluster
        ["scan", "x.yaml", "--cluster"],
        ["dry-run"],  # no input
        ["convert", "x.yaml"],  # no --out or --in-place
        ["convert", "-", "--in-place"],
        ["certs", "--service", "s", "--namespace", "n", "--out-dir", "d", "--days", "0"],
        ["gc", "--grace", "soon"],
        ["migrate", "node", "n", "--to", "dra", "--timeout", "1x"],
        ["migrate", "node", "n", "--to", "dra", "--dry-run=maybe"],
        ["scan", "x.yaml", "-o", "xml"],
        ["no-such-command"],
    ],
)
def test_every_usage_error_exits_64(argv: list[str]) -> None:
    code, _, err = run(*argv)
    assert code == 64, (argv, err)
    assert "error:" in err


def test_durations_read_as_kubectl_writes_them() -> None:
    assert [duration(t) for t in ("90", "90s", "15m", "1h", "1h30m", "2d", "500ms")] == [
        90,
        90,
        900,
        3600,
        5400,
        172800,
        0.5,
    ]
    for wrong in ("", "1x", "h", "1h 30m", "-5m"):
        with pytest.raises(Exception, match="not a duration"):
            duration(wrong)


def test_output_yaml_wherever_there_is_output(tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(LEGACY_POD)
    code, out, _ = run("scan", str(manifest), "-o", "yaml")
    report = yaml.safe_load(out)
    assert code == 0 and report["workloads"][0]["outcome"] == "converted"
    code, out, _ = run("scan", str(manifest), "-o", "json")
    assert json.loads(out) == report  # the same data
    for command in (["check"], ["migrate", "status"], ["migrate", "node", "n", "--to", "dra"]):
        _, text, _ = run(*command, "--help")
        assert "{text,json,yaml}" in text, command


def test_info_is_not_a_warning_and_outcomes_share_one_vocabulary(tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(LEGACY_POD)
    code, _, err = run("dry-run", str(manifest))
    assert code == 0
    assert err == (
        f'info: Pod p ({manifest}): container "c": 1 GPU, 1000 MiB, no SM limit'
        " -> hami-gpu-c52d9e84253b6f53\n"
    )
    code, out, _ = run("dry-run", str(manifest), "-o", "json")
    item = json.loads(out)["items"][0]
    assert (item["outcome"], item["warnings"]) == ("converted", [])
    assert item["info"] == [
        'container "c": 1 GPU, 1000 MiB, no SM limit -> hami-gpu-c52d9e84253b6f53'
    ]
    _, out, _ = run("scan", str(manifest), "-o", "json")
    assert json.loads(out)["workloads"][0]["outcome"] == "converted"  # not "converts"
    _, text, _ = run("scan", str(manifest))
    assert "CONVERTED" in text and "converted" in text


def test_hamis_own_default_config_is_read_without_a_warning(tmp_path: Path) -> None:
    if not HAMI_DEFAULT_CONFIG.is_file():
        pytest.skip(f"{HAMI_DEFAULT_CONFIG} is absent: ../shared is not beside the repository")
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(LEGACY_POD)
    code, _, err = run("dry-run", "--config", str(HAMI_DEFAULT_CONFIG), str(manifest))
    assert code == 0 and "warning" not in err, err


def test_empty_and_non_utf8_inputs_are_named_plainly(tmp_path: Path) -> None:
    empty, binary = tmp_path / "empty.yaml", tmp_path / "logo.yaml"
    empty.write_text("")
    binary.write_bytes(b"\x89PNG\r\n\x1a\n")
    code, _, err = run("dry-run", str(empty))
    assert code == 3
    # one line: an error, not a warning and an error
    assert err == f"error: no Kubernetes objects in {empty}: the input is empty\n"
    code, _, err = run("dry-run", str(empty), str(EXAMPLE))
    assert code == 0 and err.startswith(f"warning: {empty}: empty, no Kubernetes objects in it\n")
    assert run("dry-run", "-", stdin="")[0] == 3
    assert (
        run("convert", "-", stdin="\n")[2] == "error: <stdin>: empty, no Kubernetes objects in it\n"
    )
    code, _, err = run("scan", str(empty))
    assert code == 3 and "empty" in err
    for command in (["dry-run"], ["scan"], ["convert", "--out", str(tmp_path / "o")]):
        code, out, err = run(*command, str(binary))
        said = out + err  # scan lists it in its report
        assert code == 3
        assert f"{binary}: not UTF-8 text (byte 0x89 at offset 0)" in said, said
        assert "codec" not in said


@pytest.mark.parametrize(
    ("kubeconfig", "said"),
    [
        ("", "is empty or not a kubeconfig"),
        ("apiVersion: v1\nkind: Config\n", "has no current-context: pass --context NAME"),
        (": [", "is not valid YAML"),
        ("contexts: []\nclusters: []\n", "has no current-context: pass --context NAME"),
        (
            "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters: []\n",
            "names cluster 'c', which is not defined there",
        ),
        ("current-context: b\ncontexts:\n- name: a\n  context: {}\n", "has no context named 'b'"),
    ],
)
def test_a_broken_kubeconfig_is_described_in_plain_words(
    tmp_path: Path, kubeconfig: str, said: str
) -> None:
    path = tmp_path / "config"
    path.write_text(kubeconfig)
    for command in (["check"], ["gc"], ["scan", "--cluster"], ["migrate", "status"]):
        code, _, err = run(*command, "--kubeconfig", str(path))
        assert code == 3 and said in err, (command, err)
        assert "NoneType" not in err and "Traceback" not in err


def test_convert_keeps_crlf_and_a_bom(tmp_path: Path) -> None:
    crlf = tmp_path / "crlf.yaml"
    crlf.write_bytes(b"\xef\xbb\xbf# team's pod\r\n" + LEGACY_POD.replace("\n", "\r\n").encode())
    code, out, _ = run("convert", "--in-place", str(crlf))
    assert code == 0 and "1 template(s) added" in out
    written = crlf.read_bytes()
    assert written.startswith(b"\xef\xbb\xbf# team's pod\r\napiVersion: v1\r\n")
    assert written.count(b"\n") == written.count(b"\r\n") > 30
    assert b"resourceClaimTemplateName" in written
    lf = tmp_path / "lf.yaml"
    lf.write_text(LEGACY_POD)
    run("convert", "--in-place", str(lf))
    assert b"\r" not in lf.read_bytes()
    assert written.replace(b"\r\n", b"\n").removeprefix(b"\xef\xbb\xbf# team's pod\n") == (
        lf.read_bytes()
    )


def _kubeconfig_with_namespace(kube: Cluster, tmp_path: Path, namespace: str) -> Path:
    config: dict[str, Any] = yaml.safe_load(kube.plane.admin_kubeconfig.read_text())
    current = config["current-context"]
    for context in config["contexts"]:
        if context["name"] == current:
            context["context"]["namespace"] = namespace
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.plane
def test_scan_cluster_reads_the_contexts_namespace(kube: Cluster, tmp_path: Path) -> None:
    namespace = kube.create_namespace("ctx")
    kube.apply(LEGACY_POD, namespace=namespace)
    try:
        config = _kubeconfig_with_namespace(kube, tmp_path, namespace)
        code, out, err = run("scan", "--cluster", "--kubeconfig", str(config), "-o", "json")
        assert code == 0, err
        assert [(w["namespace"], w["name"]) for w in json.loads(out)["workloads"]] == [
            (namespace, "p")
        ]
        plain = str(kube.plane.admin_kubeconfig)  # no namespace in the context: `default`
        _, out, _ = run("scan", "--cluster", "--kubeconfig", plain, "-o", "json")
        assert json.loads(out)["workloads"] == []
    finally:
        kube.release_namespace(namespace)


@pytest.mark.plane
def test_dry_run_server_asks_the_api_and_changes_nothing(kube: Cluster) -> None:
    """`migrate node --dry-run=server`: the Eviction API answers for each pod of the plan (a
    PodDisruptionBudget refuses); `gc --dry-run=server` deletes nothing."""
    namespace = kube.create_namespace("dryrun")
    _, converted, _ = run("dry-run", "-n", namespace, "-", stdin=LEGACY_POD)
    pod, template = yaml.safe_load_all(converted)  # a converted pod: the DRA pool's
    pod["metadata"]["labels"]["app"] = "p"
    pod["spec"]["nodeName"] = kube.node.name
    # created, not applied: kubectl apply's annotation would make it not the webhook's
    kube.kubectl("create", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(template))
    kube.apply(pod, namespace=namespace)
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "p"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "p"}}},
    }
    kube.apply(budget, namespace=namespace)
    config = str(kube.plane.admin_kubeconfig)
    # No kubelet here: the pod is made Running and Ready through its status, or the Eviction
    # API lets it go whatever the budget says (a pod that is not running is always evictable).
    status = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    kube.kubectl(
        "patch", "pod", "p", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps(status),
    )  # fmt: skip
    _wait_for_budget(kube, namespace, "p")
    try:
        code, out, err = run(
            "migrate", "node", kube.node.name, "--to", "legacy", "--dry-run=server",
            "--kubeconfig", config, "-o", "json",
        )  # fmt: skip
        answers = {a["name"]: a["answer"] for a in json.loads(out)["evictions"]}
        assert answers["p"].startswith("refused by a PodDisruptionBudget"), (answers, err)
        assert code in (0, 2)
        assert kube.kubectl("get", "pod", "p", "-n", namespace, "-o", "name").stdout.strip()
        kube.kubectl("delete", "pod", "p", "-n", namespace, "--grace-period=0", "--force")
        name = template["metadata"]["name"]
        code, out, err = run(
            "gc", "--dry-run=server", "--grace", "1ms", "-n", namespace, "--kubeconfig", config
        )
        assert (code, out) == (0, f"would delete {namespace}/{name}\n"), err
        assert err.startswith("would delete 1 (dry run), in use"), err  # issue 65: not "deleted 1"
        got = kube.kubectl("get", "resourceclaimtemplate", name, "-n", namespace, "-o", "name")
        assert got.stdout.strip() == f"resourceclaimtemplate.resource.k8s.io/{name}"
    finally:
        kube.release_namespace(namespace)


def _wait_for_budget(kube: Cluster, namespace: str, name: str) -> None:
    """Until the disruption controller has counted the pod healthy (at most 60 s)."""
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = kube.kubectl("get", "pdb", name, "-n", namespace, "-o", "json")
        status = json.loads(got.stdout).get("status", {}) if got.returncode == 0 else {}
        if status.get("currentHealthy") == 1 and status.get("disruptionsAllowed") == 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"PodDisruptionBudget {namespace}/{name} never counted the pod")


def test_hidden_folders_below_a_named_folder_are_not_read(tmp_path: Path) -> None:
    """A mounted ConfigMap holds each file twice (`x.yaml` and `..<timestamp>/x.yaml`), a
    repository has `.git` and `.github`: only what is not hidden below the named folder counts;
    a hidden folder named itself is read."""
    for folder in ("apps", "..2026_12_03_20_00_00.1", ".github/workflows"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "pod.yaml").write_text(LEGACY_POD)
    _, out, _ = run("scan", str(tmp_path), "-o", "json")
    assert [w["source"] for w in json.loads(out)["workloads"]] == [str(tmp_path / "apps/pod.yaml")]
    _, out, _ = run("scan", str(tmp_path / ".github"), "-o", "json")
    assert len(json.loads(out)["workloads"]) == 1
    code, out, _ = run("convert", str(tmp_path), "--out", str(tmp_path.parent / "converted"))
    assert code == 0 and out.count("template(s) added") == 1


@pytest.mark.parametrize("command", ["dry-run", "scan"])
@pytest.mark.parametrize("text", ["foo: bar\n", "Some prose, not a manifest.\n"])
def test_an_input_with_no_kubernetes_object_is_an_error(
    command: str, text: str, tmp_path: Path
) -> None:
    """Issue 65: as kubectl refuses it (exit 3, naming the file), not "nothing to do", exit 0."""
    path = tmp_path / "notes.yaml"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    code = main([command, str(path)], stdin=io.StringIO(""), stdout=out, stderr=err)
    assert code == 3, err.getvalue()
    assert f"error: no Kubernetes objects in {path}: no document has an apiVersion and a kind" in (
        err.getvalue()
    )


@pytest.mark.parametrize(
    ("words", "dest"),
    [
        (["monitor", "--feedback-interval"], "feedback_interval"),
        (["gc", "--grace"], "grace"),
        (["migrate", "node", "n1", "--to", "dra", "--timeout"], "timeout"),
    ],
)
def test_every_time_option_takes_one_duration_syntax(words: list[str], dest: str) -> None:
    """Issue 65: seconds, or a duration (`90s`, `15m`, `1h30m`), wherever a time is given."""
    from hami_dra_webhook.cli.main import build_parser

    parser = build_parser()
    for text, seconds in (("90", 90.0), ("90s", 90.0), ("15m", 900.0), ("1h30m", 5400.0)):
        assert getattr(parser.parse_args([*words, text]), dest) == seconds, (words, text)


def _exit_codes_said(command: str) -> dict[int, str]:
    """The codes the command's --help lists ("Exit codes: 0 done, 2 ..."), code -> meaning."""
    _, text, _ = run(command, "--help")
    said = " ".join(text.split()).split("Exit codes: ", 1)[1].split(".", 1)[0]
    pairs = [item.strip().split(" ", 1) for item in said.split(", ") if item[:1].isdigit()]
    return {int(code): meaning for code, meaning in pairs}


def test_each_command_s_help_lists_the_exit_codes_it_returns(tmp_path: Path) -> None:
    """A pod that converts with an attention warning: `scan` exits 1 and says so; `dry-run`
    and `convert` convert it and exit 0, and their help does not promise a 1 they never give
    (it did: "1 needs attention" on all three)."""
    manifest = tmp_path / "pod.yaml"
    attention = "    env:\n    - name: CUDA_DISABLE_CONTROL\n      value: 'true'\n"
    manifest.write_text(LEGACY_POD.replace("    resources:", attention + "    resources:"))
    scan = _exit_codes_said("scan")
    assert run("scan", str(manifest))[0] == 1 and "needs attention" in scan[1]
    dry_run = _exit_codes_said("dry-run")
    code, _, err = run("dry-run", str(manifest))
    assert code == 0 and "CUDA_DISABLE_CONTROL" in err
    assert 1 not in dry_run and set(dry_run) == {0, 2, 3, 64}
    convert = _exit_codes_said("convert")
    assert run("convert", "--diff", str(manifest))[0] == 0
    assert run("convert", "--diff", "--exit-code", str(manifest))[0] == 1
    assert convert[1].startswith("with --exit-code")
