"""``data-designer slurm runs ls`` and ``runs rm RUN``: find the runs of a workspace, and clean up."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from data_designer.slurm.cli._output import DebugOption, JsonOption, run, table
from data_designer.slurm.cli._profile_commands import ClusterOption, ProfileOption

if TYPE_CHECKING:
    from data_designer.slurm.contracts import RunRemoved, RunsList, RunSummary

runs_app = typer.Typer(
    name="runs",
    help="List the runs of the profile's workspace, and remove runs.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@runs_app.command("ls")
def ls(
    every: Annotated[bool, typer.Option("--all", help="List every run, not only the 20 newest.")] = False,
    refresh: Annotated[
        bool,
        typer.Option("--refresh", help="Ask Slurm now: one squeue and one sacct for all listed runs (recorded)."),
    ] = False,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """List the runs in the workspace, newest first: state, records done, shards per state.

    Without --refresh each run is shown as its last recorded observation left it (no Slurm call). A directory
    that is not a readable run is listed as incomplete or unreadable, with why.

    Exit codes: 0; 2 invalid input; 3 no profile; 5 the workspace cannot be listed.
    """
    from data_designer.slurm.services import list_runs

    run(
        "runs.ls",
        lambda: list_runs(all=every, refresh=refresh, profile=profile, cluster=cluster),
        render_runs,
        as_json=as_json,
        debug=debug,
    )


@runs_app.command("rm")
def rm(
    run_ref: Annotated[
        str, typer.Argument(metavar="RUN", help="The run id, or its run directory (in the profile's workspace).")
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Cancel the run's live shards or jobs first, then remove it.")
    ] = False,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Remove a run directory. Refuses a run with shards pending, running, stale or unknown unless --force.

    Only a run directly inside the workspace's runs/ of the selected --profile and --cluster is removed. A run
    whose submission was refused, or whose run record was never written, is removed without asking Slurm. A run
    with no submission record (sbatch's reply was lost, or execute stopped before recording it) is looked up in
    Slurm by job name first: its queued or running jobs refuse the removal, and --force cancels them first.

    Exit codes: 0 removed; 2 not a run directory of the workspace; 3 no such run; 4 live shards or jobs (without
    --force) or an unreadable run; 5 Slurm could not be asked.
    """
    from data_designer.slurm.services import remove_run

    run(
        "runs.rm",
        lambda: remove_run(run_ref, force=force, profile=profile, cluster=cluster),
        render_removed,
        as_json=as_json,
        debug=debug,
    )


def _created(stamp: str | None) -> str:
    """``2026-12-01T14:58:10.000000Z`` as ``2026-12-01 14:58:10Z`` (run ids have whole seconds)."""
    if not stamp:
        return ""
    day, _, clock = stamp.partition("T")
    return f"{day} {clock.split('.')[0].rstrip('Z')}Z" if clock else stamp


def render_runs(result: RunsList) -> str:
    if not result.runs:
        return f"no runs in {result.workspace}/runs (cluster {result.cluster})"
    rows = [
        [
            item.run_id,
            _created(item.created_at),
            item.state,
            _records(item),
            _counts(item) if item.problem is None else item.problem,
        ]
        for item in result.runs
    ]
    lines = [table(["RUN", "CREATED", "STATE", "RECORDS", "SHARDS"], rows)]
    shown = f"{len(result.runs)} of {result.total} run(s) in {result.workspace}/runs"
    if result.hidden:
        shown += f"; {result.hidden} older hidden (--all shows them)"
    lines.append(shown + "; " + _evidence(result))
    return "\n".join(lines)


def render_removed(result: RunRemoved) -> str:
    lines = [f"removed {result.run_id} ({result.state}): {result.run_dir}"]
    if result.cancelled is not None:
        shards = ", ".join(map(str, result.cancelled.shards)) or "none"
        confirmed = "confirmed" if result.cancelled.confirmed else "NOT confirmed"
        lines.append(f"cancelled first: shard(s) {shards} ({confirmed})")
    if result.note:
        lines.append(result.note)
    return "\n".join(lines)


def _records(item: RunSummary) -> str:
    if item.records_total is None:
        return ""
    return f"{item.records_done or 0}/{item.records_total}"


def _counts(item: RunSummary) -> str:
    return ", ".join(f"{count} {state}" for state, count in item.counts.items())


def _evidence(result: RunsList) -> str:
    if not result.refreshed:
        return "last recorded observations (no Slurm call; --refresh asks Slurm)"
    if result.scheduler_error:
        return f"Slurm could not be asked ({result.scheduler_error}): last recorded observations"
    return f"asked Slurm now ({result.scheduler_calls} calls)"
