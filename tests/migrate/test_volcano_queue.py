"""Volcano queues through the stages: `scan` reports a Queue that counts legacy GPU resources
and `convert` adds the form Volcano v1.15's capacity plugin counts claims by, all three
dimensions (devices, memory, cores) or none (migrate/quotas.py)."""

from __future__ import annotations

import io
from pathlib import Path

import yaml

from hami_dra_webhook.cli.main import main

CLASS = "hami-core-gpu.project-hami.io"
QUEUE = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: ml-team
spec:
  capability:
    cpu: "100"
    nvidia.com/gpu: "8"
    nvidia.com/gpumem: "64000"
  deserved:
    nvidia.com/gpu: "4"
  guarantee:
    resource:
      nvidia.com/gpu: "1"
      nvidia.com/gpucores: "50"
"""
SIZES = "nvidia: {}\nhamiDraWebhook:\n  deviceMemorySizes: [24Gi, 80Gi]\n"


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(args), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_convert_adds_every_dimension_to_each_map(tmp_path: Path) -> None:
    (tmp_path / "queue.yaml").write_text(QUEUE)
    (tmp_path / "config.yaml").write_text(SIZES)
    code, out, err = run(
        "convert",
        str(tmp_path / "queue.yaml"),
        "--in-place",
        "--config",
        str(tmp_path / "config.yaml"),
    )
    assert code == 0, out + err
    spec = yaml.safe_load((tmp_path / "queue.yaml").read_text())["spec"]
    assert spec["capability"] == {
        "cpu": "100",
        "nvidia.com/gpu": "8",
        "nvidia.com/gpumem": "64000",
        f"deviceclass/{CLASS}": "8",
        f"memory.deviceclass/{CLASS}": "64000Mi",
        f"cores.deviceclass/{CLASS}": "800",
    }
    # No gpumem: as much memory as that many of the largest card (80 GiB) hold.
    assert spec["deserved"][f"memory.deviceclass/{CLASS}"] == f"{4 * 80 * 1024}Mi"
    assert spec["guarantee"]["resource"][f"cores.deviceclass/{CLASS}"] == "50"
    assert spec["guarantee"]["resource"][f"deviceclass/{CLASS}"] == "1"


def test_scan_says_which_dimension_cannot_be_known(tmp_path: Path) -> None:
    (tmp_path / "queue.yaml").write_text(QUEUE)
    code, out, _ = run("scan", str(tmp_path / "queue.yaml"))
    assert code == 1, out
    assert "Queue/ml-team   nvidia.com/gpu, nvidia.com/gpucores, nvidia.com/gpumem" in out, out
    assert f"DRA form in spec.capability: memory.deviceclass/{CLASS}: 64000Mi" in out
    assert (
        "spec.deserved: no nvidia.com/gpumem and no card sizes (hamiDraWebhook.deviceMemorySizes):"
        f" give memory.deviceclass/{CLASS} yourself"
    ) in out, out
    assert "DRA form in spec.deserved" not in out


def test_a_queue_without_legacy_resources_is_not_reported(tmp_path: Path) -> None:
    (tmp_path / "queue.yaml").write_text(QUEUE.replace("nvidia.com/", "example.com/"))
    code, out, _ = run("scan", str(tmp_path / "queue.yaml"))
    assert code == 0 and "Queue/" not in out, out


KUEUE_CONFIGURATION = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
metadata:
  name: kueue
resources:
  excludeResourcePrefixes: []
"""


def test_a_kueue_configuration_gets_the_device_class_mapping(tmp_path: Path) -> None:
    """Kueue's apis/config/v1beta2 DeviceClassMapping (name, deviceClassNames): the count
    resource a ClusterQueue limits then counts the devices of the webhook's class."""
    path = tmp_path / "kueue.yaml"
    path.write_text(KUEUE_CONFIGURATION)
    code, out, _ = run("scan", str(path))
    assert code == 1 and "Configuration/kueue" in out, out
    assert "never those of pods converted at admission" in out
    code, out, err = run("convert", str(path), "--in-place")
    assert code == 0, out + err
    resources = yaml.safe_load(path.read_text())["resources"]
    assert resources["deviceClassMappings"] == [
        {"name": "nvidia.com/gpu", "deviceClassNames": [CLASS]}
    ]
    code, out, _ = run("scan", str(path))  # mapped: nothing left to say
    assert code == 0 and "Configuration/kueue" not in out, out
