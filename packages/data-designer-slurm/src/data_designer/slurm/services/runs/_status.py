"""``status`` and ``wait``: how a run stands, from any fresh shell, with no resident process.

``run_status`` reads the run's records once (``store.read_run``), makes one batched scheduler observation
(``status.observe_run``: at most one ``squeue`` and one ``sacct``, appended to the run directory) and classifies
(``status.classify``, the table in ``docs/architecture/status.md``). ``wait_run`` repeats that on a bounded
poll until the run ends or the timeout passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from data_designer.slurm.contracts import ACTIVE_SHARD_STATES, RunStatus, VerifySummary, WaitResult
from data_designer.slurm.runtime.polling import poll
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.status import Rules, cached_observation, observe_run
from data_designer.slurm.runtime.store import (
    Clock,
    RunLayout,
    RunSnapshot,
    contributing_parts,
    read_run,
    system_clock,
    verify_parts,
    with_verified,
)
from data_designer.slurm.services.context import ServiceContext, classify_observed, collector_paused
from data_designer.slurm.services.runs._locate import layout_of

VerifyProgress = Callable[[int, int, int, int], None]
"""``(parts done, parts total, bytes done, bytes total)`` while ``status --verify`` hashes."""
DEFAULT_WAIT_INTERVAL_S = 15.0
DEFAULT_WAIT_TIMEOUT_S = 24 * 3600.0
"""``wait`` is bounded: a day unless ``--timeout`` says otherwise."""


def run_status(
    run: str | Path,
    *,
    profile: str | Path | None = None,
    cluster: str | None = None,
    refresh: bool = True,
    verify: bool = False,
    workers: int | None = None,
    on_verify: VerifyProgress | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    rules: Rules | None = None,
) -> RunStatus:
    """How ``run`` (a run id or run directory) stands now.

    ``refresh=False`` asks no scheduler and classifies with the last recorded observation. Every status checks
    that each published part exists with its manifest's size; ``verify=True`` also hashes every part against its
    manifest's sha256 (``workers`` threads, default one per core; ``on_verify(parts done, parts, bytes done,
    bytes)`` as parts finish): a shard with a lost or corrupt part is ``damaged``, naming the part and its
    records. Never raises for an unreachable scheduler: the status then carries the last known evidence
    (``evidence`` cached or none) and unknown shards. Errors: a run that does not exist (exit 3), a run record or
    plan that cannot be read (exit 5).
    """
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock, rules=rules)
    layout = layout_of(run, ctx)
    scheduler = ctx.scheduler()
    return status_of(
        layout,
        scheduler,
        refresh=refresh,
        verify=verify,
        workers=workers,
        on_verify=on_verify,
        clock=clock,
        rules=rules,
    )


def status_of(
    layout: RunLayout,
    scheduler: SlurmScheduler,
    *,
    refresh: bool = True,
    verify: bool = False,
    workers: int | None = None,
    on_verify: VerifyProgress | None = None,
    clock: Clock = system_clock,
    rules: Rules | None = None,
) -> RunStatus:
    """The status of the run at ``layout`` through ``scheduler`` (the seam ``run_status`` and ``wait_run`` share)."""
    with collector_paused():
        snapshot = read_run(layout, clock=clock)
        summary = None
        if verify:
            snapshot, summary = verified(snapshot, workers=workers, on_verify=on_verify)
        seen = observe_run(snapshot, scheduler, clock=clock) if refresh else cached_observation(snapshot)
        status = classify_observed(snapshot, seen, clock(), rules)
        return status if summary is None else status.model_copy(update={"verify": summary})


def verified(
    snapshot: RunSnapshot,
    *,
    shards: Collection[int] | None = None,
    workers: int | None = None,
    on_verify: VerifyProgress | None = None,
) -> tuple[RunSnapshot, VerifySummary]:
    """``snapshot`` with every contributing part (of ``shards`` only, when given) hashed against its manifest, and
    what was hashed."""
    refs = [ref for ref in contributing_parts(snapshot) if shards is None or ref.shard in shards]
    damages, summary = verify_parts(str(snapshot.layout.run_dir), refs, workers=workers, on_progress=on_verify)
    return with_verified(snapshot, damages), summary


def is_unavailable(status: RunStatus) -> bool:
    """The scheduler (squeue, sacct or both) could not be asked and that leaves a shard unknown (exit 5): its
    verdict depends on the missing source (``RunStatus.degraded`` names it when the other answered)."""
    return any(shard.state == "unknown" and shard.reason == "scheduler_unavailable" for shard in status.shards)


def is_finished(status: RunStatus) -> bool:
    """No shard can change any more without someone acting (nothing pending, running or unknown)."""
    return not any(
        count for state, count in status.counts.items() if state in ACTIVE_SHARD_STATES or state == "unknown"
    )


def wait_run(
    run: str | Path,
    *,
    profile: str | Path | None = None,
    cluster: str | None = None,
    timeout_s: float = DEFAULT_WAIT_TIMEOUT_S,
    interval_s: float = DEFAULT_WAIT_INTERVAL_S,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    on_poll: Callable[[RunStatus], None] | None = None,
    rules: Rules | None = None,
) -> WaitResult:
    """Poll ``run``'s status every ``interval_s`` until it is finished or ``timeout_s`` passes (a bounded,
    foreground wait: nothing keeps running after it returns). ``on_poll`` sees every status (progress display).

    Outcome: ``succeeded``; ``ended`` (finished otherwise); ``timeout``; ``unavailable`` (the timeout passed while
    the scheduler could not be asked and shards were unknown).
    """
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock, rules=rules)
    layout = layout_of(run, ctx)
    scheduler = ctx.scheduler()
    started = monotonic()
    # clip=False: the last poll is the last a whole interval before the timeout allows
    for polls in poll(timeout_s, interval_s, clock=monotonic, sleep=sleep, since=started, clip=False):
        status = status_of(layout, scheduler, clock=clock, rules=rules)
        if on_poll is not None:
            on_poll(status)
        waited = monotonic() - started
        if status.succeeded:
            return WaitResult(outcome="succeeded", polls=polls, waited_s=waited, status=status)
        if is_finished(status) and not is_unavailable(status):
            return WaitResult(outcome="ended", polls=polls, waited_s=waited, status=status)
    return WaitResult(
        outcome="unavailable" if is_unavailable(status) else "timeout", polls=polls, waited_s=waited, status=status
    )
