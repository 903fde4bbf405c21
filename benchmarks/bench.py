"""One run, one machine: the webhook, the bare limit of its stack, and a Go peer, side by side.

    .venv/bin/python -m benchmarks.bench [--duration 10] [--quick]

- the webhook (`serve`: TLS, one process, offline store so every template counts as cached,
  default log level), POST /mutate with a mix of four 9-13 KB AdmissionReviews, in three loads
  (benchmarks/mix.lua): `repeating` (the four in turn, as a ReplicaSet's pods repeat),
  `label-unique` (every pod a label of its own, as a StatefulSet's pods), `new-template` (the
  three GPU pods with a gpumem, every request's a value of its own: the translation cache never
  answers and every pod needs a template of its own);
- POST /bare of the same process (reads the body, answers a fixed JSON): this stack's limit;
- the minimal stdlib Go webhook of ../shared/anchors/go-webhook (built here with Debian's
  golang-go), POST /mutate with the same three loads, each of its runs right after the
  webhook's same run (both servers up, the one not measured idle);
each at concurrency 1, 8 and 64 over keep-alive TLS, servers pinned to core 0 and the load
generator to core 1. The load generator is wrk (Debian's package) with benchmarks/mix.lua: a C
event loop that does far less work per request than the servers, so it is not the bottleneck.
Then: in-process translation per mix item, dry-run of 1,000 pods, and the webhook's RSS after
100,000 requests. Prints a table; asserts nothing (targets are judged by reading it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hami_dra_webhook.certs.pki import issue, write
from hami_dra_webhook.core.settings.policy import DEFAULT_POLICY
from hami_dra_webhook.core.translate.pod import translate_pod
from tests.support.review_mix import encoded, pods

ROOT = Path(__file__).parents[1]
GO_PEER = ROOT.parent / "shared" / "anchors" / "go-webhook"
LUA = Path(__file__).parent / "mix.lua"
CONCURRENCY = (1, 8, 64)
LOADS = {"repeating": [], "label-unique": ["--unique"], "new-template": ["--new-template"]}


def need_tools() -> None:
    missing = [tool for tool in ("wrk", "go", "taskset") if shutil.which(tool) is None]
    if missing and os.geteuid() == 0 and shutil.which("apt-get"):
        packages = {"wrk": "wrk", "go": "golang-go", "taskset": "util-linux"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", *[packages[t] for t in missing]],
            check=True,
            capture_output=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        missing = [tool for tool in missing if shutil.which(tool) is None]
    if missing:
        sys.exit(
            f"the benchmark needs {', '.join(missing)} (Debian: apt-get install wrk golang-go util-linux)"
        )


def ensure_free(*ports: int) -> None:
    """Before a server starts: nothing may listen on its ports, or waiting for them would take
    another server's port for this one's."""
    import socket

    for port in ports:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sys.exit(f"port {port} is taken by another process")


def wait_port(port: int, process: subprocess.Popen[bytes]) -> None:
    import socket

    for _ in range(300):
        if process.poll() is not None:
            sys.exit(f"a server exited early ({process.args})")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


@contextmanager
def serving(process: subprocess.Popen[bytes], port: int) -> Iterator[None]:
    """Wait until the server listens; stop it afterwards, whatever happened."""
    try:
        wait_port(port, process)
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextmanager
def webhook(folder: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "HAMI_DRA_BARE_ENDPOINT": "true", "HAMI_DRA_GC_INTERVAL": "0"}
    command = [
        "taskset",
        "-c",
        "0",
        sys.executable,
        "-m",
        "hami_dra_webhook",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ops-host",
        "127.0.0.1",
        "--ops-port",
        str(port + 1),
        "--cert-file",
        str(folder / "tls.crt"),
        "--key-file",
        str(folder / "tls.key"),
    ]
    ensure_free(port, port + 1)
    with (folder / "webhook.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    with serving(process, port):
        yield process


@contextmanager
def go_peer(folder: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    build = folder / "go"
    shutil.copytree(GO_PEER, build)
    shutil.copy(folder / "tls.crt", build / "cert.pem")  # the names the Go peer reads
    shutil.copy(folder / "tls.key", build / "key.pem")
    env = {
        **os.environ,
        "GOCACHE": str(folder / "gocache"),
        "GOPATH": str(folder / "gopath"),
        "GOFLAGS": "-mod=mod",
        "GO111MODULE": "on",
    }
    subprocess.run(
        ["go", "build", "-o", "gowh", "."], cwd=build, check=True, env=env, capture_output=True
    )
    ensure_free(port)
    process = subprocess.Popen(
        ["taskset", "-c", "0", str(build / "gowh"), f"127.0.0.1:{port}"],
        cwd=build,
        env={**env, "GOMAXPROCS": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with serving(process, port):
        yield process


def wrk(
    url: str, concurrency: int, duration: float, bodies: list[Path], load: str = "repeating"
) -> dict[str, float]:
    command = [
        "taskset",
        "-c",
        "1",
        "wrk",
        "-t1",
        f"-c{concurrency}",
        f"-d{duration:g}s",
        "--latency",
        "-s",
        str(LUA),
        url,
        "--",
        *LOADS[load],
        *map(str, bodies),
    ]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    line = next(line for line in output.splitlines() if line.startswith("RESULT "))
    result = json.loads(line[len("RESULT ") :])
    result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
    return dict(result)


def paced(port: int, ca: Path, rate: float, seconds: float, bodies: list[Path]) -> dict[str, float]:
    """Latency at a fixed, modest rate (wrk cannot pace): one keep-alive TLS connection, a
    Python client sending on a fixed schedule (at 100 req/s it idles most of the time)."""
    import http.client
    import ssl

    payloads = [b.read_bytes() for b in bodies]
    context = ssl.create_default_context(cafile=str(ca))
    connection = http.client.HTTPSConnection("localhost", port, context=context)
    samples = []
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        begin = time.perf_counter()
        connection.request(
            "POST",
            "/mutate",
            body=payloads[i % len(payloads)],
            headers={"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        response.read()
        assert response.status == 200
        samples.append(time.perf_counter() - begin)
    connection.close()
    samples.sort()
    return {
        "p50_ms": statistics.median(samples) * 1000,
        "p99_ms": samples[int(len(samples) * 0.99)] * 1000,
        "requests": len(samples),
    }


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def translation_us() -> dict[str, tuple[float, float]]:
    results = {}
    for name, pod in pods().items():
        for _ in range(300):
            translate_pod(pod, DEFAULT_POLICY, "ml")
        samples = []
        for _ in range(3000):
            started = time.perf_counter_ns()
            translate_pod(pod, DEFAULT_POLICY, "ml")
            samples.append((time.perf_counter_ns() - started) / 1000)
        samples.sort()
        results[name] = (statistics.median(samples), samples[int(len(samples) * 0.99)])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per wrk run (10)")
    parser.add_argument(
        "--quick", action="store_true", help="2-second runs and 20,000 requests for RSS"
    )
    args = parser.parse_args()
    duration = 2.0 if args.quick else args.duration
    need_tools()
    rows: list[tuple[str, int, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        write(issue(["localhost", "127.0.0.1"]), folder)
        bodies = []
        for name, body in encoded().items():
            path = folder / f"{name}.json"
            path.write_bytes(body)
            bodies.append(path)
        ours, go = "https://127.0.0.1:18443", "https://127.0.0.1:18453"
        # Both servers up at once (one idles while the other is measured), each run of one
        # followed by the same run of the other: the machine's drift falls on both alike.
        with webhook(folder, 18443) as server, go_peer(folder, 18453):
            for _ in range(2):  # warm-up
                wrk(f"{ours}/mutate", 8, 1, bodies)
                wrk(f"{go}/mutate", 8, 1, bodies)
            for concurrency in CONCURRENCY:
                for load in LOADS:
                    for name, url in (("webhook", ours), ("Go peer", go)):
                        result = wrk(f"{url}/mutate", concurrency, duration, bodies, load)
                        rows.append((f"{name} {load}", concurrency, result))
                result = wrk(f"{ours}/bare", concurrency, duration, bodies)
                rows.append(("same process /bare", concurrency, result))
            seconds = 5 if args.quick else 20
            steady = paced(18443, folder / "ca.crt", 100, seconds, bodies)
            steady_go = paced(18453, folder / "ca.crt", 100, seconds, bodies)
            rss_before = rss_mib(server.pid)
            target = 20_000 if args.quick else 100_000
            sent = 0
            while sent < target:
                sent += int(wrk(f"{ours}/mutate", 8, 5, bodies)["requests"])
            rss_after = rss_mib(server.pid)
    print(
        f"machine: {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}, servers on core 0,"
        f" wrk on core 1, TLS ECDSA P-256, keep-alive, {duration:g} s a run"
    )
    print(f"{'server':<26}{'conns':>6}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}")
    for name, concurrency, result in rows:
        print(
            f"{name:<26}{concurrency:>6}{result['rps']:>10.0f}{result['p50_us'] / 1000:>9.2f}{result['p99_us'] / 1000:>9.2f}{result['errors'] + result['non2xx']:>8.0f}"
        )
    by = {(name, c): r["rps"] for name, c, r in rows}
    for concurrency in CONCURRENCY:
        ratios = ", ".join(
            f"{load} {by[(f'webhook {load}', concurrency)] / by[(f'Go peer {load}', concurrency)]:.2f}"
            for load in LOADS
        )
        bare = by[("webhook repeating", concurrency)] / by[("same process /bare", concurrency)]
        print(f"c={concurrency}: webhook/Go peer {ratios}; webhook repeating/bare {bare:.2f}")
    print(
        f"at a steady 100 req/s ({steady['requests']:.0f} requests, Python client, repeating):"
        f" webhook p50 {steady['p50_ms']:.2f} ms, p99 {steady['p99_ms']:.2f} ms;"
        f" Go peer p50 {steady_go['p50_ms']:.2f} ms, p99 {steady_go['p99_ms']:.2f} ms"
    )
    print(
        f"webhook RSS: {rss_before:.1f} MiB after the runs above, {rss_after:.1f} MiB after {sent} more requests"
    )
    print(
        "in-process translate_pod (us): "
        + ", ".join(f"{n} median {m:.1f} p99 {p:.1f}" for n, (m, p) in translation_us().items())
    )
    import yaml

    from benchmarks.translate import dry_run_seconds, manifest_pod

    with tempfile.TemporaryDirectory() as temp:
        path = Path(temp) / "pods.yaml"
        path.write_text(yaml.safe_dump_all([manifest_pod(i) for i in range(1000)]))
        in_process, whole = dry_run_seconds(path)
    print(f"dry-run of 1,000 pods: {in_process:.2f} s in process, {whole:.2f} s as a new process")


if __name__ == "__main__":
    main()
