"""``logs``: the logs of a run's shards, chosen from its snapshot, from any fresh shell.

``run_logs`` reads the run once (``store.read_run``) and picks, without asking the scheduler, the latest attempt of
every shard that did not succeed (a shard succeeded iff its manifests cover its whole range: ``missing`` is empty),
or one shard (``shard``), or one attempt of it (``attempt``). Of each it reads the last lines (a bounded read from the
end: ``store.read_tail``) of Slurm's batch output of the tasks that ran it (``slurm-<job name>_<task>.out|.err``, so a
shard whose batch script failed before any attempt existed still shows why) and of the attempt's ``logs/``: the
supervisor's, every server replica's and the client's.

``follow_logs`` (``_log_follow``) prints those tails and then the lines appended to them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import (
    InvalidInputError,
    LogFile,
    LogSelection,
    LogStep,
    NotFoundError,
    RunLogs,
    SlurmExtensionError,
)
from data_designer.slurm.runtime.store import (
    AttemptSnapshot,
    Clock,
    RunLayout,
    RunSnapshot,
    ShardSnapshot,
    TaskRef,
    file_kind,
    read_run,
    read_tail,
    system_clock,
)
from data_designer.slurm.services.runs._locate import locate_run

DEFAULT_TAIL = 200
"""Lines shown of each file unless ``tail`` says otherwise (a header says when earlier ones are not shown)."""
BATCH_STREAMS = ("out", "err")
_SERVER_PREFIX = "server-"
_LOG_SUFFIX = ".log"


@dataclass(frozen=True)
class Chosen:
    """One shard's chosen attempt (None: it has none yet) and the tasks whose batch output belongs to it."""

    shard: int
    attempt: int | None
    tasks: tuple[TaskRef, ...]
    ran_by: tuple[str, int] | None = None
    """(job id, array task) that ran the attempt, when its claim or attempt record says."""
    pinned: bool = False
    """The attempt was asked for: a newer one is not followed."""


@dataclass(frozen=True)
class Source:
    """One log file to read."""

    shard: int
    attempt: int | None
    step: LogStep
    path: Path
    job_id: str | None = None
    array_task: int | None = None


def run_logs(
    run: str | Path,
    *,
    shard: int | None = None,
    attempt: int | None = None,
    step: LogStep | None = None,
    tail: int | None = None,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    clock: Clock = system_clock,
) -> RunLogs:
    """The last ``tail`` lines (default :data:`DEFAULT_TAIL`) of each chosen log of ``run`` (a run id or directory).

    Asks no scheduler. Errors: ``attempt`` without ``shard`` or ``tail`` < 1 (exit 2); no such run, shard or
    attempt (exit 3, naming the shards or attempts there are); a run record or plan that cannot be read (exit 5).
    """
    check_selection(shard, attempt)
    lines = check_tail(tail)
    layout = locate_run(run, profile=profile, cluster=cluster, environ=environ)
    snapshot = read_run(layout, clock=clock)
    selection, chosen, skipped = choose(snapshot, shard=shard, attempt=attempt)
    return collect(snapshot, selection, chosen, step=step, tail=lines, succeeded_skipped=skipped)


def choose(
    snapshot: RunSnapshot, *, shard: int | None = None, attempt: int | None = None
) -> tuple[LogSelection, list[Chosen], int]:
    """Which shards and attempts to show, and how many succeeded shards the default selection left out."""
    check_selection(shard, attempt)
    if shard is None:
        chosen = [_chosen(s, None) for s in snapshot.shards if s.missing]
        return "not_succeeded", chosen, len(snapshot.shards) - len(chosen)
    found = next((s for s in snapshot.shards if s.plan.shard == shard), None)
    if found is None:
        raise NotFoundError(
            f"run {str(snapshot.layout.run_id)!r} has no shard {shard} (its shards: 0-{len(snapshot.shards) - 1})",
            code="shard_not_found",
            key_path=("--shard",),
            file=str(snapshot.layout.run_dir),
            hint=f"pick a shard between 0 and {len(snapshot.shards) - 1}",
        )
    numbers = [a.number for a in found.attempts]
    if attempt is not None and attempt not in numbers:
        has = f"its attempts: {', '.join(map(str, numbers))}" if numbers else "it has no attempt yet"
        raise NotFoundError(
            f"shard {shard} has no attempt {attempt} ({has})",
            code="attempt_not_found",
            key_path=("--attempt",),
            file=str(snapshot.layout.attempts_dir(shard)),
            hint="pick one of its attempts, or leave --attempt out for the latest"
            if numbers
            else "leave --attempt out: the shard's batch output shows why no attempt started",
        )
    return ("shard" if attempt is None else "attempt"), [_chosen(found, attempt)], 0


def _chosen(shard: ShardSnapshot, attempt: int | None) -> Chosen:
    k = shard.plan.shard
    if not shard.attempts:
        return Chosen(k, None, shard.tasks)
    latest = shard.attempts[-1]
    picked = latest if attempt is None else next(a for a in shard.attempts if a.number == attempt)
    ran_by = _ran_by(picked)
    named = {who for who in map(_ran_by, shard.attempts) if who is not None}
    tasks = [t for t in shard.tasks if (t.job_id, t.array_task) == ran_by]
    if picked is latest:  # a task no attempt names (a retry whose batch script failed) belongs with the latest
        tasks += [t for t in shard.tasks if (t.job_id, t.array_task) not in named]
    return Chosen(k, picked.number, tuple(tasks), ran_by, pinned=attempt is not None)


def _ran_by(attempt: AttemptSnapshot) -> tuple[str, int] | None:
    for record in (attempt.claim, attempt.record):
        if record is not None and record.job_id is not None and record.array_task is not None:
            return record.job_id, record.array_task
    return None


def collect(
    snapshot: RunSnapshot,
    selection: LogSelection,
    chosen: list[Chosen],
    *,
    step: LogStep | None,
    tail: int,
    succeeded_skipped: int = 0,
) -> RunLogs:
    """The tails of the chosen shards' logs (empty batch output is left out: it says nothing)."""
    layout = snapshot.layout
    files: list[LogFile] = []
    notes: list[str] = []
    for pick in chosen:
        found = 0
        for source in sources(layout, pick, step, notes):
            read = read_tail(source.path, tail)
            if read is None:
                refused = _refused(source.path)
                if refused is not None:
                    notes.append(
                        f"shard {pick.shard}: {source.path.name} not read: it is {refused}, not a regular file"
                    )
                continue
            if source.step == "batch" and read.end == 0:
                continue
            found += 1
            files.append(log_file(source, read.lines, size=read.end, truncated=read.truncated))
        if not found:
            notes.append(_nothing(pick, step))
    return RunLogs(
        run_id=str(layout.run_id),
        run_dir=str(layout.run_dir),
        selection=selection,
        step=step,
        tail=tail,
        shards=tuple(pick.shard for pick in chosen),
        succeeded_skipped=succeeded_skipped,
        files=tuple(files),
        notes=tuple(notes),
    )


def sources(layout: RunLayout, pick: Chosen, step: LogStep | None, notes: list[str] | None = None) -> Iterator[Source]:
    """The files of ``pick`` for ``step`` (every step when None) that may exist: batch, supervisor, server, client."""
    if step in (None, "batch"):
        for task in pick.tasks:
            for stream in BATCH_STREAMS:
                try:
                    path = layout.batch_log(task.job_name, task.array_task, stream)
                except SlurmExtensionError as exc:
                    if notes is not None and stream == BATCH_STREAMS[0]:
                        notes.append(f"shard {pick.shard}: batch output not read: {exc.info.message}")
                    continue
                yield Source(pick.shard, pick.attempt, "batch", path, task.job_id, task.array_task)
    if pick.attempt is None:
        return
    logs = layout.logs_dir(pick.shard, pick.attempt)
    if step in (None, "supervisor"):
        yield Source(pick.shard, pick.attempt, "supervisor", logs / f"supervisor{_LOG_SUFFIX}")
    if step in (None, "server"):
        for name in _server_logs(logs):
            yield Source(pick.shard, pick.attempt, "server", logs / name)
    if step in (None, "client"):
        yield Source(pick.shard, pick.attempt, "client", logs / f"client{_LOG_SUFFIX}")


def _refused(path: Path) -> str | None:
    """What stands at ``path`` when it exists but is no regular file (a link is never followed, a FIFO never read)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else file_kind(mode)


def _server_logs(logs: Path) -> list[str]:
    try:
        names = os.listdir(logs)
    except OSError:
        return []
    return sorted(n for n in names if n.startswith(_SERVER_PREFIX) and n.endswith(_LOG_SUFFIX))


def log_file(source: Source, lines: tuple[str, ...], *, size: int, truncated: bool) -> LogFile:
    return LogFile(
        shard=source.shard,
        attempt=source.attempt,
        step=source.step,
        path=str(source.path),
        job_id=source.job_id,
        array_task=source.array_task,
        size=size,
        lines=lines,
        truncated=truncated,
    )


def _nothing(pick: Chosen, step: LogStep | None) -> str:
    which = f"{step} log" if step else "log file"
    if pick.attempt is not None:
        return f"shard {pick.shard}: attempt {pick.attempt} has no {which} yet"
    if not pick.tasks:
        return f"shard {pick.shard}: no {which}: no job was submitted for it"
    if step not in (None, "batch"):
        return f"shard {pick.shard}: no {which}: no attempt has started (--step batch shows Slurm's output)"
    return f"shard {pick.shard}: no {which} yet: no attempt has started and Slurm wrote no batch output (pending?)"


def check_selection(shard: int | None, attempt: int | None) -> None:
    """``attempt`` needs ``shard`` (checked before anything is read)."""
    if attempt is not None and shard is None:
        raise InvalidInputError(
            f"attempt {attempt} of which shard? attempt numbers count per shard",
            code="attempt_needs_shard",
            key_path=("--attempt",),
            hint="add --shard K (the shard whose attempt to show); 'status --shards' lists each shard's attempts",
        )


def check_tail(tail: int | None) -> int:
    if tail is None:
        return DEFAULT_TAIL
    if isinstance(tail, bool) or not isinstance(tail, int) or tail < 1:
        raise InvalidInputError(
            f"--tail {tail!r} is not a positive number of lines",
            code="invalid_tail",
            key_path=("--tail",),
            hint=f"pass --tail N with N >= 1 (default {DEFAULT_TAIL})",
        )
    return tail
