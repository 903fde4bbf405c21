"""Plain values and formats every other part of the core builds on: types, quantities, durations,
CEL literals, JSON patches, the walk over a pod's containers."""
