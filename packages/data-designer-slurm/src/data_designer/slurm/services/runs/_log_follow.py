"""``logs --follow``: the chosen tails, then the lines appended to them, until every followed attempt ended.

A followed attempt has ended when its ``status.json`` exists (one more poll then reads the supervisor's last lines),
or when the scheduler shows the tasks it waits on terminal and no new bytes arrived for ``grace_s`` (a supervisor
that could not start, or was killed, writes no status). The scheduler is asked at most every ``scheduler_every_s``:
one ``squeue`` and one ``sacct`` (``SlurmScheduler.observe``) for every followed task together; when it cannot be
asked, following goes on. Without ``attempt``, a newer attempt of a followed shard (a requeue, a retry) is followed
once its directory appears. A shard no job was submitted for has nothing to wait for.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from data_designer.slurm.contracts import TERMINAL_TASK_STATES, LogFile, LogFollow, LogStep, UnavailableError
from data_designer.slurm.runtime.polling import poll
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.status import OBSERVE_TIMEOUT_S, SINCE_SLACK
from data_designer.slurm.runtime.store import (
    Clock,
    RunLayout,
    attempt_numbers,
    read_appended,
    read_run,
    system_clock,
)
from data_designer.slurm.services.context import ServiceContext
from data_designer.slurm.services.runs._locate import layout_of
from data_designer.slurm.services.runs._logs import (
    Chosen,
    check_selection,
    check_tail,
    choose,
    collect,
    log_file,
    sources,
)

FOLLOW_INTERVAL_S = 1.0
SCHEDULER_EVERY_S = 5.0
"""The scheduler is asked at most this often (one squeue and one sacct for every followed task)."""
FOLLOW_GRACE_S = 10.0
"""After the scheduler shows a followed task ended, how long without new bytes before following it stops."""
READS_PER_POLL = 16
"""At most this many bounded reads of one file per poll, so a file written faster than it is read cannot stall
the others (the rest is read at the next poll)."""

Emit = Callable[[LogFile], None]


@dataclass
class _Follower:
    """One followed shard: its current attempt, where each of its files was read up to, and whether it ended."""

    pick: Chosen
    offsets: dict[Path, int] = field(default_factory=dict)
    closing: bool = False
    done: bool = False
    terminal_at: float | None = None
    last_bytes_at: float = -math.inf

    def task_keys(self) -> set[tuple[str, int]]:
        """The tasks whose end ends this follower: the one that ran its attempt, else all of the shard's."""
        if self.pick.ran_by is not None:
            return {self.pick.ran_by}
        return {(t.job_id, t.array_task) for t in self.pick.tasks}

    def quiet(self, now: float, grace_s: float) -> bool:
        """Its tasks ended and no new bytes arrived for ``grace_s`` since (or since they were seen ended)."""
        if self.terminal_at is None:
            return False
        return now - max(self.terminal_at, self.last_bytes_at) >= grace_s


def follow_logs(
    run: str | Path,
    *,
    on_logs: Emit,
    shard: int | None = None,
    attempt: int | None = None,
    step: LogStep | None = None,
    tail: int | None = None,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    interval_s: float = FOLLOW_INTERVAL_S,
    scheduler_every_s: float = SCHEDULER_EVERY_S,
    grace_s: float = FOLLOW_GRACE_S,
) -> LogFollow:
    """``run_logs``' tails, then every line appended to the chosen files, each passed to ``on_logs`` as a
    :class:`LogFile` whose ``lines`` are the new ones, until every followed attempt ended (see the module doc).
    A foreground loop: Ctrl-C stops it (``KeyboardInterrupt`` propagates) and nothing keeps running after it.
    Errors as ``run_logs``."""
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock)
    check_selection(shard, attempt)
    lines = check_tail(tail)
    layout = layout_of(run, ctx)
    snapshot = read_run(layout, clock=clock)
    selection, chosen, skipped = choose(snapshot, shard=shard, attempt=attempt)
    first = collect(snapshot, selection, chosen, step=step, tail=lines, succeeded_skipped=skipped)
    followers = [_Follower(pick) for pick in chosen]
    by_shard = {f.pick.shard: f for f in followers}
    for log in first.files:
        on_logs(log)
        by_shard[log.shard].offsets[Path(log.path)] = log.size
    scheduler = ctx.scheduler()
    since = snapshot.run.created_at - SINCE_SLACK
    calls = printed = 0
    asked_at = -math.inf
    for polls in poll(None, interval_s, clock=None, sleep=sleep):  # noqa: B007 (the count is read after the loop)
        now = monotonic()
        for follower in followers:
            printed += _poll(layout, follower, step, now, on_logs)
        active = [f for f in followers if not f.done]
        if active and now - asked_at >= scheduler_every_s:
            asked_at = now
            calls += _observe(scheduler, active, since, now)
        for follower in active:
            if not follower.pick.tasks or follower.quiet(now, grace_s):
                printed += _read_new(layout, follower, step, now, on_logs, final=True)
                follower.done = True
        if all(f.done for f in followers):
            break
    return LogFollow(
        run_id=str(layout.run_id),
        outcome="ended" if followers else "nothing_to_follow",
        followed=tuple(f.pick.shard for f in followers),
        polls=polls,
        scheduler_calls=calls,
        lines=printed,
    )


def _poll(layout: RunLayout, follower: _Follower, step: LogStep | None, now: float, emit: Emit) -> int:
    """Read what was appended; move to a newer attempt once one appears (unless one was asked for); close an ended
    attempt one poll after its status appeared (the supervisor's last lines are written after its status)."""
    if follower.done:
        return 0
    pick = follower.pick
    printed = 0
    if not pick.pinned:
        numbers = attempt_numbers(layout.attempts_dir(pick.shard))
        if numbers and (pick.attempt is None or numbers[-1] > pick.attempt):
            if pick.attempt is not None:
                printed += _read_new(layout, follower, step, now, emit, final=True)
            others = tuple(t for t in pick.tasks if (t.job_id, t.array_task) != pick.ran_by)
            follower.pick = Chosen(pick.shard, numbers[-1], others or pick.tasks)
            follower.closing = False
            follower.terminal_at = None
    if follower.closing:
        follower.done = True
        return printed + _read_new(layout, follower, step, now, emit, final=True)
    attempt = follower.pick.attempt
    if attempt is not None and layout.status(pick.shard, attempt).exists():
        follower.closing = True
    return printed + _read_new(layout, follower, step, now, emit, final=False)


def _read_new(
    layout: RunLayout, follower: _Follower, step: LogStep | None, now: float, emit: Emit, *, final: bool
) -> int:
    """Emit the lines appended to each of the follower's files since it last read them."""
    printed = 0
    for source in sources(layout, follower.pick, step):
        offset = follower.offsets.get(source.path, 0)
        for _ in range(READS_PER_POLL):
            new = read_appended(source.path, offset, final=final)
            if new is None or (new.end == offset and not new.reset):
                break
            follower.offsets[source.path] = offset = new.end
            follower.last_bytes_at = now
            if new.lines:
                emit(log_file(source, new.lines, size=new.end, truncated=new.reset))
                printed += len(new.lines)
    return printed


def _observe(scheduler: SlurmScheduler, active: list[_Follower], since: datetime, now: float) -> int:
    """One squeue and one sacct for every task the active followers wait on; note whose tasks all ended."""
    wanted = {key for f in active for key in f.task_keys()}
    if not wanted:
        return 0
    try:
        observation = scheduler.observe(sorted({job for job, _ in wanted}), since=since, timeout_s=OBSERVE_TIMEOUT_S)
    except UnavailableError:
        return 2  # both sources were asked and neither answered: nothing learnt, keep following
    states = {(t.job_id, t.array_index if t.array_index is not None else 0): t.state for t in observation.tasks}
    for follower in active:
        keys = follower.task_keys()
        if keys and all(states.get(key) in TERMINAL_TASK_STATES for key in keys):
            if follower.terminal_at is None:
                follower.terminal_at = now
        else:
            follower.terminal_at = None
    return observation.calls
