"""``merge_status(snapshot, observation, now) -> MergeStatus | None``: the pure rule for the state of a run's merge.

The inputs are the newest merge job record and the merge manifest the reader found (``RunSnapshot.merge_job``,
``RunSnapshot.merge``) and the run's one scheduler observation, which asks about the merge job with the shards'
jobs. Only a valid merge manifest makes a merge ``succeeded``; a merge job that ended without one is ``failed``
(or ``cancelled``), and a job neither squeue nor sacct knows after the grace is ``failed`` too, so a killed merge
job never shows running forever. The table is in ``docs/architecture/status.md`` ("Merge"). No I/O.
"""

from __future__ import annotations

from datetime import datetime

from data_designer.slurm.contracts import (
    TERMINAL_TASK_STATES,
    MergeState,
    MergeStatus,
    Observation,
    SchedulerEvidence,
    TaskEvidence,
)
from data_designer.slurm.runtime.store import MergeFound, MergeJobSnapshot, RunSnapshot, parse_timestamp


def merge_status(
    snapshot: RunSnapshot,
    observation: Observation | None,
    now: datetime,
    *,
    grace_s: float,
    evidence: SchedulerEvidence,
    asked: bool = True,
) -> MergeStatus | None:
    """The run's merge (None when it has neither a merge job nor a merge). ``evidence`` and ``asked`` as for
    ``classify``: a cached observation after a failed ask cannot say that a job is still pending or running."""
    job, merge = snapshot.merge_job, snapshot.merge
    if job is None:
        return None if merge is None else _succeeded(None, merge, "merged in the foreground (no merge job)")  # M1
    if merge is not None and merge.written_at is not None and merge.written_at >= job.record.submitted_at:
        return _succeeded(job, merge)  # M2
    if observation is None:
        return _other("unknown", job, "Slurm was not asked and no observation is recorded")  # M10
    seen = next((t for t in observation.tasks if t.job_id == job.record.job_id), None)
    if seen is None:
        return _unseen(job, observation, now, grace_s)
    if seen.state in TERMINAL_TASK_STATES:
        return _ended(job, merge, seen, now, grace_s)
    if evidence == "cached" and asked:
        return _other("unknown", job, f"Slurm could not be asked; last seen {seen.raw_state}")  # M9
    if seen.state == "unknown":
        return _other("unknown", job, f"Slurm says {seen.raw_state}")  # M10
    return _other("running" if seen.state == "running" else "pending", job)  # M3


def _ended(
    job: MergeJobSnapshot, merge: MergeFound | None, seen: TaskEvidence, now: datetime, grace_s: float
) -> MergeStatus:
    if seen.state == "cancelled":
        return _other("cancelled", job, f"Slurm: {seen.raw_state}")  # M4
    if seen.state == "completed":
        if merge is not None:  # the job found this evidence merged before and reused that merge
            return _succeeded(job, merge, "the same evidence was merged before")  # M5
        ended_at = parse_timestamp(seen.end_time) if seen.end_time else None
        if ended_at is None or (now - ended_at).total_seconds() < grace_s:  # a shared filesystem may lag
            return _other("running", job, "the job completed; waiting for its merge manifest")  # M6
    code = f" (exit {seen.exit_code})" if seen.exit_code is not None else ""
    why = f": {job.last_error_line}" if job.last_error_line else ""
    return _other("failed", job, f"Slurm says {seen.raw_state}{code} and no merge manifest was written{why}")  # M7


def _unseen(job: MergeJobSnapshot, observation: Observation, now: datetime, grace_s: float) -> MergeStatus:
    if observation.sacct.status != "ok":
        return _other("unknown", job, f"no scheduler evidence (sacct {observation.sacct.status})")  # M10
    if (now - job.record.submitted_at).total_seconds() < grace_s or observation.accounting_lag:
        return _other("pending", job, "submitted; not yet in accounting")  # M3
    why = f": {job.last_error_line}" if job.last_error_line else ""
    return _other("failed", job, f"no evidence: neither squeue nor sacct knows job {job.record.job_id}{why}")  # M8


def _succeeded(job: MergeJobSnapshot | None, merge: MergeFound, message: str | None = None) -> MergeStatus:
    return MergeStatus(
        state="succeeded",
        job_id=job.record.job_id if job is not None else None,
        merge_dir=str(merge.directory),
        records=merge.manifest.records,
        complete=merge.manifest.complete,
        message=message,
    )


def _other(state: MergeState, job: MergeJobSnapshot, message: str | None = None) -> MergeStatus:
    """A merge job's state other than succeeded: where it writes is known only with ``--output``."""
    return MergeStatus(state=state, job_id=job.record.job_id, merge_dir=job.record.output, message=message)
