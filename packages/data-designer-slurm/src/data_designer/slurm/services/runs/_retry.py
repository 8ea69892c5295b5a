"""``retry``: a new attempt for every shard that did not succeed, generating only the record indices it lacks.

One call reads the run once (``store.read_run``), observes it once (``status.observe_run``) and classifies it
(``status.classify``), exactly as ``status`` does; it acts only on what that shows:

- It selects shards that are ``failed``, ``partial``, ``cancelled``, ``missing``, ``stale`` or
  ``scheduler_inconsistent``; never a succeeded one. Shards that are pending, running or unknown are refused
  when named (exit 4) and skipped otherwise; shards that ended ``invalid_config`` are refused unless ``--force``
  (the retry runs the same snapshot, so they would fail the same way).
- It takes a generation by writing ``retries/<generation>.json`` once (``link(2)``): of two retries that chose the
  same number exactly one wins; the loser reads the run again and finds the winner's shards taken. The record is
  the intent (shards, missing ranges, the bound submission unit), written before any ``sbatch``; the submission is
  then appended to ``submissions/`` with the same generation.
- An intent without a submission record whose holder is gone (a crash, a lost ``sbatch`` reply) is resumed first:
  the resumer takes ``retries/<generation>.resume-<k>`` once, asks Slurm for the intent's jobs by name
  (``sacct -S`` from the intent's time) and submits only the chunks Slurm does not hold.
- Each task of the new generation claims its shard's next attempt number (``DDSLURM_ATTEMPT=next``) and is
  assigned exactly the indices earlier attempts did not publish (``runtime.store`` coverage), so nothing is
  generated twice and nothing is lost. A retry spanning several array chunks runs them one after another
  (``afterany``), so the run's ``max_concurrent_shards`` holds for the retry as a whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from data_designer.slurm.contracts import (
    ConflictError,
    PartDamage,
    RetryResult,
    RetryShardResult,
    RunStatus,
    ShardStatus,
    SlurmExtensionError,
    SubmissionUnit,
    UnavailableError,
)
from data_designer.slurm.contracts.records import (
    Requester,
    ResumeClaim,
    RetryIntent,
    RetryShard,
    SetAsidePart,
    SubmittedJob,
)
from data_designer.slurm.planner import bind_retry, count_indices
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler, SubmissionRefused
from data_designer.slurm.runtime.status import SINCE_SLACK, Rules, classify, observe_run
from data_designer.slurm.runtime.store import (
    Clock,
    RetrySnapshot,
    RunLayout,
    RunSnapshot,
    claim_retry_resume,
    modes_of_directory,
    read_run,
    record_submission,
    requester_from_environment,
    set_aside,
    system_clock,
    take_retry_generation,
)
from data_designer.slurm.services.context import Alive, CountingRunner, ServiceContext, default_alive
from data_designer.slurm.services.runs._execute import passed_environment, submitted_jobs
from data_designer.slurm.services.runs._locate import layout_of, named_shards
from data_designer.slurm.services.runs._status import verified

_OPERATION = "retry"
RETRYABLE_STATES = frozenset(
    {"failed", "partial", "cancelled", "missing", "stale", "scheduler_inconsistent", "damaged"}
)
"""Shard states a retry takes; every other state is either done (succeeded) or not this retry's to decide."""
_ACTIVE = frozenset({"pending", "running", "unknown"})
_LIVE_TASK = frozenset({"stale", "scheduler_inconsistent"})
"""States in which Slurm may still run the shard's old task: it is cancelled before the new attempt."""
_MAX_TRIES = 8
"""Generation numbers tried before giving up (each loss means another retry took one: the run is read again)."""


def retry_run(
    run: str | Path,
    *,
    shards: Sequence[int] | None = None,
    dry_run: bool = False,
    force: bool = False,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    rules: Rules | None = None,
    alive: Alive | None = None,
    sleep: Callable[[float], None] = time.sleep,
    verify: bool = False,
    workers: int | None = None,
) -> RetryResult:
    """Retry the shards of ``run`` that did not succeed (only ``shards`` when given).

    A shard whose published parts are lost or corrupt is ``damaged``: the retry sets those parts aside (moved
    under ``set-aside/<generation>/``, named in the retry's record, never deleted) and generates exactly their
    records again. Every retry checks each part's existence and size; ``verify`` also hashes every part against its
    manifest, and a shard named in ``shards`` is always hashed (so ``retry --shard N`` finds a flipped byte).

    ``alive`` decides whether the holder of an unsubmitted intent may still be submitting it (default: a process
    on this host is alive while its pid is; one on another host while its intent is younger than
    ``rules.retry_grace_s``). Errors: unknown shard or unset environment variable exit 2, no such run exit 3,
    named shards that cannot be retried now exit 4, Slurm that cannot be asked exit 5 (nothing is submitted).
    """
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock, rules=rules)
    layout = layout_of(run, ctx)
    # sbatch under the umask of the run's workspace (its directory is setgid when group-shared), as execute's
    counting = CountingRunner(ctx.submitting_runner(modes_of_directory(layout.run_dir).sharing))
    scheduler = SlurmScheduler(counting, clock=clock, sleep=sleep, concurrent=counting.concurrent)
    submitting = ctx.submitting_environment
    rules = ctx.rules
    is_alive = alive or default_alive(rules.retry_grace_s, clock)
    done = _Done()
    for _ in range(_MAX_TRIES):
        snapshot, status = _observed(layout, scheduler, clock, rules, verify=verify, shards=shards, workers=workers)
        requested = _requested(snapshot, shards)
        wanted = set(requested) if requested is not None else {shard.plan.shard for shard in snapshot.shards}
        held: dict[int, str] = {}
        for retry in snapshot.unsubmitted_retries():
            if not retry.shards & wanted:
                continue
            if is_alive(_holder(retry)):
                held.update(dict.fromkeys(retry.shards, _held_reason(retry)))
            elif dry_run:
                done.resumed.append(retry.generation)
                done.handled |= retry.shards
            elif not _resume(layout, snapshot, retry, scheduler, clock, submitting, done):
                held.update(dict.fromkeys(retry.shards, _held_reason(retry)))  # another process took it over
        selection = _select(snapshot, status, requested, held, force, done.handled)
        generation = snapshot.next_generation
        selection.shards = [
            s.model_copy(update={"set_aside": _set_aside_parts(layout, generation, selection.damaged[s.shard])})
            if s.shard in selection.damaged
            else s
            for s in selection.shards
        ]
        result = _base_result(layout, snapshot, selection, dry_run, done, counting)
        if dry_run or not selection.shards:
            return result.model_copy(update={"stopped": _task_names(selection.live_tasks)})
        passed = passed_environment(
            snapshot.plan, submitting, run_file=snapshot.run.run_file, profile_file=snapshot.run.profile_file
        )
        unit = bind_retry(
            snapshot.plan, snapshot.run.binding, shards=[s.shard for s in selection.shards], generation=generation
        )
        intent = RetryIntent(
            generation=generation,
            requested_by=requester_from_environment(submitting, clock=clock),
            shards=tuple(
                RetryShard(
                    shard=s.shard,
                    state=s.state,
                    reason=s.reason,
                    ranges=s.ranges,
                    set_aside=s.set_aside,
                )
                for s in selection.shards
            ),
            unit=unit,
            forced=force and selection.forced,
        )
        path = layout.retry_intent(generation)
        if not take_retry_generation(layout, intent, clock=clock, operation=_OPERATION):
            continue  # another retry took this generation: read the run again, its shards are now taken
        set_aside(layout, intent)  # before sbatch: the new attempts must see the damaged ranges missing
        stopped = _stop_live_tasks(scheduler, selection.live_tasks)
        since = intent.requested_by.time
        jobs, sbatch_calls, recovered = _submit(
            layout, snapshot, generation, unit, scheduler, clock, passed, since=since
        )
        return result.model_copy(
            update={
                "generation": generation,
                "jobs": (*result.jobs, *jobs),
                "sbatch_calls": result.sbatch_calls + sbatch_calls,
                "recovered": result.recovered + recovered,
                "stopped": stopped,
                "intent": str(path),
                "scheduler_calls": counting.calls,
            }
        )
    raise ConflictError(
        f"run {layout.run_id}: {_MAX_TRIES} retry generations were taken by others while this retry chose one",
        code="retry_contended",
        operation=_OPERATION,
        hint="run 'data-designer slurm status RUN': other retries hold the shards; retry again once they ended",
    )


@dataclass
class _Done:
    """What this call did before selecting: intents it resumed (or, dry, would resume) and their jobs."""

    resumed: list[int] = field(default_factory=list)
    handled: set[int] = field(default_factory=set)
    jobs: list[SubmittedJob] = field(default_factory=list)
    sbatch_calls: int = 0
    recovered: int = 0


@dataclass
class _Selection:
    shards: list[RetryShardResult]
    skipped: dict[str, str]
    live_tasks: list[tuple[str, int]]
    """(job id, array index) of old tasks Slurm still runs for stale or inconsistent shards."""
    forced: bool
    damaged: dict[int, tuple[PartDamage, ...]] = field(default_factory=dict)
    """shard -> its damaged parts, which this retry sets aside."""


def _observed(
    layout: RunLayout,
    scheduler: SlurmScheduler,
    clock: Clock,
    rules: Rules,
    *,
    verify: bool = False,
    shards: Sequence[int] | None = None,
    workers: int | None = None,
) -> tuple[RunSnapshot, RunStatus]:
    """The run read once (its parts hashed: all with ``verify``, else those of the named ``shards``), observed once
    (appended like any status) and classified; Slurm must answer."""
    snapshot = read_run(layout, clock=clock)
    if verify or shards:
        snapshot, _ = verified(snapshot, shards=None if verify else set(shards or ()), workers=workers)
    seen = observe_run(snapshot, scheduler, clock=clock)
    if snapshot.job_ids and seen.evidence != "live":
        raise UnavailableError(
            f"run {snapshot.run.run_id}: Slurm could not be asked ({seen.detail or 'no answer'}); a retry decides "
            "only from a live observation",
            code="scheduler_unavailable",
            operation=_OPERATION,
            hint="nothing was submitted; retry when squeue and sacct answer",
        )
    status = classify(
        snapshot, seen.observation, clock(), evidence=seen.evidence, rules=rules, scheduler_calls=seen.calls
    )
    return snapshot, status


def _requested(snapshot: RunSnapshot, shards: Sequence[int] | None) -> list[int] | None:
    return None if shards is None else named_shards(snapshot, shards, operation=_OPERATION)


def _select(
    snapshot: RunSnapshot,
    status: RunStatus,
    requested: list[int] | None,
    held: Mapping[int, str],
    force: bool,
    handled: set[int],
) -> _Selection:
    """The shards to retry; refuses (exit 4) named shards that cannot be retried now, or only invalid_config ones."""
    by_shard = {shard.shard: shard for shard in status.shards}
    candidates = requested if requested is not None else sorted(by_shard)
    chosen: list[RetryShardResult] = []
    skipped: dict[str, str] = {}
    refused: list[str] = []
    invalid: list[int] = []
    live_tasks: list[tuple[str, int]] = []
    for number in candidates:
        if number in handled:
            continue
        shard = by_shard[number]
        why = _not_retryable(shard, held)
        if why is not None:
            if requested is not None:
                refused.append(
                    f"shard {number} already succeeded (its parts match their manifests' sha256)"
                    if why == "succeeded"
                    else f"shard {number} is {why}"
                )
            elif why != "succeeded":
                skipped[str(number)] = why
            continue
        if shard.reason == "invalid_config" and not force:
            invalid.append(number)
            skipped[str(number)] = "ended invalid_config: the same snapshot would fail the same way (--force)"
            continue
        if shard.state in _LIVE_TASK and shard.job_id is not None and shard.array_task is not None:
            live_tasks.append((shard.job_id, shard.array_task))
        chosen.append(
            RetryShardResult(
                shard=number,
                state=shard.state,
                reason=shard.reason,
                ranges=shard.missing,
                records=count_indices(shard.missing),
            )
        )
    if refused:
        raise ConflictError(
            f"run {snapshot.run.run_id}: {'; '.join(refused)}",
            code="shard_not_retryable",
            operation=_OPERATION,
            key_path=("--shard",),
            hint="retry takes failed, partial, cancelled, missing, stale, scheduler_inconsistent and damaged shards "
            "(a named shard's parts are verified first); wait for "
            "pending and running ones ('data-designer slurm wait RUN'), or cancel them first",
        )
    if invalid and (requested is not None or not chosen):
        raise ConflictError(
            f"run {snapshot.run.run_id}: shard(s) {', '.join(map(str, invalid))} ended invalid_config; a retry runs "
            "the same snapshot of the run file and config, so they would fail the same way",
            code="invalid_config_retry",
            operation=_OPERATION,
            key_path=("--shard",),
            hint="fix the config and execute a new run, or pass --force to retry them anyway",
        )
    return _Selection(
        chosen,
        skipped,
        live_tasks,
        forced=bool(force and any(s.reason == "invalid_config" for s in chosen)),
        damaged={s.shard: by_shard[s.shard].damaged for s in chosen if by_shard[s.shard].damaged},
    )


def _set_aside_parts(layout: RunLayout, generation: int, damaged: Sequence[PartDamage]) -> tuple[SetAsidePart, ...]:
    """What the intent sets aside: every damaged part, moved to ``set-aside/<generation>/`` when there is a file
    to move (a part named by no plain path stays where it is, counted for nothing)."""
    return tuple(
        SetAsidePart(
            damage=damage,
            moved_to=None
            if damage.problem in ("missing", "bad_path")
            else layout.set_aside_path(generation, damage.path),
        )
        for damage in damaged
    )


def _not_retryable(shard: ShardStatus, held: Mapping[int, str]) -> str | None:
    """Why the shard is not retried now, or None."""
    if shard.shard in held:
        return held[shard.shard]
    if shard.state == "succeeded":
        return "succeeded"
    if shard.state == "not_submitted":
        return "not_submitted: its first submission was refused ('data-designer slurm execute RUN --run-id ...')"
    if shard.state in _ACTIVE:
        detail = shard.message or shard.reason
        return f"{shard.state}" + (f" ({detail})" if detail else "")
    if shard.state not in RETRYABLE_STATES:
        return shard.state
    return None


def _holder(retry: RetrySnapshot) -> Requester:
    return retry.resumes[-1].requested_by if retry.resumes else retry.intent.requested_by


def _held_reason(retry: RetrySnapshot) -> str:
    who = _holder(retry)
    return f"pending: retry generation {retry.generation} is being submitted by {who.user}@{who.host} (pid {who.pid})"


def _resume(
    layout: RunLayout,
    snapshot: RunSnapshot,
    retry: RetrySnapshot,
    scheduler: SlurmScheduler,
    clock: Clock,
    environ: Mapping[str, str],
    done: _Done,
) -> bool:
    """Complete an intent whose submission was never recorded: take the next resume claim, find its jobs by name,
    submit only what Slurm does not hold, and record the submission with the intent's generation."""
    number = len(retry.resumes) + 1
    claim = ResumeClaim(
        generation=retry.generation, resume=number, requested_by=requester_from_environment(environ, clock=clock)
    )
    if not claim_retry_resume(layout, claim, clock=clock, operation=_OPERATION):
        return False  # another process is resuming it
    set_aside(layout, retry.intent)  # what a crashed retry may not have moved yet
    passed = passed_environment(
        snapshot.plan, environ, run_file=snapshot.run.run_file, profile_file=snapshot.run.profile_file
    )
    since = retry.intent.requested_by.time
    jobs, calls, recovered = _submit(
        layout, snapshot, retry.generation, retry.intent.unit, scheduler, clock, passed, since=since
    )
    done.resumed.append(retry.generation)
    done.handled |= retry.shards
    done.jobs.extend(jobs)
    done.sbatch_calls += calls
    done.recovered += recovered
    return True


def _submit(
    layout: RunLayout,
    snapshot: RunSnapshot,
    generation: int,
    unit: SubmissionUnit,
    scheduler: SlurmScheduler,
    clock: Clock,
    environment: Mapping[str, str],
    *,
    since: datetime,
) -> tuple[tuple[SubmittedJob, ...], int, int]:
    """Submit ``unit`` (chunks Slurm already holds by name are found, not submitted again) and append the
    submission record of ``generation``; a refusal is recorded too, so the intent is settled either way."""
    try:  # sacct -S from the intent's time (less the clock-skew slack): its jobs cannot be older
        result = scheduler.submit(unit, since=since - SINCE_SLACK, environment=environment)
    except SubmissionRefused as exc:
        accepted = submitted_jobs(unit, exc.accepted)
        record_submission(
            layout,
            accepted,
            sbatch_calls=exc.sbatch_calls,
            clock=clock,
            operation=_OPERATION,
            generation=generation,
            error=exc.info.message,
        )
        exc.with_context(
            f"run {snapshot.run.run_id}, retry generation {generation}",
            hint=f"{exc.info.hint}; the refusal is recorded and the shards keep their state: fix the cause "
            "outside the plan and retry again",
        )
        raise
    except SlurmExtensionError as exc:
        exc.with_context(
            f"run {snapshot.run.run_id}, retry generation {generation}",
            hint=f"{exc.info.hint or 'fix the cause'}; then run 'data-designer slurm retry RUN' again: it "
            f"finds generation {generation}'s jobs by name and submits only what Slurm does not hold",
        )
        raise
    jobs = submitted_jobs(unit, result.chunks)
    record_submission(
        layout, jobs, sbatch_calls=result.sbatch_calls, clock=clock, operation=_OPERATION, generation=generation
    )
    return jobs, result.sbatch_calls, result.recovered


def _stop_live_tasks(scheduler: SlurmScheduler, tasks: Sequence[tuple[str, int]]) -> tuple[str, ...]:
    """Cancel the old tasks Slurm still runs for stale or inconsistent shards, so two attempts never run at once."""
    if not tasks:
        return ()
    by_job: dict[str, list[int]] = {}
    for job, index in tasks:
        by_job.setdefault(job, []).append(index)
    scheduler.cancel([], array_indices=by_job)
    return _task_names(tasks)


def _task_names(tasks: Sequence[tuple[str, int]]) -> tuple[str, ...]:
    return tuple(f"{job}_{index}" for job, index in tasks)


def _base_result(
    layout: RunLayout,
    snapshot: RunSnapshot,
    selection: _Selection,
    dry_run: bool,
    done: _Done,
    counting: CountingRunner,
) -> RetryResult:
    return RetryResult(
        run_id=snapshot.run.run_id,
        run_dir=str(layout.run_dir),
        dry_run=dry_run,
        shards=tuple(selection.shards),
        jobs=tuple(done.jobs),
        sbatch_calls=done.sbatch_calls,
        recovered=done.recovered,
        resumed=tuple(done.resumed),
        skipped=selection.skipped,
        records=sum(shard.records for shard in selection.shards),
        scheduler_calls=counting.calls,
    )
