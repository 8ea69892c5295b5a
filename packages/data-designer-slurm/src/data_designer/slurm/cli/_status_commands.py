"""``data-designer slurm status RUN`` and ``wait RUN``: how a run stands, from any fresh shell."""

from __future__ import annotations

import csv
import io
import sys
import time
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from data_designer.slurm.cli._output import DebugOption, JsonOption, one_line, run, table
from data_designer.slurm.cli._profile_commands import ClusterOption, ProfileOption

if TYPE_CHECKING:
    from data_designer.slurm.contracts import MergeStatus, RunStatus, ShardStatus, WaitResult

EXIT_UNAVAILABLE = 5
EXIT_CHECK_FAILED = 6
CSV_COLUMNS = (
    "shard",
    "state",
    "records_done",
    "records_total",
    "reason",
    "job_id",
    "array_task",
    "attempts",
    "message",
    "last_log_line",
)
"""The fixed header of ``status --format csv`` (one row per shard). Text cells pass ``contracts.csv_text``: one that
a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, tab, CR first) starts with ``'``."""


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


RunArgument = Annotated[str, typer.Argument(metavar="RUN", help="The run id 'execute' printed, or its run directory.")]


def status(
    run_ref: RunArgument,
    shards: Annotated[bool, typer.Option("--shards", help="List every shard, not only those not succeeded.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Exit 6 unless the run succeeded.")] = False,
    no_refresh: Annotated[
        bool, typer.Option("--no-refresh", help="Do not ask Slurm: classify with the last recorded observation.")
    ] = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Hash every published part against its manifest's sha256 (one thread per core): a shard with a "
            "corrupt part is damaged. Without it, each part's existence and size are checked.",
        ),
    ] = False,
    output: Annotated[Format, typer.Option("--format", help="table, json or csv.")] = Format.table,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show how a run stands: records done, shards per state, and why each shard that is not succeeded is not.

    One squeue and one sacct call for the whole run (appended to the run directory as an observation); when
    Slurm cannot be asked, the last recorded observation is used and its age shown; when one of the two fails,
    the summary names it and what it hides. Every published part is checked to exist with its manifest's size;
    --verify also hashes each one (a progress bar on a terminal).

    Exit codes: 0 (whatever the run's state); 5 Slurm (squeue, sacct or both) could not be asked and a shard's
    state depends on it (the last known state is still printed); 6 with --check unless the run succeeded; 2
    invalid input; 3 no such run.
    """
    from data_designer.slurm.services import is_unavailable, run_status

    fmt = Format.json if as_json else output
    bar = _VerifyBar(enabled=verify and not as_json and fmt is Format.table)

    def exit_code(result: RunStatus) -> int:
        if is_unavailable(result):
            return EXIT_UNAVAILABLE
        return EXIT_CHECK_FAILED if check and not result.succeeded else 0

    try:
        run(
            "status",
            lambda: run_status(
                run_ref,
                profile=profile,
                cluster=cluster,
                refresh=not no_refresh,
                verify=verify,
                on_verify=bar.show,
            ),
            (lambda result: render_csv(result))
            if fmt is Format.csv
            else (lambda result: render_status(result, shards)),
            as_json=fmt is Format.json,
            debug=debug,
            exit_code=exit_code,
            verbatim=fmt is Format.csv,
        )
    finally:
        bar.close()


class _VerifyBar:
    """Bytes hashed by ``status --verify``, as a transient Rich bar on a terminal; nothing elsewhere."""

    def __init__(self, *, enabled: bool, tty: bool | None = None) -> None:
        self._enabled = enabled and (sys.stderr.isatty() if tty is None else tty)
        self._bar: object | None = None
        self._task: object | None = None

    def show(self, parts_done: int, parts: int, done: int, total: int) -> None:
        if not self._enabled:
            return
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        if self._bar is None:
            bar = Progress(
                TextColumn("verifying {task.fields[parts]}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                transient=True,
            )
            bar.start()
            self._task = bar.add_task("verify", total=total, parts=f"0/{parts} parts")
            self._bar = bar
        assert isinstance(self._bar, Progress)
        self._bar.update(self._task, completed=done, parts=f"{parts_done}/{parts} parts")  # type: ignore[arg-type]

    def close(self) -> None:
        if self._bar is not None:
            from rich.progress import Progress

            assert isinstance(self._bar, Progress)
            self._bar.stop()


def wait(
    run_ref: RunArgument,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="Give up after this many seconds (exit 6). Default: a day.")
    ] = 24 * 3600.0,
    interval: Annotated[float, typer.Option("--interval", min=0.1, help="Seconds between polls.")] = 15.0,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Wait in the foreground until a run ends, showing records done (a bounded poll; Ctrl-C stops only the wait).

    Exit codes: 0 the run succeeded; 6 it ended otherwise, or the timeout passed; 5 Slurm could not be asked
    and shards were unknown when the timeout passed.
    """
    from data_designer.slurm.services import wait_run

    progress = _Progress(enabled=not as_json)

    def exit_code(result: WaitResult) -> int:
        return {"succeeded": 0, "unavailable": EXIT_UNAVAILABLE}.get(result.outcome, EXIT_CHECK_FAILED)

    try:
        run(
            "wait",
            lambda: wait_run(
                run_ref, profile=profile, cluster=cluster, timeout_s=timeout, interval_s=interval, on_poll=progress.show
            ),
            lambda result: (
                f"wait: {result.outcome} after {result.waited_s:.0f}s ({result.polls} polls)\n"
                + render_status(result.status, False)
            ),
            as_json=as_json,
            debug=debug,
            exit_code=exit_code,
        )
    finally:
        progress.close()


class _Progress:
    """A Rich progress bar of records done on a terminal, drawn at the final state before it closes; elsewhere one
    plain line when the state, the records or the shard counts changed, and at least one every
    :data:`HEARTBEAT_S` seconds, so a log shows the wait is alive without repeating itself every poll."""

    HEARTBEAT_S = 60.0

    def __init__(
        self,
        *,
        enabled: bool,
        tty: bool | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        echo: Callable[[str], None] | None = None,
    ) -> None:
        self._enabled = enabled
        self._bar: object | None = None
        self._task: object | None = None
        self._tty = enabled and (sys.stderr.isatty() if tty is None else tty)
        self._monotonic = monotonic
        self._echo = echo or (lambda line: typer.echo(line, err=True))
        self._printed: tuple[object, ...] | None = None
        self._printed_at = 0.0

    def show(self, result: RunStatus) -> None:
        if not self._enabled:
            return
        if not self._tty:
            now = self._monotonic()
            what = (result.state, result.records_done, _counts(result))
            if what != self._printed or now - self._printed_at >= self.HEARTBEAT_S:
                self._echo(one_line(summary(result)))
                self._printed, self._printed_at = what, now
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        if self._bar is None:
            bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
            bar.start()
            self._task = bar.add_task(result.run_id, total=result.records_total)
            self._bar = bar
        assert isinstance(self._bar, Progress)
        # refresh now: the last poll's state is drawn before close(), not left to the next auto-refresh tick
        self._bar.update(
            self._task,  # type: ignore[arg-type]
            completed=result.records_done,
            description=one_line(_counts(result)),
            refresh=True,
        )

    def close(self) -> None:
        if self._bar is not None:
            from rich.progress import Progress

            assert isinstance(self._bar, Progress)
            self._bar.refresh()
            self._bar.stop()


def summary(result: RunStatus) -> str:
    """One line: state, records, shards per state, where the evidence came from and how old, the ETA (the Python
    client's line too: ``services._status_text``)."""
    from data_designer.slurm.services.context import run_summary

    return run_summary(result)


def render_status(result: RunStatus, every_shard: bool) -> str:
    lines = [summary(result)]
    if result.submission_error:
        lines.append(f"not submitted: {result.submission_error}")
    if result.scheduler_error:
        lines.append(f"Slurm could not be asked: {result.scheduler_error}")
    lines.extend(degraded_lines(result))
    if result.verify is not None:
        lines.append(verify_line(result))
    if result.merge is not None:
        lines.append(merge_line(result.merge))
    shown = [s for s in result.shards if every_shard or s.state != "succeeded"]
    if shown:
        rows = [
            [
                str(s.shard),
                s.state,
                f"{s.records_done}/{s.records_total}",
                _why(s),
                _job(s),
                str(len(s.attempts)),
                s.last_log_line or "",
            ]
            for s in shown
        ]
        lines.append(table(["SHARD", "STATE", "RECORDS", "REASON", "JOB", "ATTEMPTS", "LAST LOG LINE"], rows))
    anomalies = [f"shard {s.shard}: {note}" for s in result.shards for note in s.anomalies]
    if anomalies:
        lines.append("anomalies:")
        lines.extend(f"  {note}" for note in anomalies[:20])
        if len(anomalies) > 20:
            lines.append(f"  ... and {len(anomalies) - 20} more (--json shows all)")
    return "\n".join(lines)


def degraded_lines(result: RunStatus) -> list[str]:
    """One line per source that failed while the other answered: what it hides, and which shards depend on it."""
    lines = []
    for item in result.degraded:
        detail = f" ({one_line(item.detail)})" if item.detail else ""
        depends = (
            f"; shard(s) {_shard_list(item.shards)} depend on it and are unknown until it answers"
            if item.shards
            else "; no shard's state depends on it now"
        )
        lines.append(f"{item.source} {item.status}{detail}: {item.hides}{depends}")
    return lines


def verify_line(result: RunStatus) -> str:
    v = result.verify
    assert v is not None
    rate = f", {v.bytes / v.seconds / 1e6:.0f} MB/s" if v.seconds > 0 else ""
    damaged = f"{v.damaged} damaged" if v.damaged else "every part matches its manifest"
    return f"verified {v.parts} part(s), {v.bytes / 1e6:.1f} MB in {v.seconds:.2f}s ({v.workers} worker(s){rate}): {damaged}"


def _shard_list(shards: tuple[int, ...]) -> str:
    shown = ", ".join(map(str, shards[:10]))
    return shown + (f" (+{len(shards) - 10} more)" if len(shards) > 10 else "")


def merge_line(merge: MergeStatus) -> str:
    """``merge: succeeded (job 123): 40 records, complete, in DIR`` and the like."""
    job = f" (job {merge.job_id})" if merge.job_id else ""
    parts = [f"merge: {merge.state}{job}"]
    if merge.records is not None:
        parts.append(f"{merge.records} records, {'complete' if merge.complete else 'partial'}")
    if merge.merge_dir:
        parts.append(f"in {merge.merge_dir}")
    if merge.message:
        parts.append(merge.message)
    return ": ".join(parts[:2]) + "".join(f", {part}" for part in parts[2:])


def render_csv(result: RunStatus) -> str:
    """One row per shard under :data:`CSV_COLUMNS`; numbers as numbers, text through ``csv_text``."""
    from data_designer.slurm.contracts import csv_text

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for s in result.shards:
        writer.writerow(
            [
                s.shard,
                s.state,
                s.records_done,
                s.records_total,
                csv_text(s.reason or ""),
                csv_text(s.job_id or ""),
                "" if s.array_task is None else s.array_task,
                len(s.attempts),
                csv_text(s.message or ""),
                csv_text(s.last_log_line or ""),
            ]
        )
    return buffer.getvalue().rstrip("\n")


def _why(shard: ShardStatus) -> str:
    if shard.state == "running":
        return shard.phase or ""
    parts = [part for part in (shard.reason, shard.message) if part]
    return ": ".join(parts)


def _job(shard: ShardStatus) -> str:
    if shard.job_id is None:
        return ""
    return shard.job_id if shard.array_task is None else f"{shard.job_id}_{shard.array_task}"


def _counts(result: RunStatus) -> str:
    from data_designer.slurm.services.context import counts_text

    return counts_text(result.counts)


def _evidence(result: RunStatus) -> str:
    from data_designer.slurm.services.context import evidence_text

    return evidence_text(result)


def _duration(seconds: float) -> str:
    from data_designer.slurm.services.context import duration_text

    return duration_text(seconds)
