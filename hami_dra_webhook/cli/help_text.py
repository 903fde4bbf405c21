"""What every `--help` ends with: examples of the command, as a user types them. And the two
rules of a command line that argparse does not keep by itself: a bare command (`hami-dra-webhook`,
`hami-dra-webhook migrate`) prints its help, and an unknown flag is said with the usage of the
command it was given to, not the top-level one."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any, TextIO

PROGRAM = "hami-dra-webhook"
EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (
        "hami-dra-webhook scan ./manifests",
        "hami-dra-webhook dry-run examples/pod.yaml",
        "hami-dra-webhook check --before-install",
    ),
    "serve": (
        "hami-dra-webhook serve                       # HTTPS on :8443, a self-signed certificate",
        "hami-dra-webhook serve --cert-file tls.crt --key-file tls.key --kubeconfig ~/.kube/config",
    ),
    "dry-run": (
        "hami-dra-webhook dry-run examples/pod.yaml",
        "helm template my-chart | hami-dra-webhook dry-run -",
        "hami-dra-webhook dry-run --diff ./manifests",
        "hami-dra-webhook dry-run -o json examples/deployment.yaml | jq '.items[].outcome'",
    ),
    "scan": (
        "hami-dra-webhook scan ./manifests",
        "hami-dra-webhook scan --cluster -A",
        "hami-dra-webhook scan ./manifests -o markdown > gpu-migration.md",
        "hami-dra-webhook scan --cluster -n team-a -o csv",
    ),
    "convert": (
        "hami-dra-webhook convert --diff ./manifests",
        "hami-dra-webhook convert --out converted ./manifests",
        "hami-dra-webhook convert --in-place deploy/",
        "kustomize build . | hami-dra-webhook convert -",
    ),
    "check": (
        "hami-dra-webhook check --before-install",
        "hami-dra-webhook check",
        "hami-dra-webhook check -n gpu-system --release gpu-webhook -o json",
    ),
    "certs": (
        "hami-dra-webhook certs --service hami-dra-webhook --namespace hami-system --out-dir tls",
    ),
    "gc": (
        "hami-dra-webhook gc --dry-run",
        "hami-dra-webhook gc --grace 1h -n team-a",
    ),
    "migrate": (
        "hami-dra-webhook migrate status",
        "hami-dra-webhook migrate node gpu-node-7 --to dra --dry-run",
        "hami-dra-webhook migrate wave --to dra --pool legacy --batch 5",
    ),
    "migrate status": (
        "hami-dra-webhook migrate status",
        "hami-dra-webhook migrate status -o json",
    ),
    "migrate node": (
        "hami-dra-webhook migrate node gpu-node-7 --to dra --dry-run",
        "hami-dra-webhook migrate node gpu-node-7 --to dra",
        "hami-dra-webhook migrate node gpu-node-7 --to legacy --timeout 20m",
    ),
    "migrate wave": (
        "hami-dra-webhook migrate wave --to dra --pool legacy --dry-run",
        "hami-dra-webhook migrate wave --to dra --selector gpu=a100 --batch 5 --max-unavailable 2",
        "hami-dra-webhook migrate wave --to legacy --pool dra --batch 10",
    ),
    "monitor": (
        "hami-dra-webhook monitor --once",
        "hami-dra-webhook monitor --once -o json --claims-root /usr/local/vgpu/claims",
        "hami-dra-webhook monitor --node-name gpu-1 --no-feedback",
    ),
    "version": ("hami-dra-webhook version", "hami-dra-webhook version -o json"),
    "completion": (
        "source <(hami-dra-webhook completion bash)",
        'hami-dra-webhook completion zsh > "${fpath[1]}/_hami-dra-webhook"',
        "hami-dra-webhook completion fish | source",
    ),
}


class _Formatter(argparse.HelpFormatter):
    """argparse's wrapping, never inside a name at its hyphen (`--max-unavailable`,
    `hami-dra-webhook`: argparse's textwrap breaks there); the examples keep their lines."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:\n"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.fill(
            text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False
        )

    def _split_lines(self, text: str, width: int) -> list[str]:
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.wrap(text, width, break_on_hyphens=False)


def finish(parser: argparse.ArgumentParser, path: str = "", prog: str = PROGRAM) -> None:
    """Examples under every command's help (as `prog` is typed: `kubectl hami scan` for the
    kubectl plugin); bare commands print their help; each parser remembers itself
    (`command_parser`) so that an unknown flag is said with its usage."""
    examples = EXAMPLES.get(path, ())
    parser.formatter_class = _Formatter
    if examples:
        typed = (prog + x[len(PROGRAM) :] if x.startswith(PROGRAM) else x for x in examples)
        parser.epilog = "examples:\n" + "\n".join(f"  {line}" for line in typed)
    parser.set_defaults(command_parser=parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.required = False
            parser.set_defaults(run=_help_of(parser))
            for name, sub in action.choices.items():
                finish(sub, f"{path} {name}".strip(), prog)


def _help_of(parser: argparse.ArgumentParser) -> Any:
    def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
        stdout.write(parser.format_help())
        return 0

    return run
