"""What the scheduler adapter submits and what it observes, as values.

A :class:`SubmissionUnit` is produced by the planner and submitted by the runtime: one batch
script and one or more array chunks, each with its own job name, array spec and index offset
(``MaxArraySize`` caps the array *index*, not the task count, so large runs are chunked and each
chunk's indices start at 0). Every array index maps to a (shard, attempt).

An :class:`Observation` is normalised evidence per array task from at most one ``squeue`` and
one ``sacct`` call, with the status of each source stated explicitly: a failing, hanging or
disabled ``sacct`` is never read as success.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt, model_validator
from pydantic_core import PydanticCustomError

from data_designer.slurm.contracts._types import FROZEN, PrintableText

TaskState = Literal[
    "pending",
    "running",
    "completed",
    "failed",
    "cancelled",
    "timeout",
    "out_of_memory",
    "node_fail",
    "preempted",
    "requeued",
    "unknown",
]
"""The closed vocabulary of array-task states."""

TERMINAL_TASK_STATES: frozenset[str] = frozenset(
    {"completed", "failed", "cancelled", "timeout", "out_of_memory", "node_fail", "preempted"}
)

EvidenceSource = Literal["squeue", "sacct"]
SourceStatus = Literal["ok", "failed", "timed_out", "disabled", "not_run"]
"""How one scheduler source answered: ``disabled`` is accounting switched off on the cluster."""


class ArrayTaskBinding(BaseModel):
    """One array index of a chunk and the (shard, attempt) it runs."""

    model_config = FROZEN

    index: NonNegativeInt
    shard: NonNegativeInt
    attempt: PositiveInt


class SubmissionChunk(BaseModel):
    """One ``sbatch --array`` submission: its job name, array spec and index bindings."""

    model_config = FROZEN

    job_name: PrintableText
    chunk: NonNegativeInt = Field(description="The plan's chunk number (its ChunkLayout).")
    generation: NonNegativeInt = Field(default=0, description="0: the run's own submission; n: retry generation n.")
    array_spec: PrintableText = Field(description="The --array value, e.g. '0-9%4'.")
    index_offset: NonNegativeInt = Field(description="Global position of array index 0 among the unit's tasks.")
    tasks: tuple[ArrayTaskBinding, ...] = Field(strict=False, min_length=1)
    after: PrintableText | None = Field(
        default=None,
        description="The job name of an earlier chunk of the unit that must end first (sbatch "
        "--dependency=afterany:<its job id>): a retry spanning several chunks runs them one after another, so its "
        "array throttle holds for the retry as a whole.",
    )

    @model_validator(mode="after")
    def _unique_indices(self) -> SubmissionChunk:
        indices = [t.index for t in self.tasks]
        if len(set(indices)) != len(indices):
            raise PydanticCustomError("duplicate_index", "array indices repeat", {"hint": "bind each index once"})
        return self


class SubmissionUnit(BaseModel):
    """A batch script and its chunks; submitted chunk by chunk, idempotently (found again by job name)."""

    model_config = FROZEN

    script: str = Field(description="The batch script text (its #SBATCH lines come from validated values).")
    sbatch_args: tuple[PrintableText, ...] = Field(
        default=(), strict=False, description="Extra sbatch argv bound at submission (run directory, output paths)."
    )
    environment: tuple[PrintableText, ...] = Field(
        default=(),
        strict=False,
        description="Names of the variables sbatch receives from the submitting environment and exports to the job "
        "(--export names them); their values travel only in sbatch's environment.",
    )
    chunks: tuple[SubmissionChunk, ...] = Field(strict=False, min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> SubmissionUnit:
        names = [c.job_name for c in self.chunks]
        if len(set(names)) != len(names):
            raise PydanticCustomError("duplicate_job_name", "job names repeat", {"hint": "name each chunk uniquely"})
        for position, chunk in enumerate(self.chunks):
            if chunk.after is not None and chunk.after not in names[:position]:
                raise PydanticCustomError(
                    "unknown_dependency",
                    "chunk {name} waits for {after}, which is not an earlier chunk of the unit",
                    {"name": chunk.job_name, "after": chunk.after, "hint": "name an earlier chunk's job name"},
                )
        return self


class SubmittedChunk(BaseModel):
    """A chunk the scheduler accepted: its job id, and whether it was found again instead of submitted."""

    model_config = FROZEN

    job_name: str
    job_id: str
    cluster: str | None = None
    recovered: bool = False


class SubmissionResult(BaseModel):
    """The outcome of submitting a unit: every chunk's job id, how many were new."""

    model_config = FROZEN

    chunks: tuple[SubmittedChunk, ...]
    submitted: NonNegativeInt
    recovered: NonNegativeInt
    sbatch_calls: NonNegativeInt


class TaskEvidence(BaseModel):
    """What the scheduler said about one array task (or a plain job), normalised."""

    model_config = FROZEN

    job_id: str = Field(description="The array master job id (or the plain job id).")
    array_index: NonNegativeInt | None = None
    job_name: str | None = None
    state: TaskState
    raw_state: str = Field(description="The state as Slurm printed it, e.g. 'CANCELLED by 0'.")
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    nodes: str | None = None
    submit_time: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    restarts: NonNegativeInt = 0
    source: EvidenceSource
    observed_at: str = Field(description="ISO-8601 UTC time of the observation (from the injected clock).")


class SourceReport(BaseModel):
    """How one source answered during an observation."""

    model_config = FROZEN

    source: EvidenceSource
    status: SourceStatus
    detail: str | None = None
    duration_s: float = 0.0


class Observation(BaseModel):
    """One batched look at all jobs of a run: per-task evidence plus the health of each source."""

    model_config = FROZEN

    observed_at: str
    tasks: tuple[TaskEvidence, ...]
    squeue: SourceReport
    sacct: SourceReport
    missing_job_ids: tuple[str, ...] = Field(
        default=(), description="Jobs neither source reported (gone from squeue, not yet or no longer in sacct)."
    )
    accounting_lag: bool = Field(default=False, description="sacct still shows an 'allocation' placeholder row.")
    calls: NonNegativeInt

    @property
    def scheduler_reachable(self) -> bool:
        return self.squeue.status == "ok" or self.sacct.status == "ok"
