"""One observation of a whole run: both scheduler sources asked once, the result appended to the run directory.

``observe_run`` asks ``squeue`` and ``sacct`` (concurrently, each with a short timeout, ``sacct -D -S`` from the
run's creation minus a slack) about every job any submission recorded and the run's newest merge job
(``RunSnapshot.observed_job_ids``), and appends what it saw as ``observations/NNNN.json``. When neither source
answers, the last recorded observation is used instead (``evidence="cached"``), so a later process still shows the
last known state with its age; with none recorded, there is no scheduler evidence at all (``evidence="none"``).

``observe_runs`` does the same for many runs at once (``runs ls --refresh``): one ``squeue`` and one ``sacct`` over
the union of their jobs, split per run and appended to each run's ``observations/`` as ``observe_run`` would.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from data_designer.slurm.contracts import (
    Observation,
    SchedulerEvidence,
    SlurmExtensionError,
    TaskEvidence,
    UnavailableError,
)
from data_designer.slurm.contracts.records import ObservationRecord
from data_designer.slurm.runtime.scheduler import SlurmScheduler
from data_designer.slurm.runtime.store import Clock, RunSnapshot, parse_timestamp, record_observation, system_clock

OBSERVE_TIMEOUT_S = 15.0
"""Each of squeue and sacct gets this long: a hung slurmdbd must not hang ``status``."""
SINCE_SLACK = timedelta(minutes=10)
RECORD_UNCHANGED_EVERY = timedelta(minutes=10)
"""An observation that says exactly what the last recorded one said is appended again only after this long, so a
``wait`` polling a quiet run does not write megabytes a minute; the recorded age is then older, never younger."""
"""``sacct -S`` starts this long before the run was created (clock skew between login node and Slurm)."""


@dataclass(frozen=True)
class RunObservation:
    observation: Observation | None
    evidence: SchedulerEvidence
    calls: int
    detail: str | None = None
    """Why the scheduler could not be asked, when it could not."""
    asked: bool = True
    """False when nobody tried (``--no-refresh``): a cached observation then stands as it was."""


def observe_run(
    snapshot: RunSnapshot,
    scheduler: SlurmScheduler,
    *,
    clock: Clock = system_clock,
    timeout_s: float = OBSERVE_TIMEOUT_S,
    record: bool = True,
) -> RunObservation:
    """Observe every job of the run once (at most one squeue and one sacct), appending the observation."""
    job_ids = snapshot.observed_job_ids
    if not job_ids:
        return RunObservation(None, "none", 0, "no job was ever submitted")
    try:
        observation = scheduler.observe(job_ids, since=snapshot.run.created_at - SINCE_SLACK, timeout_s=timeout_s)
    except UnavailableError as exc:
        cached = snapshot.last_observation
        if cached is not None:
            return RunObservation(cached.observation, "cached", 2, exc.info.message)
        return RunObservation(None, "none", 2, exc.info.message)
    if record:
        _record(snapshot, observation, clock)
    return RunObservation(observation, "live", observation.calls)


def observe_runs(
    snapshots: Sequence[RunSnapshot],
    scheduler: SlurmScheduler,
    *,
    clock: Clock = system_clock,
    timeout_s: float = OBSERVE_TIMEOUT_S,
    record: bool = True,
) -> tuple[RunObservation, ...]:
    """Observe every job of every run in one go (at most one squeue and one sacct for all of them, ``sacct -S``
    from the oldest run's creation minus the slack), then give each run its part, appended to its
    ``observations/`` exactly as :func:`observe_run` appends its own. One result per snapshot, in order; a run
    without jobs gets no evidence and asks nothing. When neither source answers, each run falls back to its last
    recorded observation."""
    submitted = [snapshot for snapshot in snapshots if snapshot.observed_job_ids]
    if not submitted:
        return tuple(RunObservation(None, "none", 0, "no job was ever submitted") for _ in snapshots)
    job_ids = tuple(dict.fromkeys(job for snapshot in submitted for job in snapshot.observed_job_ids))
    since = min(snapshot.run.created_at for snapshot in submitted) - SINCE_SLACK
    try:
        observation = scheduler.observe(job_ids, since=since, timeout_s=timeout_s)
    except UnavailableError as exc:
        return tuple(_unanswered(snapshot, exc) for snapshot in snapshots)
    by_job: dict[str, list[tuple[int, TaskEvidence]]] = {}
    for position, task in enumerate(observation.tasks):
        by_job.setdefault(task.job_id, []).append((position, task))
    missing = set(observation.missing_job_ids)
    seen: list[RunObservation] = []
    for snapshot in snapshots:
        if not snapshot.observed_job_ids:
            seen.append(RunObservation(None, "none", 0, "no job was ever submitted"))
            continue
        part = _part_for(observation, snapshot.observed_job_ids, by_job, missing)
        if record:
            _record(snapshot, part, clock)
        seen.append(RunObservation(part, "live", observation.calls))
    return tuple(seen)


def _unanswered(snapshot: RunSnapshot, exc: UnavailableError) -> RunObservation:
    if not snapshot.observed_job_ids:
        return RunObservation(None, "none", 0, "no job was ever submitted")
    cached = snapshot.last_observation
    if cached is not None:
        return RunObservation(cached.observation, "cached", 2, exc.info.message)
    return RunObservation(None, "none", 2, exc.info.message)


def _part_for(
    observation: Observation,
    job_ids: tuple[str, ...],
    by_job: dict[str, list[tuple[int, TaskEvidence]]],
    missing: set[str],
) -> Observation:
    """What ``observation`` says about ``job_ids`` alone (``by_job``: its tasks by job id with their positions;
    ``missing``: its missing job ids): their tasks in its order and missing jobs, both sources' reports. The accounting lag is not kept per
    job, so a run keeps the flag only while one of its jobs has no sacct row (where the lag shows): a conservative
    reading, it can only keep an unseen task pending a little longer."""
    wanted = set(job_ids)
    tasks = tuple(task for _, task in sorted(item for job in wanted for item in by_job.get(job, ())))
    lag = observation.accounting_lag and bool(wanted - {t.job_id for t in tasks if t.source == "sacct"})
    return observation.model_copy(
        update={
            "tasks": tasks,
            "missing_job_ids": tuple(job for job in job_ids if job in missing),
            "accounting_lag": lag,
        }
    )


def _record(snapshot: RunSnapshot, observation: Observation, clock: Clock) -> None:
    if not _worth_recording(snapshot, observation):
        return
    # a workspace we may read but not write: the status is still right, only not remembered
    with contextlib.suppress(SlurmExtensionError):
        record = ObservationRecord(job_ids=snapshot.observed_job_ids, observation=observation)
        record_observation(snapshot.layout, record, clock=clock, operation="status.observe")


def _worth_recording(snapshot: RunSnapshot, observation: Observation) -> bool:
    last = snapshot.last_observation
    if last is None or snapshot.last_observation_at is None or last.job_ids != snapshot.observed_job_ids:
        return True
    fresh = parse_timestamp(observation.observed_at) - snapshot.last_observation_at < RECORD_UNCHANGED_EVERY
    return not (fresh and _evidence(last.observation) == _evidence(observation))


def _evidence(observation: Observation) -> tuple[object, ...]:
    """What an observation says, without when it said it."""
    tasks = tuple(
        (
            t.job_id,
            t.array_index,
            t.raw_state,
            t.exit_code,
            t.signal,
            t.reason,
            t.nodes,
            t.start_time,
            t.end_time,
            t.restarts,
            t.source,
        )
        for t in observation.tasks
    )
    sources = (observation.squeue.status, observation.sacct.status)
    return (tasks, sources, observation.missing_job_ids, observation.accounting_lag)


def cached_observation(snapshot: RunSnapshot) -> RunObservation:
    """The last recorded observation, without asking the scheduler (``status --no-refresh``)."""
    if snapshot.last_observation is None:
        return RunObservation(
            None, "none", 0, "no observation recorded yet (run status without --no-refresh)", asked=False
        )
    return RunObservation(snapshot.last_observation.observation, "cached", 0, asked=False)
