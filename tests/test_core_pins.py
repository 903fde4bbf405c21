"""Core behaviour that mutation testing (scripts/mutation) showed no other test pinned."""

from __future__ import annotations
