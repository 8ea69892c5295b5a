"""``data-designer slurm execute RUN --dry-run``: compile a run file into its plan, offline, and review it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from data_designer.slurm.cli._output import DebugOption, JsonOption, run, table
from data_designer.slurm.cli._profile_commands import ClusterOption, ProfileOption

if TYPE_CHECKING:
    from data_designer.slurm.contracts import (
        DryRunOutput,
        ExecuteResult,
        PlanSummary,
        PlanWarning,
        RunDryRun,
        Unresolved,
    )

DryRunFlag = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Compile the plan and show it without submitting anything (no Slurm, no workspace, no image bytes).",
    ),
]
OutOption = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Also write the plan (canonical JSON), batch scripts and submission units into this directory.",
        file_okay=False,
    ),
]
ForceOption = Annotated[bool, typer.Option("--force", help="Write into a non-empty --out directory.")]
MaxArraySizeOption = Annotated[
    int | None,
    typer.Option("--max-array-size", min=1, help="The cluster's MaxArraySize (default 1001, Slurm's default)."),
]

ClusterCheckFlag = Annotated[
    bool,
    typer.Option(
        "--cluster-check",
        help="With --dry-run: compile with the cluster's facts (cached in the workspace or asked from Slurm) and "
        "refuse, as execute does, a plan that asks for more CPUs, memory, GPUs, nodes or time than the partition "
        "offers.",
    ),
]

RunIdOption = Annotated[
    str | None,
    typer.Option(
        "--run-id",
        metavar="ID",
        help="Submit the chunks of this existing run that Slurm does not hold yet (its snapshot, not RUN, is used).",
    ),
]


def execute(
    run_file: Annotated[Path, typer.Argument(metavar="RUN", help="Run file (YAML or JSON).")],
    dry_run: DryRunFlag = False,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    out: OutOption = None,
    force: ForceOption = False,
    max_array_size: MaxArraySizeOption = None,
    cluster_check: ClusterCheckFlag = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Submit a run file's shards to Slurm, or plan it offline.

    Returns at once after submitting: nothing keeps running on this machine.

    Without --dry-run: the cluster's facts are read from Slurm (or the workspace's cache, while under
    an hour old), the plan is compiled (refused while anything is unresolved, or while it asks for
    more CPUs, memory, GPUs, nodes or time than the partition offers), a run directory is created under the profile's workspace_root with a
    snapshot of the run file, the Data Designer config and its seed files, the plan and the run
    record, and every array chunk is submitted. The run id, run directory and job ids are printed;
    nothing keeps running on this machine. --run-id ID submits the chunks of an existing run that
    Slurm does not hold yet (never twice).

    With --dry-run the run is compiled against the profile's cluster and summarised: shards,
    allocations, nodes and GPUs, the upper bound of GPU-hours, the model aliases, and anything
    unresolved offline (images named from the registry, gpus_per_node 'auto'), which blocks
    submission. Nothing is submitted and Slurm is not contacted. With --cluster-check as well, the
    cluster's facts are used (the workspace's cache while under an hour old, else Slurm is asked;
    nothing is written) and a plan asking for more CPUs, memory, GPUs, nodes or time than the
    partition offers is refused exactly as execute refuses it.

    Exit codes: 0 planned or submitted; 2 invalid input (every problem listed with file, line and
    key) or an unresolved plan; 3 a file or run does not exist; 4 --out is not empty (pass --force);
    5 Slurm or the workspace is unavailable (the error names the --run-id that resumes the run).
    """
    if not dry_run:
        dry_run_options = {
            "--out": out is not None,
            "--force": force,
            "--max-array-size": max_array_size is not None,
            "--cluster-check": cluster_check,
        }
        submit(run_file, profile, cluster, run_id, [o for o, given in dry_run_options.items() if given], as_json, debug)
        return

    def call() -> RunDryRun:
        if run_id is not None:
            raise dry_run_only("--run-id", "submitting an existing run")
        from data_designer.slurm.services import plan_run

        return plan_run(
            run_file,
            profile=profile,
            cluster=cluster,
            out=out,
            force=force,
            max_array_size=max_array_size,
            cluster_check=cluster_check,
        )

    def render(result: RunDryRun) -> str:
        head = f"Dry run of run {result.plan.name!r} on cluster {result.cluster!r} (nothing submitted)"
        if result.facts.partitions:  # --cluster-check passed
            head += f"; fits partition {result.plan.partition!r} as Slurm describes it"
        return "\n".join([head, *plan_lines(result.plan), "", alias_table(result.plan), *tail_lines(result)])

    run("execute.dry_run", call, render, as_json=as_json, debug=debug)


def gpu_hours(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def plan_lines(plan: PlanSummary) -> list[str]:
    """The plan's numbers, one labelled line each."""
    nodes = "? nodes" if plan.nodes_per_allocation is None else _count(plan.nodes_per_allocation, "node")
    per_node = "gpus_per_node unresolved" if plan.gpus_per_node is None else f"{plan.gpus_per_node} GPUs per node"
    account = plan.account or "(default)"
    rows = [
        ("plan", f"sha256 {plan.digest}"),
        ("records", f"{plan.records} in {_count(plan.shards, 'shard')} ({_count(plan.array_jobs, 'array job')})"),
        (
            "allocation",
            f"one per shard: {nodes}, {plan.gpus_per_allocation} GPUs ({per_node}), partition {plan.partition}, "
            f"account {account}, time limit {plan.time_limit}",
        ),
        ("GPU-hours", f"at most {gpu_hours(plan.gpu_hours_upper_bound)}"),
        ("submittable", _submittable(plan.submittable, plan.unresolved)),
    ]
    return [f"  {label:<12} {value}" for label, value in rows]


def alias_table(plan: PlanSummary) -> str:
    rows = [
        [
            a.alias,
            a.kind,
            a.engine or "-",
            a.model if a.endpoint is None else f"{a.model} at {a.endpoint}",
            str(a.replicas),
            str(a.gpus_per_replica),
            str(a.concurrency),
        ]
        for a in plan.aliases
    ]
    return table(["alias", "kind", "engine", "model", "replicas", "GPUs/replica", "concurrency"], rows)


def tail_lines(result: RunDryRun) -> list[str]:
    return [*issue_lines(result.plan.unresolved, result.plan.warnings), *output_lines(result.output)]


def issue_lines(unresolved: tuple[Unresolved, ...], warnings: tuple[PlanWarning, ...]) -> list[str]:
    """Unresolved entries (with their fix) and warnings, each on its own line."""
    lines: list[str] = []
    if unresolved:
        lines += ["", "Unresolved (blocks submission):"]
        lines += [f"  {u.key_path}: {u.detail} (fix: {u.hint})" for u in unresolved]
    if warnings:
        lines += ["", "Warnings:"]
        lines += [f"  {w.key_path + ': ' if w.key_path else ''}{w.message} ({w.code})" for w in warnings]
    return lines


def output_lines(output: DryRunOutput | None) -> list[str]:
    if output is None:
        return []
    verb = "Wrote (over existing files)" if output.overwritten else "Wrote"
    files = ", ".join(output.files) if len(output.files) <= 3 else _count(len(output.files), "file")
    return ["", f"{verb} {output.directory}: {files}"]


def _submittable(ok: bool, unresolved: tuple[Unresolved, ...]) -> str:
    return "yes" if ok else f"no: {_count(len(unresolved), 'unresolved entry')}"


def _count(n: int, noun: str) -> str:
    if n == 1:
        return f"1 {noun}"
    return f"{n} {noun[:-1]}ies" if noun.endswith("entry") else f"{n} {noun}s"


def submit(
    run_file: Path,
    profile: Path | None,
    cluster: str | None,
    run_id: str | None,
    dry_run_options: list[str],
    as_json: bool,
    debug: bool,
) -> None:
    """``execute`` without --dry-run: create (or resume) the run and submit it."""

    def call() -> ExecuteResult:
        if dry_run_options:
            option = dry_run_options[0]
            raise dry_run_only_error(
                option, f"add --dry-run, or leave out {option} (a submission reads the cluster's own facts)"
            )
        from data_designer.slurm.services import execute_run

        return execute_run(run_file, profile=profile, cluster=cluster, run_id=run_id)

    run("execute", call, render_submission, as_json=as_json, debug=debug)


def dry_run_only_error(option: str, hint: str) -> Exception:
    """An option that only a dry run takes, given to a real submission (exit 2); ``hint`` says what to do instead."""
    from data_designer.slurm.contracts import InvalidInputError

    return InvalidInputError(f"{option} applies to --dry-run only", code="dry_run_only", key_path=(option,), hint=hint)


def dry_run_only(option: str, what: str) -> Exception:
    """An option that only a real submission takes, given to a dry run (exit 2)."""
    from data_designer.slurm.contracts import InvalidInputError

    return InvalidInputError(
        f"{option} is for {what} and does not combine with --dry-run",
        code="not_with_dry_run",
        key_path=(option,),
        hint=f"leave out --dry-run to submit, or leave out {option} to review the plan",
    )


def render_submission(result: ExecuteResult) -> str:
    """Run id, run directory, shards, one line per array job, then the plan's warnings."""
    verb = "Resubmitted" if result.resumed else "Submitted"
    rows = [
        [str(job.chunk), job.job_id, job.job_name, job.array_spec, "earlier" if job.recovered else "now"]
        for job in result.jobs
    ]
    lines = [
        f"{verb} run {result.name!r} on cluster {result.cluster!r}",
        f"  {'run id':<12} {result.run_id}",
        f"  {'run dir':<12} {result.run_dir}",
        f"  {'records':<12} {result.records} in {_count(result.shards, 'shard')}",
        f"  {'jobs':<12} {result.submitted} submitted now, {result.recovered} submitted earlier",
        "",
        table(["chunk", "job id", "job name", "array", "submitted"], rows),
        *issue_lines((), result.warnings),
    ]
    return "\n".join(lines)
