"""Runs: ``execute``, ``status``, ``wait``, ``retry``, ``cancel``, ``logs``, ``runs ls`` and ``runs rm``."""

from data_designer.slurm.services.context import classify_observed
from data_designer.slurm.services.runs._cancel import cancel_run
from data_designer.slurm.services.runs._execute import (
    BoundRun,
    InputSnapshot,
    RunTarget,
    bind_run,
    execute_run,
    passed_environment,
    source_mode,
    submit_plan,
    submitted_jobs,
)
from data_designer.slurm.services.runs._listing import list_runs, read_listed, remove_run, run_summary
from data_designer.slurm.services.runs._locate import layout_of, locate_run, named_shards
from data_designer.slurm.services.runs._log_follow import follow_logs
from data_designer.slurm.services.runs._logs import run_logs
from data_designer.slurm.services.runs._retry import retry_run
from data_designer.slurm.services.runs._status import is_finished, is_unavailable, run_status, status_of, wait_run

__all__ = [
    "BoundRun",
    "InputSnapshot",
    "RunTarget",
    "bind_run",
    "cancel_run",
    "classify_observed",
    "execute_run",
    "follow_logs",
    "is_finished",
    "is_unavailable",
    "layout_of",
    "list_runs",
    "locate_run",
    "named_shards",
    "passed_environment",
    "read_listed",
    "remove_run",
    "retry_run",
    "run_logs",
    "run_status",
    "run_summary",
    "source_mode",
    "status_of",
    "submit_plan",
    "submitted_jobs",
    "wait_run",
]
