"""Multi-worker runs: worker topology, the line protocol, worker processes and their supervisor."""
