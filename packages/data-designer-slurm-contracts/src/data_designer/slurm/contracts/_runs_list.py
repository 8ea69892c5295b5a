"""What ``runs ls`` and ``runs rm`` return: the runs of a workspace, and what removing one did.

A listed run is classified exactly as ``status`` classifies it (``runtime.status.classify``), from its last
recorded observation or, with ``--refresh``, from one observation of every listed run. A directory under
``runs/`` that is not a readable run is listed too, never hidden: ``incomplete`` (no run record: ``execute``
did not finish, so nothing was submitted) or ``unreadable`` (a bad name, a corrupt run record, a plan that
cannot be read), with ``problem`` saying why.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field, NonNegativeInt

from data_designer.slurm.contracts._run_actions import CancelResult
from data_designer.slurm.contracts._run_status import RunState, SchedulerEvidence, ShardState
from data_designer.slurm.contracts._types import FROZEN

ListedRunState = RunState | Literal["incomplete", "unreadable"]
"""A run's state as ``status`` gives it, or why its directory cannot be classified."""

LISTED_RUN_STATES: tuple[str, ...] = (*get_args(RunState), "incomplete", "unreadable")

DEFAULT_RUNS_SHOWN = 20
"""``runs ls`` shows this many of the newest runs unless ``--all``."""


class RunSummary(BaseModel):
    """One run of the workspace, one row of ``runs ls``."""

    model_config = FROZEN

    run_id: str = Field(description="The run directory's name (a run id, unless state is unreadable).")
    run_dir: str
    name: str | None = Field(default=None, description="The run name (from the run id).")
    created_at: str | None = Field(default=None, description="From the run record, else the run id (ISO-8601 UTC).")
    state: ListedRunState
    records_done: NonNegativeInt | None = None
    records_total: NonNegativeInt | None = None
    shards_total: NonNegativeInt | None = None
    counts: dict[ShardState, NonNegativeInt] = Field(
        default_factory=dict, description="Shards per state (states with none omitted)."
    )
    evidence: SchedulerEvidence | None = Field(default=None, description="None for a run that was not classified.")
    observed_at: str | None = Field(default=None, description="When the scheduler evidence was taken.")
    problem: str | None = Field(default=None, description="Why the run is incomplete or unreadable.")


class RunsList(BaseModel):
    """The result of ``data-designer slurm runs ls``."""

    model_config = FROZEN

    workspace: str = Field(description="The workspace root whose runs/ was listed.")
    cluster: str = Field(description="The profile cluster whose workspace it is.")
    runs: tuple[RunSummary, ...] = Field(description="Newest first.")
    total: NonNegativeInt = Field(description="Every run directory in the workspace, shown or not.")
    hidden: NonNegativeInt = Field(description="Older runs not shown (without --all).")
    refreshed: bool = Field(description="Slurm was asked now (--refresh); otherwise the last recorded observations.")
    scheduler_calls: NonNegativeInt = Field(description="squeue/sacct calls made: 0 without --refresh, else 2.")
    scheduler_error: str | None = Field(default=None, description="Why Slurm could not be asked (with --refresh).")


class RunRemoved(BaseModel):
    """The result of ``data-designer slurm runs rm RUN``."""

    model_config = FROZEN

    run_id: str
    run_dir: str = Field(description="The directory that was removed.")
    state: ListedRunState = Field(description="The run's state when it was removed (live, unless not asked).")
    forced: bool
    cancelled: CancelResult | None = Field(
        default=None, description="What --force cancelled first (None: nothing was live)."
    )
    live_shards: tuple[NonNegativeInt, ...] = Field(
        default=(), description="Shards pending, running, stale or unknown when it was removed (cancelled first)."
    )
    scheduler_calls: NonNegativeInt = Field(default=0, description="squeue/sacct calls of the live status.")
    note: str | None = Field(default=None, description="What the removal could not check (an unreadable run).")
