"""The cluster side: what the project keeps in a live cluster, over the API port (kube/port.py),
one room per feature. Each room decides nothing the core does not: it reads, writes and
watches, and asks core/ what a pod, a quota or a move comes to.

- templates/: the ResourceClaimTemplates admission needs (ensured once, watched, collected);
- quota/: the GPU quota work (every replica's view of the quotas, one replica's releases);
- moves/: node and fleet moves between the legacy and the DRA pool (`migrate node|wave`);
- beside them, what several rooms share: state.py (the cluster's facts: capacity, card sizes,
  pools; the one reader every tool judges with), events.py, watched.py (list and watch),
  tasks.py (stopping a task without losing a cancel) and claim_owners.py (whose each claim of
  a node is, for the node monitor).
"""
