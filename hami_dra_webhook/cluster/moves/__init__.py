"""Moves between the legacy and the DRA pool: what a cluster holds (inventory.py), one node's
fail-closed, resumable move (node.py: canary.py, drain.py, device_cordons.py, words.py), a
fleet moved wave by wave (fleet.py) and the `migrate wave` use case around it (wave_case.py),
with the claims and Pending pods they read kept by watches (kept_lists.py)."""
