"""The ResourceClaimTemplates admission needs: ensured once per content (store.py: cache, single
flight, create or stamp), kept true by a watch (watch.py), collected when no pod uses them
(gc.py), created at a bounded rate per namespace (rate.py)."""
