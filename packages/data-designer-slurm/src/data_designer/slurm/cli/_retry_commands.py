"""``data-designer slurm retry RUN`` and ``cancel RUN``: act on what ``status`` shows, from any fresh shell."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from data_designer.slurm.cli._output import DebugOption, JsonOption, one_line, run, table
from data_designer.slurm.cli._profile_commands import ClusterOption, ProfileOption
from data_designer.slurm.cli._status_commands import RunArgument

if TYPE_CHECKING:
    from data_designer.slurm.contracts import CancelResult, RetryResult
    from data_designer.slurm.contracts.records import IndexRange

EXIT_UNCONFIRMED = 5

ShardOption = Annotated[
    list[int] | None,
    typer.Option("--shard", min=0, metavar="K", help="Only this shard (repeat for several). Default: every shard."),
]


def retry(
    run_ref: RunArgument,
    shard: ShardOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the shards and the exact record ranges; submit nothing.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Also retry shards that ended invalid_config (they likely fail again).")
    ] = False,
    verify: Annotated[
        bool,
        typer.Option("--verify", help="Hash every published part first (as status --verify): retry the damaged too."),
    ] = False,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Retry the shards that did not succeed: a new attempt each, generating only the record indices they lack.

    Takes failed, partial, cancelled, missing, stale, scheduler_inconsistent and damaged shards (never a succeeded
    one); safe to run twice or from two shells at once: exactly one submits each generation. A damaged shard's lost
    or corrupt parts are set aside (moved under the run's set-aside/, never deleted) and exactly their records are
    generated again. The parts of a shard named with --shard are hashed first; --verify hashes every shard's.

    Exit codes: 0 submitted (or nothing to retry); 2 invalid input; 3 no such run; 4 a named shard is pending,
    running or succeeded, or shards ended invalid_config without --force; 5 Slurm could not be asked.
    """
    from data_designer.slurm.services import retry_run

    run(
        "retry",
        lambda: retry_run(
            run_ref, shards=shard, dry_run=dry_run, force=force, verify=verify, profile=profile, cluster=cluster
        ),
        render_retry,
        as_json=as_json,
        debug=debug,
    )


def cancel(
    run_ref: RunArgument,
    shard: ShardOption = None,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Cancel a run, or some of its shards, across every submission and retry, and record who did it.

    Exit codes: 0 cancelled and confirmed (or nothing was live); 2 invalid input; 3 no such run; 5 Slurm could
    not be asked, or did not confirm the cancellation in time (it is recorded as unconfirmed).
    """
    from data_designer.slurm.services import cancel_run

    run(
        "cancel",
        lambda: cancel_run(run_ref, shards=shard, profile=profile, cluster=cluster),
        render_cancel,
        as_json=as_json,
        debug=debug,
        exit_code=lambda result: 0 if result.confirmed else EXIT_UNCONFIRMED,
    )


def _ranges(ranges: tuple[IndexRange, ...]) -> str:
    shown = ", ".join(f"{r.start}-{r.stop - 1}" if r.stop - r.start > 1 else str(r.start) for r in ranges[:4])
    return shown + (f" (+{len(ranges) - 4} more)" if len(ranges) > 4 else "")


def render_retry(result: RetryResult) -> str:
    lines = []
    if result.resumed:
        verb = "would resume" if result.dry_run else "resumed"
        lines.append(
            f"{verb} retry generation(s) {', '.join(map(str, result.resumed))} (their submission was never recorded)"
        )
    if result.shards:
        head = f"{result.run_id}: "
        if result.dry_run:
            head += f"would retry {len(result.shards)} shard(s), {result.records} record(s); nothing submitted"
        else:
            jobs = ", ".join(f"{job.job_id} ({job.array_spec})" for job in result.jobs) or "-"
            head += (
                f"retry generation {result.generation}: {len(result.shards)} shard(s), {result.records} record(s); "
                f"jobs {jobs}; {result.sbatch_calls} sbatch call(s), {result.recovered} found by name"
            )
        lines.append(head)
        rows = [
            [str(s.shard), s.state, one_line(s.reason or ""), str(s.records), _ranges(s.ranges)] for s in result.shards
        ]
        lines.append(table(["SHARD", "WAS", "REASON", "RECORDS", "RANGES"], rows))
        verb = "would set aside" if result.dry_run else "set aside"
        for s in result.shards:
            for part in s.set_aside:
                where = f" -> {part.moved_to}" if part.moved_to else " (no file to move)"
                lines.append(f"shard {s.shard}: {verb} {part.damage.path}{where}: {one_line(part.damage.detail)}")
    elif not result.resumed:
        lines.append(f"{result.run_id}: nothing to retry")
    if result.stopped:
        verb = "would cancel" if result.dry_run else "cancelled"
        lines.append(f"{verb} the old task(s) Slurm still ran for stale shards: {', '.join(result.stopped)}")
    for number, why in sorted(result.skipped.items(), key=lambda item: int(item[0])):
        lines.append(f"shard {number} not retried: {one_line(why)}")
    return "\n".join(lines)


def render_cancel(result: CancelResult) -> str:
    what = "the whole run" if result.whole_run else f"shard(s) {', '.join(map(str, result.shards))}"
    if not result.targets:
        return f"{result.run_id}: nothing to cancel in {what}: no task is pending or running"
    confirmed = "confirmed" if result.confirmed else "NOT confirmed yet (scancel was accepted; check 'status')"
    lines = [f"{result.run_id}: cancelled {what}: {', '.join(result.targets)}; {confirmed}"]
    if result.already_ended:
        lines.append(f"already ended: shard(s) {', '.join(map(str, result.already_ended))}")
    if result.record:
        lines.append(f"recorded in {result.record}")
    return "\n".join(lines)
