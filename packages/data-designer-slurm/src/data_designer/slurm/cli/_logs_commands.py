"""``data-designer slurm logs RUN``: the logs of a run's shards, or with ``--follow`` a foreground tail of them."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from data_designer.slurm.cli._output import DebugOption, JsonOption, fail, one_line, run
from data_designer.slurm.cli._profile_commands import ClusterOption, ProfileOption
from data_designer.slurm.cli._status_commands import RunArgument

if TYPE_CHECKING:
    from data_designer.slurm.contracts import LogFile, LogFollow, LogStep, RunLogs

DEFAULT_TAIL = 200
"""As ``services.runs._logs.DEFAULT_TAIL`` (not imported: ``--help`` imports no service)."""


class Step(StrEnum):
    batch = "batch"
    supervisor = "supervisor"
    server = "server"
    client = "client"


def logs(
    run_ref: RunArgument,
    shard: Annotated[
        int | None, typer.Option("--shard", min=0, metavar="K", help="Only this shard (whatever its state).")
    ] = None,
    attempt: Annotated[
        int | None,
        typer.Option("--attempt", min=1, metavar="N", help="This attempt of the --shard (default: its latest)."),
    ] = None,
    step: Annotated[
        Step | None,
        typer.Option(
            "--step",
            help="Only one step's logs: batch (Slurm's slurm-*.out/.err), supervisor, server (every replica), client.",
        ),
    ] = None,
    tail: Annotated[
        int, typer.Option("--tail", min=1, metavar="N", help="The last N lines of each file.")
    ] = DEFAULT_TAIL,
    follow: Annotated[
        bool,
        typer.Option("--follow", help="Keep printing new lines until the attempts end (Ctrl-C stops only this)."),
    ] = False,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show the logs of a run: by default the latest attempt of every shard that did not succeed.

    Each file gets a header naming its shard, attempt and step: Slurm's own batch output (slurm-*.out/.err, where a
    shard whose batch script failed before any attempt started says why), the supervisor's, every model server's
    and the client's log. No Slurm call, except with --follow (at most one squeue and one sacct every few seconds).

    Exit codes: 0; 2 invalid input (--attempt without --shard, --follow with --json); 3 no such run, shard or
    attempt; 130 interrupted (how --follow is stopped before the attempts end).
    """
    chosen: LogStep | None = None if step is None else step.value
    if follow and as_json:
        from data_designer.slurm.contracts import InvalidInputError

        error = InvalidInputError(
            "--follow prints lines as they are written and has no JSON result",
            code="usage_error",
            operation="logs",
            key_path=("--follow",),
            hint="drop --json to follow the logs, or drop --follow to print them once as JSON",
        )
        fail(error, as_json=True, debug=debug)
    if follow:
        from data_designer.slurm.services import follow_logs

        printer = _Printer()
        run(
            "logs",
            lambda: follow_logs(
                run_ref,
                on_logs=printer.show,
                shard=shard,
                attempt=attempt,
                step=chosen,
                tail=tail,
                profile=profile,
                cluster=cluster,
            ),
            render_follow,
            as_json=False,
            debug=debug,
        )
        return
    from data_designer.slurm.services import run_logs

    run(
        "logs",
        lambda: run_logs(
            run_ref,
            shard=shard,
            attempt=attempt,
            step=chosen,
            tail=tail,
            profile=profile,
            cluster=cluster,
        ),
        render_logs,
        as_json=as_json,
        debug=debug,
    )


def header(log: LogFile) -> str:
    """``==> shard 3, attempt 1, server: <path> <==`` (a batch file names its job and task)."""
    where = [f"shard {log.shard}", f"attempt {log.attempt}" if log.attempt is not None else "no attempt"]
    what: str = log.step
    if log.job_id is not None:
        what += f" (job {one_line(log.job_id)}_{log.array_task})"
    return f"==> {', '.join(where)}, {what}: {one_line(log.path)} <=="


def render_file(log: LogFile) -> list[str]:
    lines = [header(log)]
    if log.truncated:
        lines.append(f"... (earlier lines not shown: these are the last {len(log.lines)}; --tail N shows more)")
    if not log.lines:
        lines.append("(empty)")
    lines.extend(one_line(line) for line in log.lines)
    return lines


def render_logs(result: RunLogs) -> str:
    blocks = ["\n".join(render_file(log)) for log in result.files]
    footer = [one_line(note) for note in result.notes]
    if result.succeeded_skipped:
        every = not result.shards
        footer.append(
            ("every shard" if every else f"{result.succeeded_skipped} shard(s)")
            + " succeeded"
            + (": nothing to show" if every else ", not shown")
            + " (--shard K shows one)"
        )
    if not blocks and not footer:
        footer.append("no log files")
    return "\n\n".join([*blocks, "\n".join(footer)] if footer else blocks)


def render_follow(result: LogFollow) -> str:
    if result.outcome == "nothing_to_follow":
        return "logs: nothing to follow (every shard succeeded; --shard K follows one)"
    shards = ", ".join(map(str, result.followed))
    return f"logs: the followed attempts ended (shards {shards}; {result.lines} new lines)"


class _Printer:
    """Prints each file's lines as they come, with its header whenever the file changes."""

    def __init__(self) -> None:
        self._last: str | None = None

    def show(self, log: LogFile) -> None:
        out: list[str] = []
        if log.path != self._last:
            if self._last is not None:
                out.append("")
            out.append(header(log))
            if log.truncated:
                out.append("... (earlier lines not shown; --tail N shows more)")
            self._last = log.path
        out.extend(one_line(line) for line in log.lines)
        if out:
            sys.stdout.write("\n".join(out) + "\n")
            sys.stdout.flush()
