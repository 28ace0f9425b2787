"""Multi-worker runs: worker topology, worker processes and their supervisor (their messages: `core.job_messages`)."""
