"""Reading the HAMi device-config.yaml the policy comes from (its file, not its rules)."""

from __future__ import annotations

from pathlib import Path

from hami_dra_webhook.core.settings.policy import (
    DEFAULT_POLICY,
    LoadedPolicy,
    PolicyError,
    policy_from_yaml,
)


def read_policy(path: str | None) -> LoadedPolicy:
    """The policy in `path`, or the defaults when no file is given; the caller reports the
    loaded policy's `warning` its own way (stderr for a command, the log for the server)."""
    if path is None:
        return LoadedPolicy(policy=DEFAULT_POLICY, ignored_keys=())
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyError(f"{path}: cannot read: {error}") from error
    return policy_from_yaml(text, path)
