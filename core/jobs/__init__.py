"""One way to run a job: `run_job(config, store, options) -> RecordedRun`, recorded as it trains and diagnosed.

The CLI, the window, compare, sweep and autotune all train through this
service; none of them assembles recorder, diagnosis, the run's standard hooks
(`RunHooks`) and `run_training` itself.
"""

from core.jobs.listener import JobListener, RecordedRun
from core.jobs.run_hooks import RunHooks
from core.jobs.service import PLAIN, JobOptions, record_unrun, run_job, run_label

__all__ = ["PLAIN", "JobListener", "JobOptions", "RecordedRun", "RunHooks", "record_unrun", "run_job", "run_label"]
