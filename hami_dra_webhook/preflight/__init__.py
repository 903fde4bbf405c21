"""`check`: a preflight of a live cluster. `snapshot.gather` reads the cluster once (the only
module here that does I/O); `judge` turns the snapshot into report lines with pure checks."""
