"""A run as its records show it, read once (``read_run``): the input of the pure classifier and of later readers.

Values only: every field holds a record that read ``RecordOk`` (and matched this run), or None; records that
exist but prove nothing are named in ``problems``. Nothing here asks the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from data_designer.slurm.contracts import ExecutionPlan, PartDamage, ShardPlan
from data_designer.slurm.contracts.records import (
    AttemptRecord,
    CancellationRecord,
    ClaimOwner,
    HeartbeatRecord,
    IndexRange,
    ObservationRecord,
    OutputManifest,
    RequestEvidence,
    ResumeClaim,
    RetryIntent,
    RunRecord,
    ServerSamplesRecord,
    SetAsidePart,
    StatusRecord,
    SubmissionRecord,
    WorkerProgress,
)
from data_designer.slurm.planner import count_indices
from data_designer.slurm.runtime.store._layout import RunLayout
from data_designer.slurm.runtime.store._merges import MergeFound, MergeJobSnapshot


@dataclass(frozen=True)
class AttemptSnapshot:
    """One attempt directory of a shard."""

    number: int
    claim: ClaimOwner | None = None
    record: AttemptRecord | None = None
    heartbeat: HeartbeatRecord | None = None
    heartbeat_written_at: datetime | None = None
    progress: WorkerProgress | None = None
    progress_written_at: datetime | None = None
    manifest: OutputManifest | None = None
    status: StatusRecord | None = None
    last_log_line: str | None = None
    server_metrics: ServerSamplesRecord | None = None
    """The replicas' ``/metrics`` samples, read only with ``attempt_records`` (None: not read, missing or invalid)."""
    problems: tuple[str, ...] = ()
    damaged: tuple[PartDamage, ...] = ()
    """Parts of its valid manifest that failed the cheap check (``store.check_part``) when it was read."""
    requests: RequestEvidence | None = None
    """The worker's request evidence, read only with ``attempt_records`` (None: not read, missing or invalid)."""


@dataclass(frozen=True)
class TaskRef:
    """One submitted array task that runs a shard: which job, chunk and retry generation, when submitted."""

    job_id: str
    job_name: str
    array_task: int
    chunk: int
    generation: int
    submitted_at: datetime


@dataclass(frozen=True)
class BatchError:
    """The end of Slurm's own stderr of a task (``slurm-<job>_<task>.err``): what the batch script said."""

    job_name: str
    array_task: int
    path: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class ShardSnapshot:
    """One shard: its plan, its attempts (ascending), the tasks submitted for it, and what its manifests cover."""

    plan: ShardPlan
    attempts: tuple[AttemptSnapshot, ...]
    tasks: tuple[TaskRef, ...]
    kept: dict[int, tuple[IndexRange, ...]]
    """Attempt number -> the ranges its valid manifest contributes (the lowest attempt keeps an index twice claimed)."""
    overlap: tuple[IndexRange, ...]
    missing: tuple[IndexRange, ...]
    batch_errors: tuple[BatchError, ...] = ()
    damaged: tuple[PartDamage, ...] = ()
    """Damaged parts no retry has set aside yet (their ranges are in ``missing``)."""
    set_aside: tuple[SetAsidePart, ...] = ()
    """Parts of its attempts that retries set aside (their ranges count for nothing, wherever the files are)."""
    lost: dict[int, tuple[IndexRange, ...]] = field(default_factory=dict)
    """Attempt number -> ranges of its damaged or set-aside parts: what coverage left out of ``kept``."""

    @property
    def records_done(self) -> int:
        if len(self.kept) == 1:  # the usual shard: one attempt's ranges
            return count_indices(next(iter(self.kept.values())))
        return count_indices(item for ranges in self.kept.values() for item in ranges)


@dataclass(frozen=True)
class RetrySnapshot:
    """One retry generation: its intent, who took it over since, and whether its submission was recorded."""

    intent: RetryIntent
    written_at: datetime | None
    resumes: tuple[ResumeClaim, ...] = ()
    """Valid resume claims, ascending: processes that took over the intent because no submission was recorded."""
    resumed_at: datetime | None = None
    """When the newest resume claim was written."""
    submitted: bool = False
    """A submission record of this generation exists (its jobs, or the scheduler's refusal)."""

    @property
    def generation(self) -> int:
        return self.intent.generation

    @property
    def held_since(self) -> datetime | None:
        """When its current holder took it: the newest resume claim, else the intent."""
        return self.resumed_at or self.written_at

    @property
    def shards(self) -> frozenset[int]:
        return frozenset(item.shard for item in self.intent.shards)


@dataclass(frozen=True)
class CancellationSnapshot:
    record: CancellationRecord
    written_at: datetime | None

    def covers(self, shard: int) -> bool:
        return self.record.whole_run or shard in self.record.shards


@dataclass(frozen=True)
class ReadStats:
    files_read: int
    directories_listed: int
    parts_checked: int = 0
    """Parts of valid manifests whose existence and size were checked (one ``lstat`` each)."""


@dataclass(frozen=True)
class RunSnapshot:
    """Every record of one run, read once."""

    layout: RunLayout
    run: RunRecord
    plan: ExecutionPlan
    submissions: tuple[SubmissionRecord, ...]
    shards: tuple[ShardSnapshot, ...]
    read_at: datetime
    last_observation: ObservationRecord | None = None
    last_observation_at: datetime | None = None
    problems: tuple[str, ...] = ()
    stats: ReadStats = field(default_factory=lambda: ReadStats(0, 0))
    retries: tuple[RetrySnapshot, ...] = ()
    """Every readable retry intent, by generation."""
    cancellations: tuple[CancellationSnapshot, ...] = ()
    """Every readable cancellation record, oldest first."""
    highest_retry_file: int = 0
    """The highest ``retries/NNNN.json`` number present, readable or not (a corrupt intent still holds its number)."""
    merge_jobs: tuple[MergeJobSnapshot, ...] = ()
    """Every readable merge job record (``merge/jobs/NNNN.json``), ascending."""
    merge: MergeFound | None = None
    """The merge the newest merge job writes (its ``--output``), else the newest numbered merge; valid manifests only."""

    @property
    def merge_job(self) -> MergeJobSnapshot | None:
        """The newest merge job: the one whose state ``status`` shows."""
        return self.merge_jobs[-1] if self.merge_jobs else None

    @property
    def observed_job_ids(self) -> tuple[str, ...]:
        """What one observation of the run asks about: every submitted job and the newest merge job."""
        job = self.merge_job
        if job is None or job.record.job_id in self.job_ids:
            return self.job_ids
        return (*self.job_ids, job.record.job_id)

    @property
    def job_ids(self) -> tuple[str, ...]:
        """Every job id any submission recorded, in first-seen order."""
        seen: dict[str, None] = {}
        for submission in self.submissions:
            for job in submission.jobs:
                seen.setdefault(job.job_id, None)
        return tuple(seen)

    @property
    def submission_error(self) -> str | None:
        """The scheduler's refusal that still stands: the error of the latest submission, unless a later one went
        through. Shards no job holds are not_submitted with it (jobs accepted before the refusal are recorded)."""
        error: str | None = None
        for submission in self.submissions:
            if submission.generation == 0:  # a refused retry leaves the run's own submission standing
                error = submission.error
        return error

    @property
    def next_generation(self) -> int:
        """The retry generation a new retry takes: one past every intent and every recorded job's generation."""
        seen = [r.generation for r in self.retries] + [self.highest_retry_file]
        seen += [s.generation for s in self.submissions]
        seen += [job.generation for s in self.submissions for job in s.jobs]
        return max(seen, default=0) + 1

    def unsubmitted_retries(self) -> tuple[RetrySnapshot, ...]:
        """Retry generations whose intent has no submission record yet (being submitted now, or orphaned)."""
        return tuple(r for r in self.retries if not r.submitted)
