"""Small value types shared by the translation modules."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

JsonObject = dict[str, Any]
ContainerList = Literal["initContainers", "containers"]
MAX_WARNING_LENGTH = 120


class ContainerRef(NamedTuple):
    """Where a container sits in the pod spec (a tuple: one is made per container per pod)."""

    list_name: ContainerList
    position: int
    name: str  # as written; "" when the manifest gives none (or not a string)

    @property
    def shown(self) -> str:
        """The container's name wherever one is written (messages, rows, the converted-from
        annotation): its name, or its place when it has none. An operator that names the
        container itself (KServe's kserve-container) has its name filled in before this
        (files/embedded.py); a pod without one is refused by kube-apiserver after admission."""
        return self.name or f"#{self.position + 1} (no name)"

    @property
    def label(self) -> str:
        kind = "init container" if self.list_name == "initContainers" else "container"
        return f'{kind} "{self.name}"' if self.name else f"{kind} {self.shown}"


class NotConvertible(Exception):
    """Raised inside the translation: the pod cannot be converted exactly; `code` is a 4xx HTTP
    status, `message` says why. `translate_pod` turns it into a `Refusal` decision."""

    def __init__(self, message: str, code: int = 422, *, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason  # a stable tag for tooling, e.g. "no-memory-sizes"


class Attention(str):
    """A warning that asks the user to act (a value that can never be placed, a type that
    matches nothing, a resource left for another plugin): the webhook sends it like any other;
    `scan` marks its workload *needs attention* for it."""

    __slots__ = ()


def short_warning(text: str) -> str:
    """Admission warnings longer than 120 characters are cut by kube-apiserver; cut them here."""
    if len(text) <= MAX_WARNING_LENGTH:
        return text
    return text[: MAX_WARNING_LENGTH - 3] + "..."
