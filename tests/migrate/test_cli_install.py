"""Getting the command line without a clone, as a user does: a wheel that builds and installs
with its console scripts (`hami-dra-webhook`, `kubectl-hami`, `kubectl_complete-hami`), the
kubectl plugin run by the real kubectl (`kubectl hami ...`, and its <TAB> through kubectl's
plugin completion), and the completion scripts of `completion bash|zsh|fish` run by the real
shells (Debian's; `./scripts/test` installs zsh and fish)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from hami_dra_webhook import __version__
from tests.support.pty_shell import Shell
from tests.support.tools import tool

REPO = Path(__file__).parents[2]
EXAMPLE = REPO / "examples" / "deployment.yaml"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The wheel built from this tree and installed into a new virtual environment, whose
    dependencies come from the test run's environment (a .pth line: nothing is downloaded).
    Yields its bin folder."""
    where = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(where / "dist"), str(REPO)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    wheels = list((where / "dist").glob("hami_dra_webhook-*.whl"))
    assert [w.name for w in wheels] == [f"hami_dra_webhook-{__version__}-py3-none-any.whl"]
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # The test run's packages, but not its editable install of this tree: the wheel's copy
    # must be the one imported.
    (Path(site) / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "-q", str(wheels[0])],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    yield venv / "bin"


def _run(command: list[str], bin_dir: Path, **options: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        command,
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        **options,
    )  # type: ignore[call-overload, no-any-return]


def test_the_wheel_says_where_it_comes_from(installed: Path) -> None:
    """Project-URLs, classifiers, the licence and the typing marker, in the wheel's METADATA as
    the installed package reads it."""
    program = (
        "import json, importlib.metadata as m, importlib.resources as r;"
        " d = m.metadata('hami-dra-webhook');"
        " print(json.dumps({'urls': d.get_all('Project-URL'), 'classifiers': d.get_all('Classifier'),"
        " 'license': d['License-Expression'],"
        " 'typed': r.files('hami_dra_webhook').joinpath('py.typed').is_file()}))"
    )
    done = _run([str(installed / "python"), "-c", program], installed)
    found = json.loads(done.stdout)
    assert "Source, https://github.com/Project-HAMi/hami-dra-webhook" in found["urls"]
    assert "Issues, https://github.com/Project-HAMi/hami-dra-webhook/issues" in found["urls"]
    assert "Programming Language :: Python :: 3.11" in found["classifiers"]
    assert (found["license"], found["typed"]) == ("Apache-2.0", True)


def test_the_wheel_installs_a_working_command(installed: Path) -> None:
    done = _run(["hami-dra-webhook", "version"], installed)
    assert (done.returncode, done.stdout) == (0, f"hami-dra-webhook {__version__}\n"), done.stderr
    where = _run(
        [
            str(installed / "python"),
            "-c",
            "import hami_dra_webhook; print(hami_dra_webhook.__file__)",
        ],
        installed,
    )
    assert "site-packages" in where.stdout and str(REPO) not in where.stdout, where
    scan = _run(["hami-dra-webhook", "scan", str(EXAMPLE), "-o", "json"], installed)
    assert scan.returncode == 0 and '"outcome": "converted"' in scan.stdout, scan.stderr
    serve = _run(["hami-dra-webhook", "serve", "--help"], installed)
    assert serve.returncode == 0 and "--port" in serve.stdout


def test_kubectl_runs_it_as_a_plugin(installed: Path) -> None:
    kubectl = tool("kubectl")
    done = _run([kubectl, "hami", "version"], installed)
    assert (done.returncode, done.stdout) == (0, f"kubectl hami {__version__}\n"), done.stderr
    scan = _run([kubectl, "hami", "scan", str(EXAMPLE)], installed)
    assert scan.returncode == 0 and "converted" in scan.stdout, scan.stderr
    usage = _run([kubectl, "hami", "scan", "-o", "xml"], installed)
    assert usage.returncode == 64 and usage.stderr.startswith("usage: kubectl hami scan")
    # kubectl's flags before the command, as kubectl users write them (issue 65)
    scoped = _run([kubectl, "hami", "-n", "team-a", "scan", str(EXAMPLE), "-o", "json"], installed)
    assert scoped.returncode == 0 and '"namespace": "team-a"' in scoped.stdout, scoped.stderr
    helped = _run([kubectl, "hami", "scan", "--help"], installed)
    assert "  kubectl hami scan --cluster -A" in helped.stdout, helped.stdout
    assert "hami-dra-webhook scan" not in helped.stdout
    # kubectl's own <TAB> for plugins asks kubectl_complete-hami
    tab = _run([kubectl, "__complete", "hami", "mig"], installed)
    said = "migrate\tmove a live cluster from legacy HAMi to DRA in stages"
    assert tab.stdout.splitlines()[0].startswith(said), tab  # the description passes through
    assert tab.stdout.splitlines()[1] == ":4", tab
    tab = _run([kubectl, "__completeNoDesc", "hami", "mig"], installed)  # kubectl drops it
    assert tab.stdout.splitlines()[:2] == ["migrate", ":4"], tab
    tab = _run([kubectl, "__complete", "hami", "migrate", "node", "n1", "--to", ""], installed)
    assert tab.stdout.splitlines()[:3] == ["dra", "legacy", ":4"], tab


def test_bash_completes_commands_options_choices_and_files(installed: Path, tmp_path: Path) -> None:
    script = _run(["hami-dra-webhook", "completion", "bash"], installed).stdout

    def shown(*words: str) -> list[str]:
        """COMPREPLY after a <TAB> at the end of `words`: what bash lists."""
        array = " ".join(f"'{w}'" for w in ("hami-dra-webhook", *words))
        program = (
            f"{script}\nCOMP_WORDS=({array}); COMP_CWORD={len(words)};"
            ' _hami_dra_webhook; printf "%s\\n" "${COMPREPLY[@]}"'
        )
        done = _run(["bash", "-c", program], installed)
        assert done.returncode == 0 and not done.stderr, done.stderr
        return [line for line in done.stdout.splitlines() if line]

    def tab(*words: str) -> list[str]:
        return [line.split("  (")[0].strip() for line in shown(*words)]

    assert tab("mig") == ["migrate"]  # one left: the word alone, which bash inserts
    assert tab("migrate", "") == ["node", "status", "wave"]
    # several left: each beside its description, in one column, as cobra's scripts show them
    assert shown("migrate", "")[0] == "node    (move one node between the pools…)"
    assert shown("gc", "--d") == ["--dry-run"]
    assert tab("scan", "--all") == ["--all-namespaces"]
    assert tab("scan", "-o", "") == ["text", "json", "yaml", "markdown", "csv"]
    assert tab("completion", "") == ["bash", "zsh", "fish"]
    for name in ("apps.yaml", "apps-gpu.yaml", "other.yaml"):
        (tmp_path / name).write_text("")
    assert sorted(tab("dry-run", f"{tmp_path}/app")) == [
        f"{tmp_path}/apps-gpu.yaml",
        f"{tmp_path}/apps.yaml",
    ]
    # --context: the kubeconfig's contexts, as kubectl completes them; never file names
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncontexts:\n- {name: prod, context: {cluster: c}}\n"
        "- {name: staging, context: {cluster: c}}\nclusters:\n- {name: c, cluster: {server:"
        " 'https://127.0.0.1:1'}}\n"
    )
    assert tab("check", "--kubeconfig", str(config), "--context", "") == ["prod", "staging"]
    assert tab("check", "--kubeconfig", str(config), "--context", "st") == ["staging"]
    assert tab("check", "--kubeconfig", str(tmp_path / "none"), "--context", "") == []


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_complete_through_the_same_answers(installed: Path, shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.fail(f"{shell} is not installed: ./scripts/test installs it from Debian")
    script = _run(["hami-dra-webhook", "completion", shell], installed).stdout
    if shell == "zsh":
        # compdef and compadd are the completion system's; here they only record their words
        # and, when given (-d), what is shown for them
        program = (
            "compdef() { :; }\ncompadd() {\n  local -a d\n  while [[ $1 != -- ]]; do\n"
            '    [[ $1 == -d ]] && { d=("${(@P)2}"); shift; }\n    shift\n  done\n  shift\n'
            '  print -l -- "$@"; (( ${#d} )) && print -l -- "${d[@]}"\n}\n'
            f"{script}\nwords=(hami-dra-webhook migrate ''); CURRENT=3; _hami-dra-webhook"
        )
        done = _run(["zsh", "-f", "-c", program], installed)
    else:
        done = _run(
            ["fish", "--no-config", "-c", f"{script}\ncomplete -C 'hami-dra-webhook migrate '"],
            installed,
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines[:3]] == ["node", "status", "wave"], done
    if shell == "zsh":
        assert lines[3] == "node    -- move one node between the pools…", done
    else:  # fish takes a tab as the start of the description, and shows it
        assert lines[0] == "node\tmove one node between the pools…", done


@pytest.fixture
def shell_env(installed: Path, tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    path = f"{installed}{os.pathsep}{os.environ['PATH']}"
    return {"PATH": path, "HOME": str(home), "TERM": "xterm", "LANG": "C.UTF-8",
            "INPUTRC": "/dev/null", "ZDOTDIR": str(home), "XDG_CONFIG_HOME": str(home)}  # fmt: skip


def _open_shell(argv: list[str], env: dict[str, str], where: Path) -> Shell:
    for name in argv[:1]:
        if shutil.which(name) is None:
            pytest.fail(f"{name} is not installed: ./scripts/test installs it from Debian")
    return Shell(argv, env, where)


def test_bash_on_a_terminal_completes_flag_values_after_an_equals_sign(
    shell_env: dict[str, str], tmp_path: Path
) -> None:
    """bash splits `--dry-run=` at the `=`: the first script offered nothing there, the form
    docs/cli.md writes."""
    shell = _open_shell(["bash", "--norc", "--noprofile", "-i"], shell_env, tmp_path)
    try:
        shell.type("PS1='$ '; source <(hami-dra-webhook completion bash)\r")
        shell.mark("ready")
        shell.type("hami-dra-webhook gc --dry-run=\t\t")
        shown = shell.read_until(r"client\s+none\s+server")
        assert "--dry-run=" in shown
        shell.mark("next")
        shell.type("hami-dra-webhook scan --output=j\t")
        assert "scan --output=json" in shell.read_until(r"--output=json")
        shell.mark("next")
        shell.type("hami-dra-webhook mig\t")
        assert "hami-dra-webhook migrate" in shell.read_until("migrate")
        shell.mark("next")
        shell.type("hami-dra-webhook migrate \t\t")  # bash lists at the second <TAB>
        shell.read_until(r"node +\(move one node between the pools…\)")
    finally:
        shell.close()


def _completes_a_command_and_a_flag_value(shell: Shell) -> None:
    """At the first <TAB>: `mig` becomes `migrate`, `--output=j` becomes `--output=json`."""
    shell.mark("ready")
    shell.type("hami-dra-webhook mig\t")
    assert "hami-dra-webhook migrate" in shell.read_until("migrate")
    shell.mark("next")
    shell.type("hami-dra-webhook scan --output=j\t")
    assert "scan --output=json" in shell.read_until(r"--output=json")


def test_zsh_installed_as_documented_completes_at_the_first_tab(
    installed: Path, shell_env: dict[str, str], tmp_path: Path
) -> None:
    """`completion zsh > "${fpath[1]}/_hami-dra-webhook"`: zsh autoloads it at the first <TAB>,
    which offered nothing until the second."""
    functions = tmp_path / "functions"
    functions.mkdir()
    script = _run(["hami-dra-webhook", "completion", "zsh"], installed).stdout
    (functions / "_hami-dra-webhook").write_text(script)
    shell = _open_shell(["zsh", "-f", "-i"], shell_env, tmp_path)
    try:
        shell.type(f"PS1='$ '; fpath=({functions} $fpath); autoload -U compinit; compinit -u -D\r")
        _completes_a_command_and_a_flag_value(shell)
        shell.mark("next")
        shell.type("hami-dra-webhook migrate \t")  # zsh lists at the first <TAB>
        shell.read_until(r"status +-- pools, free capacity")
    finally:
        shell.close()


def test_fish_on_a_terminal_completes(shell_env: dict[str, str], tmp_path: Path) -> None:
    shell = _open_shell(["fish", "--no-config", "-i"], shell_env, tmp_path)
    try:
        shell.type("hami-dra-webhook completion fish | source\r")
        _completes_a_command_and_a_flag_value(shell)
        shell.mark("next")
        shell.type("hami-dra-webhook migrate \t")  # fish's pager, descriptions in parentheses
        shell.read_until(r"node +\(move one node between")
    finally:
        shell.close()
