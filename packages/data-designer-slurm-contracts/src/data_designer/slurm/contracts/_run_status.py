"""What ``status`` and ``wait`` return: the classified state of a run, its shards and their attempts.

Classification is one pure function of a run snapshot, one scheduler observation and a time
(``runtime.status.classify``); its rules are the table in ``docs/architecture/status.md``. Success is
never guessed: a shard is ``succeeded`` only when valid result manifests of its attempts cover its whole
record range.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._part_damage import PartDamage
from data_designer.slurm.contracts._ranges import IndexRange
from data_designer.slurm.contracts._scheduler import SourceReport
from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records import FinalStatus, Phase

ShardState = Literal[
    "pending",
    "running",
    "succeeded",
    "partial",
    "failed",
    "cancelled",
    "missing",
    "stale",
    "scheduler_inconsistent",
    "unknown",
    "not_submitted",
    "damaged",
]
"""The state of one shard (``docs/architecture/status.md``)."""

SHARD_STATES: tuple[ShardState, ...] = get_args(ShardState)

ACTIVE_SHARD_STATES: frozenset[str] = frozenset({"pending", "running"})
"""States in which a shard may still change without anyone acting."""

AttemptState = Literal[
    "pending",
    "running",
    "succeeded",
    "partial",
    "failed",
    "cancelled",
    "stale",
    "scheduler_inconsistent",
    "unknown",
    "superseded",
]
"""The state of one attempt; ``superseded``: a late task that lost its claim to another attempt (exit 4)."""

RunState = Literal[
    "not_submitted",
    "pending",
    "running",
    "succeeded",
    "partial",
    "failed",
    "cancelled",
    "damaged",
    "unknown",
    "attention",
]
"""The run as a whole: ``damaged`` means every shard ended and some published parts are lost or corrupt (``retry``
regenerates them); ``attention`` means no shard is active but some are missing, stale or inconsistent."""

SchedulerEvidence = Literal["live", "cached", "none"]
"""Where the scheduler evidence came from: asked now, the last recorded observation, or nothing at all."""

MergeState = Literal["none", "pending", "running", "succeeded", "failed", "cancelled", "unknown"]
"""The state of the run's merge (``docs/architecture/status.md``, "Merge"): ``succeeded`` only with a valid merge
manifest; a merge job that Slurm no longer shows and that left none is ``failed``, never running forever. ``none``
is for consumers that need a value for a run without merges (``RunStatus.merge`` is then None)."""


class AttemptStatus(BaseModel):
    """One attempt of a shard, as its records and the scheduler show it."""

    model_config = FROZEN

    attempt: PositiveInt
    state: AttemptState
    job_id: str | None = None
    array_task: NonNegativeInt | None = None
    restart_count: NonNegativeInt | None = Field(
        default=None, description="From the claim; None when the claim was not read (a complete attempt) or is bad."
    )
    scheduler_state: str | None = Field(default=None, description="The task's state as Slurm printed it, if seen.")
    final_status: FinalStatus | None = Field(default=None, description="From status.json, when written.")
    exit_code: int | None = None
    message: str | None = None
    phase: Phase | None = Field(default=None, description="From the heartbeat, while the attempt runs.")
    heartbeat_age_s: NonNegativeFloat | None = None
    records_done: NonNegativeInt | None = Field(default=None, description="From progress.json, while it runs.")
    records_published: NonNegativeInt | None = Field(default=None, description="From a valid result manifest.")
    problems: tuple[str, ...] = Field(default=(), description="Records that exist but prove nothing, and why.")


class ShardStatus(BaseModel):
    """One shard: its state, how many of its records exist, why it is not succeeded."""

    model_config = FROZEN

    shard: NonNegativeInt
    state: ShardState
    records_total: PositiveInt
    records_done: NonNegativeInt = Field(
        description="Records in valid manifests; while running, plus the live attempt's progress."
    )
    missing: tuple[IndexRange, ...] = Field(description="Record-index ranges no valid manifest covers.")
    reason: str | None = Field(default=None, description="Why the shard is not succeeded (a final status or rule).")
    message: str | None = None
    last_log_line: str | None = None
    phase: Phase | None = None
    job_id: str | None = Field(default=None, description="The job of the shard's latest attempt or submission.")
    array_task: NonNegativeInt | None = None
    attempts: tuple[AttemptStatus, ...] = ()
    anomalies: tuple[str, ...] = Field(default=(), description="Evidence that disagrees but does not change the state.")
    damaged: tuple[PartDamage, ...] = Field(
        default=(),
        description="Published parts that are missing, of another size or (--verify) other bytes than their "
        "manifest says, and not yet set aside by a retry: their ranges are in 'missing'.",
    )


class MergeStatus(BaseModel):
    """The run's merge: the newest merge job's state from Slurm's evidence and the merge manifest it leaves."""

    model_config = FROZEN

    state: MergeState
    job_id: str | None = Field(default=None, description="The newest merge job (merge --as-job); None: a local merge.")
    merge_dir: str | None = Field(default=None, description="Where the merge is (or will be, with --output).")
    records: NonNegativeInt | None = Field(default=None, description="Records in the merge, from its manifest.")
    complete: bool | None = Field(default=None, description="Every record of the run is in it (manifest).")
    message: str | None = None


class VerifySummary(BaseModel):
    """What ``status --verify`` hashed: every published part of every contributing attempt."""

    model_config = FROZEN

    parts: NonNegativeInt
    bytes: NonNegativeInt
    seconds: NonNegativeFloat
    workers: PositiveInt
    damaged: NonNegativeInt = Field(description="Parts whose size or sha256 is not their manifest's.")


class DegradedSource(BaseModel):
    """A scheduler source that did not answer while the other did: what its absence hides, and from which shards."""

    model_config = FROZEN

    source: Literal["squeue", "sacct"]
    status: str = Field(description="How it answered (failed, timed_out, disabled).")
    detail: str | None = None
    hides: str = Field(description="What cannot be seen without it.")
    shards: tuple[NonNegativeInt, ...] = Field(
        default=(), description="Shards whose state depends on it: they are unknown until it answers."
    )


class RunStatus(BaseModel):
    """The result of ``data-designer slurm status RUN`` (and of every ``wait`` poll)."""

    model_config = FROZEN

    run_id: str
    run_dir: str
    name: str
    cluster: str
    state: RunState
    records_total: PositiveInt
    records_done: NonNegativeInt
    shards_total: PositiveInt
    counts: dict[ShardState, NonNegativeInt] = Field(description="Shards per state (states with none omitted).")
    shards: tuple[ShardStatus, ...] = Field(description="Every shard, in shard order.")
    checked_at: str = Field(description="When this status was computed (ISO-8601 UTC).")
    evidence: SchedulerEvidence
    observed_at: str | None = Field(default=None, description="When the scheduler evidence was taken.")
    evidence_age_s: NonNegativeFloat | None = Field(default=None, description="checked_at minus observed_at.")
    squeue: SourceReport | None = None
    sacct: SourceReport | None = None
    scheduler_calls: NonNegativeInt = Field(description="squeue/sacct calls this status made (0 with --no-refresh).")
    scheduler_error: str | None = Field(
        default=None, description="Why Slurm could not be asked now (the evidence is then the last recorded one)."
    )
    files_read: NonNegativeInt = Field(default=0, description="Record and log files read from the run directory.")
    eta_s: NonNegativeFloat | None = Field(default=None, description="From the progress rate; None when unknown.")
    records_per_s: NonNegativeFloat | None = None
    submission_error: str | None = Field(default=None, description="The scheduler's refusal of the first sbatch.")
    merge: MergeStatus | None = Field(default=None, description="The run's merge, when it has one (merge/ exists).")
    degraded: tuple[DegradedSource, ...] = Field(
        default=(), description="Sources that failed while the other answered (the evidence is live but partial)."
    )
    verify: VerifySummary | None = Field(default=None, description="Set by status --verify: what was hashed.")

    @property
    def succeeded(self) -> bool:
        return self.state == "succeeded"


class WaitResult(BaseModel):
    """The result of ``data-designer slurm wait RUN``: the last status and how the wait ended."""

    model_config = FROZEN

    outcome: Literal["succeeded", "ended", "timeout", "unavailable"]
    polls: PositiveInt
    waited_s: NonNegativeFloat
    status: RunStatus
