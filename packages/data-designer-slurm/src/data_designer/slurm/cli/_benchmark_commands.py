"""``data-designer slurm benchmark run|status|ls``: submit a benchmark's children, follow them, list benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from data_designer.slurm.cli._execute_commands import (
    DryRunFlag,
    ForceOption,
    MaxArraySizeOption,
    OutOption,
    gpu_hours,
    issue_lines,
    output_lines,
)
from data_designer.slurm.cli._output import DebugOption, JsonOption, run, table
from data_designer.slurm.cli._profile_commands import ClusterOption, ProfileOption

if TYPE_CHECKING:
    from data_designer.slurm.contracts import BenchmarkDryRun, BenchmarkList, BenchmarkRunResult, BenchmarkStatus

benchmark_app = typer.Typer(
    name="benchmark",
    help="Sweep serving settings over child runs and compare them.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

DIGEST_SHOWN = 12
"""Hex characters of a plan digest shown in the children table (--json has them whole)."""


@benchmark_app.command("run")
def run_benchmark(
    bench_file: Annotated[Path, typer.Argument(metavar="BENCH", help="Benchmark file (YAML or JSON).")],
    dry_run: DryRunFlag = False,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    out: OutOption = None,
    force: ForceOption = False,
    max_array_size: MaxArraySizeOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Submit every child of a benchmark as an ordinary run, and return (nothing of ours keeps running).

    The benchmark is recorded once under the workspace's benchmarks/<name>-<digest prefix>/; the same
    file run again reuses it and submits only children without submission evidence (0 sbatch calls
    when all were submitted); any change that changes a digest is a new benchmark. Each child is bound
    to its run id before its run is created, so concurrent calls never create a child twice. At most
    max_concurrent_children children run at once: Slurm holds the rest by dependency lanes (child i
    waits for child i - cap). Submitting stops at the first failure; the table says, child by child,
    what was submitted, and running the command again submits the rest.

    With --dry-run the benchmark is expanded into its ordered children (declared axis order,
    repeats innermost), each compiled against the profile's cluster, and summarised: every child
    with its case, records, nodes, GPUs, GPU-hours and plan digest, the total upper bound of
    GPU-hours, and anything unresolved offline. Nothing is submitted and Slurm is not contacted.

    Exit codes: 0 submitted (or planned); 2 invalid input (every problem listed with file, line and
    key) or sbatch refused a child; 3 a file does not exist; 4 --out is not empty (pass --force), or
    another benchmark run is submitting these children; 5 Slurm could not be reached (the table shows
    what was submitted before).
    """

    def dry() -> BenchmarkDryRun:
        from data_designer.slurm.services import plan_benchmark

        return plan_benchmark(
            bench_file, profile=profile, cluster=cluster, out=out, force=force, max_array_size=max_array_size
        )

    def submit() -> BenchmarkRunResult:
        given = ((out is not None, "--out"), (force, "--force"), (max_array_size is not None, "--max-array-size"))
        for set_, option in given:
            if set_:
                raise dry_run_only(option)
        from data_designer.slurm.services import run_benchmark

        return run_benchmark(bench_file, profile=profile, cluster=cluster)

    if dry_run:
        run("benchmark.dry_run", dry, render_benchmark, as_json=as_json, debug=debug)
    else:
        run("benchmark.run", submit, render_submitted, as_json=as_json, debug=debug, exit_code=_exit_code)


@benchmark_app.command("status")
def status(
    bench: Annotated[
        str, typer.Argument(metavar="BENCH", help="Benchmark id (or a unique prefix), name, or benchmark file.")
    ],
    no_refresh: Annotated[
        bool, typer.Option("--no-refresh", help="Use the runs' last recorded observations (no Slurm call).")
    ] = False,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show every child of a benchmark with its run and state, classified exactly as 'status' does.

    One squeue and one sacct for all children together (appended to each run's observations), unless
    --no-refresh. BENCH is the id printed by 'benchmark run', a unique prefix of it, the benchmark's
    name (its newest benchmark) or the benchmark file (the newest benchmark run from it).

    Exit codes: 0; 2 invalid input; 3 no such benchmark or profile.
    """
    from data_designer.slurm.services import benchmark_status

    run(
        "benchmark.status",
        lambda: benchmark_status(bench, refresh=not no_refresh, profile=profile, cluster=cluster),
        render_status,
        as_json=as_json,
        debug=debug,
    )


@benchmark_app.command("ls")
def ls(
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """List the benchmarks of the workspace, newest first: id, children, children bound to runs (no Slurm call).

    Exit codes: 0; 2 invalid input; 3 no profile; 5 the workspace cannot be listed.
    """
    from data_designer.slurm.services import list_benchmarks

    run(
        "benchmark.ls",
        lambda: list_benchmarks(profile=profile, cluster=cluster),
        render_list,
        as_json=as_json,
        debug=debug,
    )


def dry_run_only(option: str) -> Exception:
    """An option of the dry run given to a real submission (exit 2)."""
    from data_designer.slurm.contracts import InvalidInputError

    return InvalidInputError(
        f"{option} applies to --dry-run only",
        code="dry_run_only",
        key_path=option,
        hint=f"add --dry-run to write the expansion, or leave out {option} to submit the children",
    )


def _exit_code(result: BenchmarkRunResult) -> int:
    return 0 if result.error is None else result.error.exit_code


def _case(case: tuple[tuple[str, object], ...]) -> str:
    return " ".join(f"{label}={_value(value)}" for label, value in case) or "(base run)"


def render_submitted(result: BenchmarkRunResult) -> str:
    """The benchmark, one row per child (outcome, run, jobs, the lane it waits on), the error last."""
    counts = ", ".join(f"{n} {outcome.replace('_', ' ')}" for outcome, n in result.counts.items())
    cap = result.max_concurrent_children
    together = "one at a time" if cap == 1 else f"at most {cap} at once"
    nodes = "exclusive nodes" if result.exclusive else "shared nodes"
    facts = "cluster facts asked" if result.facts_asked else "cluster facts from the workspace cache"
    head = [
        f"Benchmark {result.benchmark_id} on cluster {result.cluster!r} ({'new' if result.created else 'reused'})",
        f"  directory    {result.benchmark_dir}",
        f"  children     {len(result.children)}: {counts}; {nodes}, {together}",
        f"  scheduler    {result.sbatch_calls} sbatch, {result.scheduler_lookups} squeue/sacct; {facts}",
    ]
    rows = table(
        ["#", "child", "case", "repeat", "outcome", "run", "jobs", "after"],
        [
            [
                str(c.index),
                c.child_id,
                _case(c.case),
                str(c.repeat),
                c.outcome.replace("_", " "),
                c.run_id or "-",
                ",".join(c.jobs) or "-",
                ",".join(c.after) or "-",
            ]
            for c in result.children
        ],
    )
    lines = [*head, "", rows]
    details = [
        f"  child {c.index}: {c.detail}" for c in result.children if c.detail and c.outcome in ("failed", "held")
    ]
    if details:
        lines += ["", *details]
    if result.error is not None:
        lines += ["", f"stopped: {result.error.message}"]
        if result.error.hint:
            lines.append(f"fix: {result.error.hint}")
    else:
        lines += ["", f"next: data-designer slurm benchmark status {result.benchmark_id}"]
    return "\n".join(lines)


def render_status(result: BenchmarkStatus) -> str:
    """The benchmark, the counts of child states and where the evidence came from, one row per child."""
    counts = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in sorted(result.counts.items()))
    evidence = {"live": "asked Slurm now", "cached": "last recorded observations", "none": "no scheduler evidence"}
    head = [
        f"Benchmark {result.benchmark_id} ({result.name}) on cluster {result.cluster!r}",
        f"  children     {len(result.children)}: {counts}" + ("; complete" if result.complete else ""),
        f"  evidence     {evidence[result.evidence]}"
        + (f" ({result.scheduler_calls} calls)" if result.scheduler_calls else "")
        + (f"; {result.scheduler_error}" if result.scheduler_error else ""),
    ]
    rows = table(
        ["#", "child", "case", "repeat", "state", "records", "run", "why"],
        [
            [
                str(c.index),
                c.child_id,
                _case(c.case),
                str(c.repeat),
                c.state.replace("_", " "),
                _records(c.run.records_done if c.run else None, c.run.records_total if c.run else None),
                c.run_id or "-",
                c.reason or "",
            ]
            for c in result.children
        ],
    )
    problems = [f"  child {c.index}: {c.run.problem}" for c in result.children if c.run is not None and c.run.problem]
    return "\n".join([*head, "", rows, *(["", *problems] if problems else [])])


def _records(done: int | None, total: int | None) -> str:
    if total is None:
        return "-"
    return f"{done or 0}/{total}"


def render_list(result: BenchmarkList) -> str:
    """One row per benchmark, newest first."""
    if not result.benchmarks:
        return f"No benchmarks in workspace {result.workspace} (cluster {result.cluster!r})."
    rows = table(
        ["benchmark", "created", "children", "bound", "file"],
        [
            [
                b.benchmark_id,
                b.created_at or "-",
                "-" if b.children is None else str(b.children),
                "-" if b.bound is None else str(b.bound),
                b.benchmark_file or (b.problem or "-"),
            ]
            for b in result.benchmarks
        ],
    )
    return f"Benchmarks in workspace {result.workspace} (cluster {result.cluster!r}):\n{rows}"


def render_benchmark(result: BenchmarkDryRun) -> str:
    """The summary lines, the children table, then unresolved entries, warnings and written files."""
    together = "one at a time" if result.max_concurrent_children == 1 else f"{result.max_concurrent_children} at once"
    nodes = "exclusive nodes" if result.exclusive else "shared nodes"
    submittable = "yes" if result.submittable else f"no: {len(result.unresolved)} unresolved"
    rows = [
        ("plan", f"sha256 {result.digest}"),
        (
            "children",
            f"{len(result.children)}: {result.cases} cases x {result.repeats} repeats, {nodes}, {together}",
        ),
        ("GPU-hours", f"at most {gpu_hours(result.gpu_hours_upper_bound)}"),
        ("submittable", submittable),
    ]
    head = f"Dry run of benchmark {result.name!r} on cluster {result.cluster!r} (nothing submitted)"
    children = table(
        ["#", "child", "case", "repeat", "records", "nodes", "GPUs", "GPU-hours", "plan"],
        [
            [
                str(c.index),
                c.child_id,
                " ".join(f"{label}={_value(value)}" for label, value in c.case) or "(base run)",
                str(c.repeat),
                str(c.records),
                "?" if c.nodes_per_allocation is None else str(c.nodes_per_allocation),
                str(c.gpus_per_allocation),
                gpu_hours(c.gpu_hours_upper_bound),
                c.plan_digest[:DIGEST_SHOWN],
            ]
            for c in result.children
        ],
    )
    lines = [head, *(f"  {label:<12} {value}" for label, value in rows), "", children]
    return "\n".join([*lines, *issue_lines(result.unresolved, result.warnings), *output_lines(result.output)])


def _value(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
