"""Device-config texts the tests share: one copy each."""

from __future__ import annotations


def every_vendor(hygon: str = "", webhook: str = "") -> str:
    """A device-config.yaml that converts every vendor beyond NVIDIA: `hygon` adds to Hygon's
    settings (e.g. `computeUnits: [120]`), `webhook` is a line of hamiDraWebhook's own (e.g.
    `deviceMemorySizes: [80Gi]`)."""
    hygon_settings = "convert: true" + (f", {hygon}" if hygon else "")
    webhook_line = f"  {webhook}\n" if webhook else ""
    return (
        "hamiDraWebhook:\n"
        f"{webhook_line}"
        "  vendors:\n"
        f"    hygon: {{{hygon_settings}}}\n"
        "    ascend: {convert: true}\n"
        "    amd: {convert: true}\n"
        "    awsNeuron: {convert: true}\n"
    )


EVERY_VENDOR = every_vendor()
