"""charts/hami-dra-webhook/README.md, generated from values.schema.json (every property's type
and description) and values.yaml (its default), so that the two cannot drift. A property
without a description is an error.

    python scripts/chart_readme.py           # write it
    python scripts/chart_readme.py --check   # exit 1 when it is not current (the tests run this)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "hami-dra-webhook"
README = CHART / "README.md"
MAX_DEFAULT = 60  # characters of a default shown in the table; longer ones: see values.yaml

HEADER = """\
# hami-dra-webhook Helm chart

Installs hami-dra-webhook (the admission webhook that runs HAMi legacy GPU-sharing manifests
unchanged on Kubernetes DRA) and the HAMi DRA driver, which publishes each GPU with `memory`
and `cores` capacity and enforces the share inside the container with HAMi-core.

```sh
helm install hami-dra-webhook charts/hami-dra-webhook -n hami-system --create-namespace \\
  --set webhook.image.registry=<your-registry> --set webhook.image.repository=hami-dra-webhook
helm test hami-dra-webhook -n hami-system
```

Kubernetes {kube}. Chart {version}, image {app}. The documentation is in `docs/` of the
repository: install, upgrade and uninstall (`docs/install.md`), the staged migration from
legacy HAMi (`docs/migration.md`), operations with the alerts and their runbooks
(`docs/operations.md`).

This file is generated from `values.schema.json` and `values.yaml` by
`scripts/chart_readme.py`; the tests fail when it is not current.

## Values

| key | type | default | description |
|---|---|---|---|
"""


def rows(schema: dict[str, Any], values: Any, path: str, missing: list[str]) -> list[str]:
    found = []
    for key, node in (schema.get("properties") or {}).items():
        name = f"{path}.{key}" if path else key
        value = values.get(key) if isinstance(values, dict) else None
        description = node.get("description")
        if not description:
            missing.append(name)
        kind = node.get("type", "")
        kind = " or ".join(kind) if isinstance(kind, list) else kind
        if "enum" in node:
            kind = " \\| ".join(f"`{v}`" for v in node["enum"])
        children = node.get("properties")
        if children:
            found.append(f"| `{name}` | object | | {cell(description or '')} |")
            found += rows(node, value or {}, name, missing)
        else:
            found.append(f"| `{name}` | {kind} | {default(value)} | {cell(description or '')} |")
    return found


def default(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, str) and "\n" in value:
        return "(see values.yaml)"
    if len(text) > MAX_DEFAULT:
        return "(see values.yaml)"
    return f"`{cell(text)}`" if text != "" else '`""`'


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> tuple[str, list[str]]:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    missing: list[str] = []
    table = rows(schema, values, "", missing)
    header = HEADER.format(
        kube=chart["kubeVersion"], version=chart["version"], app=chart["appVersion"]
    )
    return header + "\n".join(table) + "\n", missing


def main(argv: list[str]) -> int:
    text, missing = render()
    for name in missing:
        print(f"error: values.schema.json: {name} has no description", file=sys.stderr)
    if missing:
        return 1
    if "--check" in argv:
        if not README.is_file() or README.read_text() != text:
            print(
                f"error: {README} is not current: run python scripts/chart_readme.py",
                file=sys.stderr,
            )
            return 1
        return 0
    README.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
