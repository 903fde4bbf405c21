"""The real-world corpus: manifests other projects published (HAMi's examples, its website's
labs, DaoCloud's docs, Kueue's HAMi sample, vLLM production-stack rendered, LeaderWorkerSet,
Ray, Volcano), read from `../shared/realworld` (SOURCES.md there says where each comes from;
`configs/` holds the device configs they were written against). Each defect the corpus showed
has its test here, on the file it came from; every file of both corpora goes through dry-run,
scan and convert in test_realworld_files.py."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hami_dra_webhook.cli.main import main
from tests.support.shared import shared_path

HAMI_CONFIG = "hami-v2.10-chart-default.device-config.yaml"
DAOCLOUD_CONFIG = "daocloud-nvidia-vgpu-2.9.0.device-config.yaml"
NO_FINAL_NEWLINE = 6  # files of the corpus whose last line has no newline


def corpus() -> Path:
    return shared_path("realworld", what="the real-world corpus")


def case(name: str) -> Path:
    path = corpus() / "cases" / name
    assert path.is_file(), f"{path} is not in the corpus"
    return path


def config_for(path: Path) -> Path:
    name = DAOCLOUD_CONFIG if path.name.startswith("DaoCloud__") else HAMI_CONFIG
    return corpus() / "configs" / name


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdin=io.StringIO(""), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def dry_run(path: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run(
        "dry-run", "--config", str(config_for(path)), "-o", "json", *extra, str(path)
    )
    return code, json.loads(out), err


def item(report: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        i for i in report["items"] if i["kind"] == kind and i["name"] == name
    ]
    assert len(found) == 1, [(i["kind"], i["name"]) for i in report["items"]]
    return found[0]


def case_names() -> list[str]:
    folder = shared_path("realworld", "cases", what="the real-world corpus")
    return sorted(p.name for p in folder.iterdir())


def test_files_without_a_final_newline_convert(tmp_path: Path) -> None:
    """Defect 1: six files end without a newline; convert's in-place edit wrote
    `restartPolicy: Never      resourceClaims:` on one line and reported the file unreadable
    at a line it does not have (exit 3). They now convert like the others."""
    endless = [case(name) for name in case_names() if not case(name).read_bytes().endswith(b"\n")]
    assert len(endless) == NO_FINAL_NEWLINE
    for path in endless:
        out = tmp_path / path.stem
        code, _, err = run(
            "convert", "--config", str(config_for(path)), "--out", str(out), str(path)
        )
        assert code == 0 and "unreadable" not in err, (path.name, err)
    benchmark = case(
        "4paradigm__k8s-vgpu-scheduler__benchmarks__ai-benchmark__Hami__ai-benchmark.yml"
    )
    code, _, err = run(
        "convert",
        "--config",
        str(config_for(benchmark)),
        "--out",
        str(tmp_path / "b"),
        str(benchmark),
    )
    job = next(yaml.safe_load_all((tmp_path / "b" / benchmark.name).read_text()))
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["resourceClaims"][0]["name"] == "ai-benchmark-gpu"


LWS = "dynamia-ai__workshop__sources__lws-vllm-tp.yaml"
RAY = "vllm-project__production-stack__helm.rendered-with-hand-values-raycluster.yaml"


def test_pod_templates_inside_custom_resources_are_reported(tmp_path: Path) -> None:
    """Defect 2: a LeaderWorkerSet and a RayCluster passed dry-run as "unchanged" with no word,
    and scan left them out. Each pod template is now reported at its path with what its pods
    become at admission; convert leaves them (and says so) unless given --embedded."""
    code, report, err = dry_run(case(LWS))
    lws = item(report, "LeaderWorkerSet", "vllm")
    assert lws["outcome"] == "unchanged"
    assert [(e["path"], e["outcome"]) for e in lws["embedded"]] == [
        ("spec.leaderWorkerTemplate.leaderTemplate", "converted"),
        ("spec.leaderWorkerTemplate.workerTemplate", "converted"),
    ]
    assert "converted when they are created" in " ".join(lws["warnings"])
    code, report, err = dry_run(case(RAY))
    ray = next(i for i in report["items"] if i["kind"] == "RayCluster")
    assert [e["path"] for e in ray["embedded"]] == [
        "spec.headGroupSpec.template",
        "spec.workerGroupSpecs[0].template",
    ]
    code, out, _ = run("scan", "--config", str(config_for(case(LWS))), str(case(LWS)))
    assert (
        "LeaderWorkerSet/vllm" in out
        and "pod template at spec.leaderWorkerTemplate.workerTemplate" in out
    )
    # convert leaves it, and says so; --embedded rewrites both templates.
    code, _, err = run(
        "convert",
        "--config",
        str(config_for(case(LWS))),
        "--out",
        str(tmp_path / "a"),
        str(case(LWS)),
    )
    assert code == 0 and err.count("left as it is") == 2, err
    assert (tmp_path / "a" / LWS).read_text() == case(LWS).read_text()
    code, _, err = run(
        "convert",
        "--embedded",
        "--config",
        str(config_for(case(LWS))),
        "--out",
        str(tmp_path / "b"),
        str(case(LWS)),
    )
    converted = next(yaml.safe_load_all((tmp_path / "b" / LWS).read_text()))
    for role in ("leaderTemplate", "workerTemplate"):
        pod = converted["spec"]["leaderWorkerTemplate"][role]
        assert pod["metadata"]["labels"]["hami.io/dra"] == "true"
        limits = pod["spec"]["containers"][0]["resources"].get("limits", {})
        assert not [k for k in limits if k.startswith("nvidia.com/")], limits
        assert pod["spec"]["resourceClaims"]


def test_unknown_count_name_is_refused_with_the_key_that_fixes_it() -> None:
    """Defect 3: DaoCloud's count name `nvidia.com/vgpu` under HAMi's default names: gpumem and
    gpucores were converted and `nvidia.com/vgpu: 1` stayed, so the pod waited forever."""
    path = case(
        "DaoCloud__DaoCloud-docs__docs__zh__docs__kpanda__user-guide__gpu__nvidia__vgpu__vgpu_user.md.yaml"
    )
    code, out, _err = run(
        "dry-run", "--config", str(corpus() / "configs" / HAMI_CONFIG), "-o", "json", str(path)
    )
    deployment = item(json.loads(out), "Deployment", "full-vgpu-demo")
    assert code == 2 and deployment["outcome"] == "refused"
    assert "nvidia.com/vgpu" in deployment["message"]
    assert "nvidia.resourceCountName: nvidia.com/vgpu" in deployment["message"]
    # Under the configuration it was written for, the name is known (and 200MB is what is wrong).
    code, report, _ = dry_run(path)
    assert "nvidia.com/vgpu is not" not in item(report, "Deployment", "full-vgpu-demo")["message"]


@pytest.mark.parametrize(
    ("name", "key", "effect"),
    [
        ("dynamia-ai__workshop__sources__use-gpu-type.yaml", "use-gputype", "selects no GPU"),
        ("dynamia-ai__workshop__sources__nouse-gpu-type.yaml", "nouse-gputype", "excludes nothing"),
    ],
)
def test_type_names_of_hami_2_7_are_warned(name: str, key: str, effect: str) -> None:
    """Defect 4: `NVIDIA-NVIDIA L4` (HAMi <= 2.7 naming) matches no type since v2.8."""
    code, report, _ = dry_run(case(name))
    warnings = report["items"][0]["warnings"]
    assert (
        f"{key} 'NVIDIA-NVIDIA L4' {effect} (HAMi >= 2.8 names types once): write 'NVIDIA L4'"
        in warnings
    )
    code, out, _ = run(
        "scan", "--config", str(config_for(case(name))), "-o", "json", str(case(name))
    )
    assert code == 1 and json.loads(out)["workloads"][0]["outcome"] == "attention"


def test_quotas_and_queues_that_count_legacy_resources(tmp_path: Path) -> None:
    """Defect 5: a ResourceQuota on requests.nvidia.com/gpu, gpucores, gpumem and Kueue queues
    covering them passed in silence; once pods are converted they count nothing."""
    quota = case("dynamia-ai__workshop__sources__resource-quota.yaml")
    kueue = case(
        "kubernetes-sigs__kueue__site__static__examples__serving-workloads__sample-hami.yaml"
    )
    code, out, _ = run(
        "scan", "--config", str(config_for(quota)), "-o", "json", str(quota), str(kueue)
    )
    found = {f"{q['kind']}/{q['name']}": q for q in json.loads(out)["quotas"]}
    assert code == 1 and set(found) == {
        "ResourceQuota/hami-resource-quota",
        "ClusterQueue/hami-queue",
    }
    devices = "hami-core-gpu.project-hami.io.deviceclass.resource.k8s.io/devices"
    assert found["ResourceQuota/hami-resource-quota"]["draForm"] == {devices: "1"}
    # Its requests.nvidia.com/* keys are kept for converted pods (docs/quotas.md), no longer
    # "stops limiting": the scan says which and how.
    stops = found["ResourceQuota/hami-resource-quota"]["stops"]
    assert "the webhook keeps requests.nvidia.com/gpu" in stops and "stops limiting" not in stops
    assert "nvidia.com/total-gpumem" in found["ClusterQueue/hami-queue"]["counts"]
    code, _, _err = run(
        "convert", "--config", str(config_for(quota)), "--out", str(tmp_path), str(quota)
    )
    converted = yaml.safe_load((tmp_path / quota.name).read_text())
    assert converted["spec"]["hard"][devices] == "1"
    assert converted["spec"]["hard"]["requests.nvidia.com/gpu"] == "1"  # unconverted pods


def test_every_item_names_its_file_and_document(tmp_path: Path) -> None:
    """Defect 6: `Pod/gpu-pod` in `default` came from 11 files, and nothing said which."""
    folder = corpus() / "cases"
    _, out, _ = run(
        "dry-run", "--config", str(corpus() / "configs" / HAMI_CONFIG), "-o", "json", str(folder)
    )
    gpu_pods = [i for i in json.loads(out)["items"] if (i["kind"], i["name"]) == ("Pod", "gpu-pod")]
    assert len(gpu_pods) >= 11
    assert len({i["source"] for i in gpu_pods}) == len(gpu_pods)
    _code, out, _ = run(
        "scan", "--config", str(corpus() / "configs" / HAMI_CONFIG), "-o", "json", str(folder)
    )
    sources = [w["source"] for w in json.loads(out)["workloads"]]
    assert all(s.startswith(str(folder)) for s in sources)
    blog = "dynamia-ai__website__src__content__blog__open-source-vgpu-hami-uuid__en.md.yaml"
    from_blog = [s for s in sources if blog in s]
    assert len(from_blog) == 4 and len(set(from_blog)) == 4, from_blog


def test_kinds_are_matched_with_their_api_group() -> None:
    """Defect 7: an `example.com/v1` Deployment was converted as if it were apps/v1's. It is
    now reported as a pod template inside another object, never rewritten by default."""
    text = (
        "apiVersion: example.com/v1\nkind: Deployment\nmetadata: {name: lookalike}\nspec:\n"
        "  template:\n    spec:\n      containers:\n      - name: c\n        image: i\n"
        "        resources: {limits: {nvidia.com/gpu: 1}}\n"
    )
    out, err = io.StringIO(), io.StringIO()
    main(["dry-run", "-o", "json", "-"], stdin=io.StringIO(text), stdout=out, stderr=err)
    entry = json.loads(out.getvalue())["items"][0]
    assert entry["outcome"] == "unchanged" and entry["patch"] == []
    assert [e["path"] for e in entry["embedded"]] == ["spec.template"]


def test_gpumem_above_every_card_is_warned() -> None:
    """Defect 8: 90000 MiB on a cluster of 24 GiB and 80 GiB cards converted without a word."""
    path = case(
        "Project-HAMi__website__tutorials__labs__examples__07-hami-isolation-k3s__oversubscribe-pending.yaml"
    )
    _code, report, _ = dry_run(path)
    warnings = " ".join(report["items"][0]["warnings"])
    assert "90000 MiB is more than the largest GPU (81920 MiB): it can never be placed" in warnings


def test_mig_requests_refused_by_default_and_converted_when_asked(tmp_path: Path) -> None:
    """Defect 10: HAMi's own dynamic_mig_example.yaml could not be deployed unchanged. Refusal
    stays the default (and says how to convert); migMode: hami-core converts it, warned."""
    path = case("Project-HAMi__HAMi__examples__nvidia__dynamic_mig_example.yaml")
    code, report, _ = dry_run(path)
    assert code == 2 and "migMode: hami-core" in report["items"][0]["message"]
    config = tmp_path / "config.yaml"
    config.write_text(config_for(path).read_text() + "\n  migMode: hami-core\n")
    code, out, err = run("dry-run", "--config", str(config), "-o", "json", str(path))
    pod = json.loads(out)["items"][0]
    assert code == 0 and pod["outcome"] == "converted", err
    assert "not MIG isolation" in " ".join(pod["warnings"])
    requests = pod["resourceClaimTemplates"][0]["spec"]["spec"]["devices"]["requests"]
    assert [r["exactly"]["capacity"]["requests"]["memory"] for r in requests] == ["8000Mi"] * 2
