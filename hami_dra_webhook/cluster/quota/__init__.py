"""The GPU quota work (docs/quotas.md): every replica's watched view of the quotas, which
admission decides the gate from (view.py); one replica at a time by a Lease (lease.py) releases
held pods as they fit (work.py), a namespace at a time (namespace_queue.py, turn.py), counted
as the tools count them (usage.py); no claim grows under a released pod (claims.py)."""
