"""`hami-dra-webhook certs`: a CA and serving certificate for the webhook's Service."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from hami_dra_webhook.cli import exit_codes


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "certs",
        help="write ca.crt, tls.crt and tls.key for the webhook's Service",
        description="Issue a CA and a serving certificate (ECDSA P-256) whose names are the"
        " Service's DNS names, and print the base64 caBundle for the webhook configuration.",
    )
    parser.add_argument("--service", required=True, help="the webhook's Service name")
    parser.add_argument("--namespace", required=True, help="the Service's namespace")
    parser.add_argument("--out-dir", required=True, type=Path, help="folder for the three files")
    parser.add_argument("--days", type=int, default=365, help="validity in days (365)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    from hami_dra_webhook.certs.pki import issue, service_names, write

    if args.days < 1:
        stderr.write("error: --days must be at least 1\n")
        return exit_codes.USAGE
    bundle = issue(service_names(args.service, args.namespace), days=args.days)
    try:
        paths = write(bundle, args.out_dir)
    except OSError as error:
        stderr.write(f"error: cannot write into {args.out_dir}: {error}\n")
        return exit_codes.UNREADABLE
    stderr.write("wrote " + ", ".join(str(p) for p in paths) + "\ncaBundle:\n")
    stdout.write(bundle.ca_bundle + "\n")
    return exit_codes.OK
