"""``runs ls`` and ``runs rm``: the runs of a workspace, and removing one safely.

``list_runs`` lists ``<workspace>/runs/`` by name (``store.list_run_dirs``, newest first), reads the runs it shows
with the one run reader (``store.read_run``) and classifies each as ``status`` does: from its last recorded
observation (no scheduler call), or with ``refresh`` from one observation of all of them (``status.observe_runs``:
one ``squeue``, one ``sacct``, each run's part appended to its ``observations/``). A directory that is not a
readable run is listed as ``incomplete`` or ``unreadable`` with why, never hidden and never failing the listing.

``remove_run`` removes only run directories directly inside the selected workspace's ``runs/``. It decides by a live
status (the run read once, one observation, classified as ``status`` does) and refuses a run with live shards unless
``force``, which cancels them first (``runs.cancel_run``). A run without a submission record is first looked up in
Slurm by its job names (``runs.unrecorded_tasks``, the lookup ``execute --run-id`` makes) so that jobs whose
submission was never recorded are refused or cancelled too, never orphaned. ``store.remove_run_dir`` renames the
directory atomically to a hidden name in ``runs/`` (which readers skip) before its tree is deleted, so a concurrent
reader sees the whole run or no run.
"""

from __future__ import annotations

import multiprocessing
import os
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from data_designer.slurm.contracts import (
    DEFAULT_RUNS_SHOWN,
    TERMINAL_TASK_STATES,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    RunRemoved,
    RunsList,
    RunStatus,
    RunSummary,
    SlurmExtensionError,
    UnavailableError,
)
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.status import (
    SINCE_SLACK,
    Rules,
    RunObservation,
    cached_observation,
    observe_run,
    observe_runs,
)
from data_designer.slurm.runtime.store import (
    Clock,
    RunDirectory,
    RunLayout,
    RunSnapshot,
    format_timestamp,
    list_run_dirs,
    read_run,
    remove_run_dir,
    system_clock,
)
from data_designer.slurm.services.context import CountingRunner, ServiceContext, classify_observed, collector_paused
from data_designer.slurm.services.runs._cancel import cancel_run, own_submission_recorded, unrecorded_tasks
from data_designer.slurm.services.runs._locate import layout_of
from data_designer.slurm.services.runs._status import is_unavailable

LIVE_SHARD_STATES = frozenset({"pending", "running", "stale", "unknown"})
"""Shards ``runs rm`` will not remove without ``--force``: Slurm may still run them (or could not say)."""
_NAMED_SHARDS = 10


def list_runs(
    *,
    all: bool = False,  # the CLI option's name (--all)
    refresh: bool = False,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    rules: Rules | None = None,
) -> RunsList:
    """The runs in the selected profile cluster's workspace, newest first: the ``DEFAULT_RUNS_SHOWN`` newest
    unless ``all``. Without ``refresh`` no scheduler is asked. Errors: the profile's (exit 2/3), a ``runs/`` that
    cannot be listed (exit 5); a run that cannot be read is listed as such, never raised."""
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock, rules=rules)
    _, cluster_name, cluster_profile = ctx.selected
    root = Path(cluster_profile.workspace_root)
    entries = list_run_dirs(root)
    shown = entries if all else entries[:DEFAULT_RUNS_SHOWN]
    seen: list[RunObservation] = []
    with collector_paused():
        if refresh:
            # every run read first: one observation of all their jobs, then each classified with its part
            read = [read_listed(entry, clock) for entry in shown]
            snapshots = [item for item in read if isinstance(item, RunSnapshot)]
            scheduler = ctx.scheduler()
            seen = list(observe_runs(snapshots, scheduler, clock=clock))
            parts = iter(seen)
            now = clock()
            summaries = [
                run_summary(item, classify_observed(item, next(parts), now, rules))
                if isinstance(item, RunSnapshot)
                else item
                for item in read
            ]
        else:
            summaries = _cached_summaries(shown, clock, rules)
    calls = max((one.calls for one in seen), default=0)
    errors = {one.detail for one in seen if one.evidence != "live" and one.calls and one.detail}
    return RunsList(
        workspace=str(root),
        cluster=cluster_name,
        runs=tuple(summaries),
        total=len(entries),
        hidden=len(entries) - len(shown),
        refreshed=refresh,
        scheduler_calls=calls,
        scheduler_error=next(iter(sorted(errors)), None),
    )


PARALLEL_FROM = 128
"""Listings of at least this many runs read them in worker processes (one per CPU, at most ``MAX_WORKERS``)."""
MAX_WORKERS = 8


def _cached_summaries(entries: Sequence[RunDirectory], clock: Clock, rules: Rules | None) -> list[RunSummary]:
    """Every entry's summary from its last recorded observation, in order. Reading and classifying a run is CPU
    work for Python (the records are small), so a long listing is split into contiguous slices read by forked
    worker processes, each returning only summaries; one run at a time, nothing kept but its summary, either way."""
    workers = min(os.cpu_count() or 1, MAX_WORKERS, len(entries) // (PARALLEL_FROM // 2))
    if workers < 2 or len(entries) < PARALLEL_FROM or "fork" not in multiprocessing.get_all_start_methods():
        return [_cached_summary(entry, clock, rules) for entry in entries]
    now = clock()  # one time for every worker (an injected clock need not survive a fork)
    size = -(-len(entries) // workers)
    slices = [list(entries[start : start + size]) for start in range(0, len(entries), size)]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=len(slices), mp_context=context) as pool:
        parts = pool.map(_slice_summaries, slices, [now] * len(slices), [rules] * len(slices))
        return [summary for part in parts for summary in part]


def _slice_summaries(entries: list[RunDirectory], now: datetime, rules: Rules | None) -> list[RunSummary]:
    return [_cached_summary(entry, lambda: now, rules) for entry in entries]


def _cached_summary(entry: RunDirectory, clock: Clock, rules: Rules | None) -> RunSummary:
    item = read_listed(entry, clock)
    if not isinstance(item, RunSnapshot):
        return item
    return run_summary(item, classify_observed(item, cached_observation(item), clock(), rules))


def read_listed(entry: RunDirectory, clock: Clock, *, attempt_records: bool = False) -> RunSnapshot | RunSummary:
    if entry.layout is None:
        return RunSummary(run_id=entry.name, run_dir=str(entry.path), state="unreadable", problem=entry.problem)
    try:
        return read_run(entry.layout, clock=clock, attempt_records=attempt_records)
    except SlurmExtensionError as exc:
        return _unclassified(entry.layout, exc)


def _unclassified(layout: RunLayout, exc: SlurmExtensionError) -> RunSummary:
    incomplete = isinstance(exc, NotFoundError) and exc.info.code == "run_not_found"
    problem = (
        "no run.json: execute did not finish writing this run (nothing was submitted)"
        if incomplete
        else exc.info.message
    )
    return RunSummary(
        run_id=str(layout.run_id),
        run_dir=str(layout.run_dir),
        name=layout.run_id.name,
        created_at=format_timestamp(layout.run_id.created),
        state="incomplete" if incomplete else "unreadable",
        problem=problem,
    )


def run_summary(snapshot: RunSnapshot, status: RunStatus) -> RunSummary:
    return RunSummary(
        run_id=status.run_id,
        run_dir=status.run_dir,
        name=status.name,
        created_at=format_timestamp(snapshot.run.created_at),
        state=status.state,
        records_done=status.records_done,
        records_total=status.records_total,
        shards_total=status.shards_total,
        counts=dict(status.counts),
        evidence=status.evidence,
        observed_at=status.observed_at,
    )


# -- runs rm ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Decision:
    state: str
    live: tuple[int, ...] = ()
    note: str | None = None


def remove_run(
    run: str | Path,
    *,
    force: bool = False,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    rules: Rules | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> RunRemoved:
    """Remove the run directory of ``run`` (a run id, or a run directory directly inside the selected profile
    cluster's ``<workspace>/runs/``; any other path is refused, exit 2).

    A run whose submission was refused, or that has no run record (execute did not finish), is removed without
    asking Slurm. A run with a run record but no submission record (sbatch's reply was lost, or execute stopped
    before recording it) is looked up in Slurm by its job names first (one squeue, one sacct): jobs of it that are
    queued or running refuse the removal (ConflictError ``run_live``, exit 4, naming them) unless ``force``, which
    cancels them first. Otherwise a live status decides: shards pending, running, stale or unknown refuse the
    removal (``run_live``, exit 4, naming them) unless ``force``, which cancels them first; Slurm that cannot be
    asked refuses it (UnavailableError, exit 5). A run whose records cannot be read is removed only with ``force``
    (nothing can be cancelled then). A cancellation Slurm did not confirm leaves the run in place (exit 5): a task
    still running would write into it again. Errors: no such run (exit 3), not a run directory of the workspace
    (exit 2).
    """
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock, rules=rules)
    layout = layout_of(run, ctx)
    _check_workspace(layout, Path(ctx.selected.profile.workspace_root))
    _check_directory(layout)
    counting = CountingRunner(ctx.runner)
    scheduler = SlurmScheduler(counting, clock=clock, concurrent=counting.concurrent)
    decision = _decide(layout, scheduler, force=force, clock=clock, rules=rules)
    calls = counting.calls
    cancelled = None
    if decision.live:
        cancelled = cancel_run(str(layout.run_dir), environ=environ, runner=runner, clock=clock, sleep=sleep)
        if not cancelled.confirmed:
            raise UnavailableError(
                f"run {str(layout.run_id)!r}: Slurm accepted the cancellation of shard(s) "
                f"{', '.join(map(str, cancelled.shards))} but did not confirm it, so nothing was removed",
                code="cancel_unconfirmed",
                file=str(layout.run_dir),
                hint="check with 'data-designer slurm status RUN', then run 'runs rm --force' again",
            )
    remove_run_dir(layout)
    return RunRemoved(
        run_id=str(layout.run_id),
        run_dir=str(layout.run_dir),
        state=decision.state,  # type: ignore[arg-type]
        forced=force,
        cancelled=cancelled,
        live_shards=decision.live,
        scheduler_calls=calls + (cancelled.scheduler_calls if cancelled is not None else 0),
        note=decision.note,
    )


def _check_workspace(layout: RunLayout, workspace: Path) -> None:
    """The run directory lies directly inside ``<workspace>/runs/`` (both resolved: ``..`` and linked parents are
    followed; the run directory itself is not, so a symbolic link there is refused by ``_check_directory``)."""
    runs = workspace.expanduser().absolute() / "runs"
    if layout.run_dir.parent.resolve() == runs.resolve():
        return
    raise InvalidInputError(
        f"{str(layout.run_dir)!r} is not a run of the workspace {str(workspace)!r} (runs rm removes only run "
        f"directories directly inside {str(runs)!r})",
        code="invalid_run",
        key_path=("RUN",),
        file=str(layout.run_dir),
        hint="pass the run id with the --profile and --cluster whose workspace holds the run "
        "('data-designer slurm runs ls --profile ... --cluster ...' lists them)",
    )


def _check_directory(layout: RunLayout) -> None:
    """The run directory exists and is a plain directory (a symbolic link is never followed into a deletion)."""
    path = layout.run_dir
    try:
        info = os.lstat(path)
    except FileNotFoundError as exc:
        raise NotFoundError(
            f"run {str(layout.run_id)!r} has no run directory at {str(path)!r}",
            code="run_not_found",
            file=str(path),
            hint="'data-designer slurm runs ls' lists the runs of the workspace (--profile, --cluster)",
        ) from exc
    except OSError as exc:
        raise UnavailableError(
            f"cannot inspect {str(path)!r}: {exc.strerror}", code="filesystem_unavailable", file=str(path)
        ) from exc
    if not stat.S_ISDIR(info.st_mode):
        raise InvalidInputError(
            f"{str(path)!r} is not a run directory (a symbolic link or a file)",
            code="invalid_run",
            key_path=("RUN",),
            file=str(path),
            hint="runs rm removes only real run directories under <workspace>/runs/",
        )


def _decide(
    layout: RunLayout, scheduler: SlurmScheduler, *, force: bool, clock: Clock, rules: Rules | None
) -> _Decision:
    try:
        with collector_paused():
            snapshot = read_run(layout, clock=clock)
            seen = observe_run(snapshot, scheduler, clock=clock)
            status = classify_observed(snapshot, seen, clock(), rules)
    except SlurmExtensionError as exc:
        summary = _unclassified(layout, exc)
        if summary.state == "incomplete":
            return _Decision("incomplete")
        if not force:
            raise ConflictError(
                f"run {str(layout.run_id)!r} cannot be read ({exc.info.message}), so whether Slurm still runs it "
                "is unknown",
                code="run_unreadable",
                file=exc.info.file or str(layout.run_dir),
                hint="cancel its jobs yourself if any remain ('squeue --me'), then pass --force to remove it",
            ) from exc
        return _Decision("unreadable", note=f"not read, nothing cancelled: {exc.info.message}")
    live = tuple(shard.shard for shard in status.shards if shard.state in LIVE_SHARD_STATES)
    state, note = status.state, None
    if not own_submission_recorded(snapshot):
        # no submission record: Slurm may hold the run's jobs all the same; their names tell (as execute --run-id)
        found = _live_by_name(snapshot, scheduler)
        if found and not force:
            shards = sorted({shard for shard, _ in found.values()})
            raise ConflictError(
                f"run {str(layout.run_id)!r} has no submission record, but Slurm still holds its job(s) "
                f"{_job_list(found)} (named {snapshot.run.binding.job_name_prefix}-c*; shard(s) {_named(shards)}) "
                "queued or running",
                code="run_live",
                file=str(layout.run_dir),
                hint="pass --force to cancel them first and then remove the run, or cancel them with "
                f"'data-designer slurm cancel {layout.run_id}'",
            )
        # what the lookup decided replaces what the records alone could not tell (rule S2a: unknown)
        undecided = {shard.shard for shard in status.shards if shard.reason == "submission_record_missing"}
        live = tuple(sorted({k for k in live if k not in undecided} | {shard for shard, _ in found.values()}))
        if found:
            note = f"no submission record: job(s) {_job_list(found)} found by job name"
            if state == "not_submitted":  # the records say nothing was submitted; Slurm says otherwise
                state = "running" if any(task == "running" for _, task in found.values()) else "pending"
    # a run with jobs whose scheduler did not answer: whether something of it still runs is not known
    unanswered = is_unavailable(status) or (status.scheduler_calls > 0 and status.evidence != "live")
    if unanswered and not force:
        raise UnavailableError(
            f"Slurm could not be asked whether run {str(layout.run_id)!r} still runs: "
            f"{status.scheduler_error or 'no answer'}",
            code="scheduler_unavailable",
            file=str(layout.run_dir),
            hint="nothing was removed; retry when squeue and sacct answer",
        )
    if not live:
        return _Decision(state, note=note)
    if not force:
        raise ConflictError(
            f"run {str(layout.run_id)!r} has live shard(s) {_shard_list(status, live)}",
            code="run_live",
            file=str(layout.run_dir),
            hint=f"cancel them first ('data-designer slurm cancel {layout.run_id}'), or pass --force to cancel "
            "and remove",
        )
    return _Decision(state, live=live, note=note)


def _live_by_name(snapshot: RunSnapshot, scheduler: SlurmScheduler) -> dict[tuple[str, int], tuple[int, str]]:
    """(job id, array index) -> (shard, Slurm's state) of the run's tasks that Slurm holds queued or running though no
    submission record names them: found by job name (``unrecorded_tasks``), then observed (squeue must answer: it
    alone shows every queued and running task). UnavailableError (exit 5) when Slurm cannot tell, whatever
    ``--force`` says: a job nobody can see would be orphaned."""
    try:
        tasks = unrecorded_tasks(snapshot, scheduler)
        job_ids: list[str] = sorted({job for job, _ in tasks}, key=int)
        if not job_ids:
            return {}
        seen = scheduler.observe(job_ids, since=snapshot.run.created_at - SINCE_SLACK)
    except UnavailableError as exc:
        raise exc.with_context(
            f"run {snapshot.run.run_id} has no submission record, so its jobs were looked up by name",
            hint="nothing was removed; retry when squeue and sacct answer",
        ) from None
    if seen.squeue.status != "ok":
        raise UnavailableError(
            f"run {snapshot.run.run_id} has no submission record, and squeue could not say whether its job(s) "
            f"{', '.join(job_ids)} still run: {seen.squeue.detail or seen.squeue.status}",
            code="scheduler_unavailable",
            file=str(snapshot.layout.run_dir),
            hint="nothing was removed; retry when squeue answers",
        )
    return {
        (task.job_id, task.array_index): (tasks[(task.job_id, task.array_index)][0], task.state)
        for task in seen.tasks
        if task.array_index is not None
        and task.state not in TERMINAL_TASK_STATES
        and (task.job_id, task.array_index) in tasks
    }


def _job_list(found: Mapping[tuple[str, int], object]) -> str:
    jobs: list[str] = sorted({job for job, _ in found}, key=int)
    return _named(jobs)


def _named(items: Sequence[object]) -> str:
    shown = ", ".join(map(str, items[:_NAMED_SHARDS]))
    return shown + (f" and {len(items) - _NAMED_SHARDS} more" if len(items) > _NAMED_SHARDS else "")


def _shard_list(status: RunStatus, live: Sequence[int]) -> str:
    states = {shard.shard: shard.state for shard in status.shards}
    named = ", ".join(f"{k} ({states[k]})" for k in live[:_NAMED_SHARDS])
    return named + (f" and {len(live) - _NAMED_SHARDS} more" if len(live) > _NAMED_SHARDS else "")
