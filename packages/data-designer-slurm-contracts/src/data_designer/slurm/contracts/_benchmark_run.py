"""Results of ``benchmark run``, ``benchmark status`` and ``benchmark ls``: per child, what was done and how it stands."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._benchmark_plan import CaseValue
from data_designer.slurm.contracts._errors import ErrorInfo
from data_designer.slurm.contracts._plan import PlanWarning
from data_designer.slurm.contracts._run_status import SchedulerEvidence
from data_designer.slurm.contracts._runs_list import ListedRunState, RunSummary
from data_designer.slurm.contracts._types import FROZEN

ChildOutcome = Literal["submitted", "resumed", "already_submitted", "held", "failed", "not_attempted"]
"""What ``benchmark run`` did with one child: submitted now (a new run), resumed (a run bound earlier whose
submission was never recorded, completed now), already submitted (evidence on record: nothing done), held (bound
by another live ``benchmark run``: left to it), failed (``sbatch`` or the run refused it: the error says why), not
attempted (after a failure, so the dependency lanes stay whole; the next ``benchmark run`` submits it)."""

CHILD_OUTCOMES: tuple[ChildOutcome, ...] = get_args(ChildOutcome)


class ChildSubmission(BaseModel):
    """One child in the result of ``benchmark run``."""

    model_config = FROZEN

    index: NonNegativeInt
    child_id: str
    case: tuple[CaseValue, ...] = Field(strict=False)
    repeat: NonNegativeInt
    outcome: ChildOutcome
    run_id: str | None = Field(default=None, description="The child's run (None while it was never bound).")
    lane: NonNegativeInt = Field(description="Its dependency lane: index modulo max_concurrent_children.")
    jobs: tuple[str, ...] = Field(default=(), strict=False, description="Job ids of the child's first submission.")
    after: tuple[str, ...] = Field(
        default=(), strict=False, description="Jobs its submission waits for (afterany): its lane's predecessor."
    )
    detail: str | None = Field(default=None, description="Why it failed, is held or was not attempted.")


class BenchmarkRunResult(BaseModel):
    """The result of ``data-designer slurm benchmark run BENCH``."""

    model_config = FROZEN

    benchmark_id: str = Field(description="<name>-<digest prefix>: the same input gives the same id.")
    benchmark_dir: str
    name: str
    digest: str
    cluster: str
    benchmark_file: str
    created: bool = Field(description="The benchmark record was written by this call (else it was reused).")
    exclusive: bool
    max_concurrent_children: PositiveInt
    children: tuple[ChildSubmission, ...] = Field(strict=False)
    counts: dict[ChildOutcome, NonNegativeInt] = Field(description="Children per outcome (outcomes with none omitted).")
    sbatch_calls: NonNegativeInt
    scheduler_lookups: NonNegativeInt = Field(
        description="squeue/sacct calls besides sbatch (lane predecessors and runs to resume, asked once)."
    )
    facts_asked: bool = Field(description="The cluster facts were asked from Slurm (else the workspace cache).")
    error: ErrorInfo | None = Field(
        default=None, description="The first failure; the command exits with its code after printing the table."
    )
    warnings: tuple[PlanWarning, ...] = Field(default=(), description="Plan warnings over all children (each once).")


ChildState = ListedRunState | Literal["not_bound"]
"""A child's state: its run's state as ``status`` classifies it (``runs ls`` lists it the same way, ``incomplete`` or
``unreadable`` for a run directory that cannot be classified), or ``not_bound`` before ``benchmark run`` bound it."""


class BenchmarkChildStatus(BaseModel):
    """One child in ``benchmark status``."""

    model_config = FROZEN

    index: NonNegativeInt
    child_id: str
    case: tuple[CaseValue, ...] = Field(strict=False)
    repeat: NonNegativeInt
    state: ChildState
    reason: str | None = Field(
        default=None, description="Why the child is not succeeded, as 'status' gives its shard's reason."
    )
    run_id: str | None = None
    run: RunSummary | None = Field(default=None, description="The child run as 'runs ls' shows it.")


class BenchmarkStatus(BaseModel):
    """The result of ``data-designer slurm benchmark status BENCH``."""

    model_config = FROZEN

    benchmark_id: str
    benchmark_dir: str
    name: str
    digest: str
    cluster: str
    benchmark_file: str
    exclusive: bool
    max_concurrent_children: PositiveInt
    children: tuple[BenchmarkChildStatus, ...] = Field(strict=False)
    counts: dict[ChildState, NonNegativeInt] = Field(description="Children per state (states with none omitted).")
    complete: bool = Field(description="Every child succeeded.")
    evidence: SchedulerEvidence = Field(description="live: asked now; cached: the runs' last observations; none.")
    scheduler_calls: NonNegativeInt
    scheduler_error: str | None = None


class BenchmarkSummary(BaseModel):
    """One benchmark of the workspace, one row of ``benchmark ls`` (from records only, no scheduler)."""

    model_config = FROZEN

    benchmark_id: str
    benchmark_dir: str
    name: str | None = None
    created_at: str | None = None
    benchmark_file: str | None = None
    children: NonNegativeInt | None = None
    bound: NonNegativeInt | None = Field(default=None, description="Children bound to a run.")
    problem: str | None = Field(default=None, description="Why the directory cannot be read as a benchmark.")


class BenchmarkList(BaseModel):
    """The result of ``data-designer slurm benchmark ls``."""

    model_config = FROZEN

    workspace: str
    cluster: str
    benchmarks: tuple[BenchmarkSummary, ...] = Field(strict=False, description="Newest first.")
