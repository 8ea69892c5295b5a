"""Runs: ``execute``, ``status``, ``wait``, ``retry``, ``cancel``, ``logs``, ``runs ls`` and ``runs rm``.

Each name is imported from its module on first use (PEP 562): ``merge`` needs ``locate_run``, not ``execute``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_ROOMS: dict[str, str] = {
    "classify_observed": "data_designer.slurm.services.context",
    "cancel_run": "data_designer.slurm.services.runs._cancel",
    "BoundRun": "data_designer.slurm.services.runs._execute",
    "InputSnapshot": "data_designer.slurm.services.runs._execute",
    "RunTarget": "data_designer.slurm.services.runs._execute",
    "bind_run": "data_designer.slurm.services.runs._execute",
    "execute_run": "data_designer.slurm.services.runs._execute",
    "passed_environment": "data_designer.slurm.services.runs._execute",
    "source_mode": "data_designer.slurm.services.runs._execute",
    "submit_plan": "data_designer.slurm.services.runs._execute",
    "submitted_jobs": "data_designer.slurm.services.runs._execute",
    "list_runs": "data_designer.slurm.services.runs._listing",
    "read_listed": "data_designer.slurm.services.runs._listing",
    "remove_run": "data_designer.slurm.services.runs._listing",
    "run_summary": "data_designer.slurm.services.runs._listing",
    "layout_of": "data_designer.slurm.services.runs._locate",
    "locate_run": "data_designer.slurm.services.runs._locate",
    "named_shards": "data_designer.slurm.services.runs._locate",
    "follow_logs": "data_designer.slurm.services.runs._log_follow",
    "run_logs": "data_designer.slurm.services.runs._logs",
    "retry_run": "data_designer.slurm.services.runs._retry",
    "is_finished": "data_designer.slurm.services.runs._status",
    "is_unavailable": "data_designer.slurm.services.runs._status",
    "run_status": "data_designer.slurm.services.runs._status",
    "status_of": "data_designer.slurm.services.runs._status",
    "wait_run": "data_designer.slurm.services.runs._status",
}
"""Each public name and the module it is imported from."""


def __getattr__(name: str) -> Any:
    module = _ROOMS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
