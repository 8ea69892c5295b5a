"""What ``retry`` and ``cancel`` return: which shards they acted on, what they submitted or cancelled."""

from __future__ import annotations

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._ranges import IndexRange
from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records import SetAsidePart, SubmittedJob


class RetryShardResult(BaseModel):
    """One shard a retry selected: its state before, why, and the record ranges its next attempt generates."""

    model_config = FROZEN

    shard: NonNegativeInt
    state: str
    reason: str | None = None
    ranges: tuple[IndexRange, ...] = Field(description="The missing record indices (what the new attempt generates).")
    records: NonNegativeInt = Field(description="How many records those ranges hold.")
    set_aside: tuple[SetAsidePart, ...] = Field(
        default=(), description="Its damaged parts, set aside (or, with --dry-run, to be set aside) by this retry."
    )


class RetryResult(BaseModel):
    """The result of ``data-designer slurm retry RUN``."""

    model_config = FROZEN

    run_id: str
    run_dir: str
    dry_run: bool
    generation: PositiveInt | None = Field(
        default=None, description="The retry generation this call took; None for a dry run or when nothing was due."
    )
    shards: tuple[RetryShardResult, ...] = Field(description="The shards selected (a dry run: those it would take).")
    jobs: tuple[SubmittedJob, ...] = Field(default=(), description="The jobs of this generation, as recorded.")
    sbatch_calls: NonNegativeInt = 0
    recovered: NonNegativeInt = Field(default=0, description="Jobs found by name instead of submitted again.")
    resumed: tuple[PositiveInt, ...] = Field(
        default=(), description="Earlier generations whose intent had no submission record and were completed."
    )
    stopped: tuple[str, ...] = Field(
        default=(), description="Tasks Slurm still ran for a stale shard, cancelled before the new attempt (job_task)."
    )
    skipped: dict[str, str] = Field(
        default_factory=dict, description="Shard -> why it was not selected (succeeded shards are not listed)."
    )
    intent: str | None = Field(default=None, description="The intent record this call wrote (retries/NNNN.json).")
    records: NonNegativeInt = Field(default=0, description="Records the selected shards will generate.")
    scheduler_calls: NonNegativeInt = 0


class CancelResult(BaseModel):
    """The result of ``data-designer slurm cancel RUN``."""

    model_config = FROZEN

    run_id: str
    run_dir: str
    whole_run: bool
    shards: tuple[NonNegativeInt, ...] = Field(description="The shards the cancellation covers.")
    targets: tuple[str, ...] = Field(description="What scancel was given (job ids, or job_task for single shards).")
    generations: tuple[NonNegativeInt, ...] = Field(description="Submission generations whose jobs were targeted.")
    already_ended: tuple[NonNegativeInt, ...] = Field(
        default=(), description="Selected shards with no live task (nothing to cancel)."
    )
    confirmed: bool = Field(description="Slurm was seen to have ended every targeted task.")
    record: str | None = Field(default=None, description="The cancellation record written (cancellations/NNNN.json).")
    scheduler_calls: NonNegativeInt = 0
    waited_s: float = Field(default=0.0, ge=0)
