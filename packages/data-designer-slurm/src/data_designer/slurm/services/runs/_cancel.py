"""``cancel``: stop every job of every generation that holds the selected shards, confirm it, record who did it.

The run is read once (``store.read_run``); the jobs are every submitted task of the selected shards, in every
generation (the run's own submission, Slurm's requeues of it, every retry), plus the jobs no submission record names
yet, found by job name (``unrecorded_tasks``): a retry intent's whose submission is not recorded, and the run's own
when it has no submission record (``execute`` lost sbatch's reply, or stopped before recording it). One observation
tells which of them are still live; only those are given to ``scancel`` (``job_task`` for single shards, whole jobs
for the whole run), and the cancellation is confirmed by observing until none is pending or running. Then
``cancellations/NNNN.json`` is appended (who, when, which shards, whether it was confirmed): nobody writes into
another attempt's directory. ``status`` then shows those shards ``cancelled`` with reason ``cancelled_by_user``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from data_designer.slurm.contracts import (
    TERMINAL_TASK_STATES,
    CancelResult,
    SlurmExtensionError,
    UnavailableError,
)
from data_designer.slurm.contracts.records import CancellationRecord
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.status import SINCE_SLACK
from data_designer.slurm.runtime.store import (
    Clock,
    RunSnapshot,
    read_run,
    record_cancellation,
    requester_from_environment,
    system_clock,
)
from data_designer.slurm.services.context import CountingRunner, ServiceContext
from data_designer.slurm.services.runs._locate import layout_of, named_shards

_OPERATION = "cancel"
DEFAULT_CONFIRM_TIMEOUT_S = 60.0
"""How long ``cancel`` observes until Slurm shows every targeted task ended."""


def cancel_run(
    run: str | Path,
    *,
    shards: Sequence[int] | None = None,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    confirm_timeout_s: float = DEFAULT_CONFIRM_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> CancelResult:
    """Cancel ``shards`` of ``run`` (every shard when None) across every generation, and record it.

    Errors: an unknown shard exit 2, no such run exit 3, Slurm that cannot be asked or refuses ``scancel`` exit 5
    (nothing is recorded then). A cancellation Slurm accepted but did not confirm within ``confirm_timeout_s`` is
    recorded with ``confirmed: false`` and returned (the CLI exits 5).
    """
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock)
    layout = layout_of(run, ctx)
    counting = CountingRunner(ctx.runner)
    scheduler = SlurmScheduler(counting, clock=clock, sleep=sleep, concurrent=counting.concurrent)
    snapshot = read_run(layout, clock=clock)
    selected = _selection(snapshot, shards)
    tasks = _targets(snapshot, selected, scheduler)
    job_ids = sorted({job for job, _ in tasks}, key=int)
    live: set[tuple[str, int]] = set()
    if job_ids:
        seen = scheduler.observe(job_ids, since=snapshot.run.created_at - SINCE_SLACK)
        live = {
            (t.job_id, t.array_index)
            for t in seen.tasks
            if t.array_index is not None and t.state not in TERMINAL_TASK_STATES and (t.job_id, t.array_index) in tasks
        }
    live_shards = sorted({tasks[key][0] for key in live})
    already = tuple(shard for shard in selected if shard not in live_shards)
    whole = shards is None
    if not live:
        return _result(layout.run_dir, snapshot, selected, whole, (), (), already, True, None, counting.calls)
    targets, by_job = _scancel_targets(live, whole)
    started = time.monotonic()
    confirmed = True
    try:
        scheduler.cancel(
            sorted(by_job, key=int) if whole else [],
            array_indices=None if whole else by_job,
            confirm_timeout_s=confirm_timeout_s,
        )
    except UnavailableError as exc:
        if exc.info.code != "cancel_unconfirmed":
            raise _located(exc, snapshot) from None
        confirmed = False
    generations = tuple(sorted({tasks[key][1] for key in live}))
    record = CancellationRecord(
        requested_by=requester_from_environment(ctx.submitting_environment, clock=clock),
        whole_run=whole,
        shards=tuple(selected),
        targets=targets,
        generations=generations,
        confirmed=confirmed,
    )
    appended = record_cancellation(layout, record, clock=clock, operation=_OPERATION)
    return _result(
        layout.run_dir,
        snapshot,
        selected,
        whole,
        targets,
        generations,
        already,
        confirmed,
        str(appended.path),
        counting.calls,
        waited_s=time.monotonic() - started,
    )


def _selection(snapshot: RunSnapshot, shards: Sequence[int] | None) -> tuple[int, ...]:
    if shards is None:
        return tuple(shard.plan.shard for shard in snapshot.shards)
    return tuple(named_shards(snapshot, shards, operation=_OPERATION))


def _targets(
    snapshot: RunSnapshot, selected: Sequence[int], scheduler: SlurmScheduler
) -> dict[tuple[str, int], tuple[int, int]]:
    """(job id, array index) -> (shard, generation), for every task of every generation that runs a selected shard, plus
    the tasks Slurm holds that no submission record names yet (:func:`unrecorded_tasks`)."""
    chosen = set(selected)
    tasks = {
        (ref.job_id, ref.array_task): (shard.plan.shard, ref.generation)
        for shard in snapshot.shards
        if shard.plan.shard in chosen
        for ref in shard.tasks
    }
    tasks.update(unrecorded_tasks(snapshot, scheduler, shards=chosen))
    return tasks


def unrecorded_tasks(
    snapshot: RunSnapshot, scheduler: SlurmScheduler, *, shards: Collection[int] | None = None
) -> dict[tuple[str, int], tuple[int, int]]:
    """(job id, array index) -> (shard, generation) of the tasks Slurm holds by job name that no submission record
    names: those of retry intents whose submission is not recorded yet, and the run's own when it has no readable
    submission record of generation 0 (``execute`` lost sbatch's reply, or stopped before recording it). One
    ``find_submitted`` (one squeue, one sacct; :class:`UnavailableError` unless both answer) when there is any such
    unit, no call otherwise. ``shards``: only the tasks of those shards (default every shard)."""
    chosen = set(shards) if shards is not None else {shard.plan.shard for shard in snapshot.shards}
    units = [
        (retry.generation, retry.intent.unit, retry.intent.requested_by.time)
        for retry in snapshot.unsubmitted_retries()
        if retry.shards & chosen
    ]
    if not own_submission_recorded(snapshot):
        units.append((0, snapshot.run.unit, snapshot.run.created_at))
    if not units:
        return {}
    names = [chunk.job_name for _, unit, _ in units for chunk in unit.chunks]
    found = scheduler.find_submitted(names, since=min(since for _, _, since in units) - SINCE_SLACK)
    tasks: dict[tuple[str, int], tuple[int, int]] = {}
    for generation, unit, _ in units:
        for chunk in unit.chunks:
            job = found.get(chunk.job_name)
            if job is None:
                continue
            for task in chunk.tasks:
                if task.shard in chosen:
                    tasks[(job.job_id, task.index)] = (task.shard, generation)
    return tasks


def own_submission_recorded(snapshot: RunSnapshot) -> bool:
    """A readable submission record of generation 0 (the run's own: its jobs, or the scheduler's refusal) exists."""
    return any(submission.generation == 0 for submission in snapshot.submissions)


def _scancel_targets(live: set[tuple[str, int]], whole: bool) -> tuple[tuple[str, ...], dict[str, list[int]]]:
    by_job: dict[str, list[int]] = {}
    for job, index in sorted(live, key=lambda key: (int(key[0]), key[1])):
        by_job.setdefault(job, []).append(index)
    if whole:
        return tuple(sorted(by_job, key=int)), by_job
    return tuple(
        f"{job}_{index}" for job, indices in sorted(by_job.items(), key=lambda i: int(i[0])) for index in indices
    ), by_job


def _located(exc: SlurmExtensionError, snapshot: RunSnapshot) -> SlurmExtensionError:
    hint = f"{exc.info.hint or 'retry when Slurm answers'}; nothing was recorded, cancel again"
    return exc.with_context(f"run {snapshot.run.run_id}", hint=hint)


def _result(
    run_dir: Path,
    snapshot: RunSnapshot,
    selected: Sequence[int],
    whole: bool,
    targets: tuple[str, ...],
    generations: tuple[int, ...],
    already: tuple[int, ...],
    confirmed: bool,
    record: str | None,
    calls: int,
    *,
    waited_s: float = 0.0,
) -> CancelResult:
    return CancelResult(
        run_id=snapshot.run.run_id,
        run_dir=str(run_dir),
        whole_run=whole,
        shards=tuple(selected),
        targets=targets,
        generations=generations,
        already_ended=already,
        confirmed=confirmed,
        record=record,
        scheduler_calls=calls,
        waited_s=max(0.0, waited_s),
    )
