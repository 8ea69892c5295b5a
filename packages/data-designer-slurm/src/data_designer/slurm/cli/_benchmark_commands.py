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
    dry_run_only_error,
    gpu_hours,
    issue_lines,
    output_lines,
)
from data_designer.slurm.cli._output import DebugOption, JsonOption, run, table
from data_designer.slurm.cli._profile_commands import ClusterOption, ProfileOption
from data_designer.slurm.cli._status_commands import EXIT_CHECK_FAILED, EXIT_UNAVAILABLE, Format

if TYPE_CHECKING:
    from data_designer.slurm.contracts import (
        AnalyzeResult,
        BenchmarkDryRun,
        BenchmarkList,
        BenchmarkRunResult,
        BenchmarkStatus,
        Stat,
    )

benchmark_app = typer.Typer(
    name="benchmark",
    help="Sweep serving settings over child runs and compare them.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

BenchArgument = Annotated[
    str, typer.Argument(metavar="BENCH", help="Benchmark id (or a unique prefix), name, or benchmark file.")
]
NoRefreshFlag = Annotated[
    bool, typer.Option("--no-refresh", help="Use the runs' last recorded observations (no Slurm call).")
]

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
                raise dry_run_only_error(
                    option, f"add --dry-run to write the expansion, or leave out {option} to submit the children"
                )
        from data_designer.slurm.services import run_benchmark

        return run_benchmark(bench_file, profile=profile, cluster=cluster)

    if dry_run:
        run("benchmark.dry_run", dry, render_benchmark, as_json=as_json, debug=debug)
    else:
        run("benchmark.run", submit, render_submitted, as_json=as_json, debug=debug, exit_code=_exit_code)


@benchmark_app.command("status")
def status(
    bench: BenchArgument,
    no_refresh: NoRefreshFlag = False,
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
    head = [
        f"Benchmark {result.benchmark_id} ({result.name}) on cluster {result.cluster!r}",
        f"  children     {len(result.children)}: {counts}" + ("; complete" if result.complete else ""),
        f"  evidence     {_evidence(result)}",
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


_EVIDENCE = {"live": "asked Slurm now", "cached": "last recorded observations", "none": "no scheduler evidence"}


def _evidence(result: BenchmarkStatus | AnalyzeResult) -> str:
    """Where the children's states came from, the scheduler calls made and why Slurm could not be asked."""
    calls = f" ({result.scheduler_calls} calls)" if result.scheduler_calls else ""
    return _EVIDENCE[result.evidence] + calls + (f"; {result.scheduler_error}" if result.scheduler_error else "")


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
                _case(c.case),
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


@benchmark_app.command("analyze")
def analyze(
    bench: BenchArgument,
    no_refresh: NoRefreshFlag = False,
    check: Annotated[bool, typer.Option("--check", help="Exit 6 unless every child succeeded.")] = False,
    output: Annotated[Format, typer.Option("--format", help="table, json or csv.")] = Format.table,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", metavar="FILE.png", help="Also draw throughput per GPU against GPU-hours (needs the plot extra)."
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --plot file.")] = False,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    debug: DebugOption = False,
) -> None:
    """Measure every case of a benchmark from validated evidence only, and recommend the fastest and cheapest.

    Refreshes every child with one observation for all of them (one squeue, one sacct), classifies each as
    'status' does and measures only children that succeeded, from their result manifests: records/s,
    output tokens/s and requests/s, boot, generation and wall time, GPUs, GPU-hours per 1,000 records; per
    case the mean, standard deviation and n over repeats; per case its requests (sent, failed, error rate,
    retried, p50/p90/p95/p99 latency from the merged histograms, within the stated bucket error). Cases with a
    child not succeeded, or infeasible (error rate over targets.max_error_rate, default 0, or p95 over
    targets.max_p95_latency_s), are listed with why and never ranked. Projections for the benchmark's targets are shown apart from measurements; the
    Pareto set (throughput per GPU against time to target) and the best case by GPU-hours per 1,000 records
    are marked. --format json and csv are deterministic: the same evidence gives the same bytes. The
    analysis is kept under the benchmark's analyses/.

    --plot never writes through a symbolic link, into a directory that does not exist, or over an existing
    file without --force.

    Exit codes: 0; 6 with --check unless every child succeeded; 5 Slurm could not be asked and a child is
    unknown; 2 invalid input (or --plot without the plot extra, or at a symbolic link or in a missing
    directory); 4 the --plot file exists (without --force); 3 no such benchmark.
    """
    from data_designer.slurm.services import analyze_benchmark

    def exit_code(result: AnalyzeResult) -> int:
        if result.unknown_children:
            return EXIT_UNAVAILABLE
        return EXIT_CHECK_FAILED if check and not result.analysis.complete else 0

    def render(result: AnalyzeResult) -> str:
        if output is Format.csv:
            from data_designer.slurm.runtime.analysis import analysis_csv

            return analysis_csv(result.analysis).rstrip("\n")
        return render_analysis(result)

    def canonical(result: AnalyzeResult) -> str:
        from data_designer.slurm.runtime.analysis import analysis_json

        return analysis_json(result.analysis).decode("utf-8")

    run(
        "benchmark.analyze",
        lambda: analyze_benchmark(
            bench, refresh=not no_refresh, plot=plot, force=force, profile=profile, cluster=cluster
        ),
        render,
        as_json=output is Format.json,
        debug=debug,
        exit_code=exit_code,
        json_text=canonical,
        verbatim=output is Format.csv,
    )


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _stat(stat: Stat, digits: int = 2) -> str:
    if stat.mean is None:
        return "-"
    spread = "" if stat.std is None else f" ±{stat.std:,.{digits}f}"
    return f"{stat.mean:,.{digits}f}{spread} (n={stat.n})"


def render_analysis(result: AnalyzeResult) -> str:
    """Measured cases first (ranked, with the Pareto set and the best marked), then projections, then what is not
    ranked and why, then the evidence."""
    analysis = result.analysis
    ranked = [c for c in analysis.cases if c.complete and c.feasible]
    unranked = [c for c in analysis.cases if not (c.complete and c.feasible)]
    counts: dict[str, int] = {}
    for child in analysis.children:
        counts[child.state] = counts.get(child.state, 0) + 1
    states = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in sorted(counts.items()))
    head = [
        f"Analysis of benchmark {analysis.benchmark_id} ({analysis.name})",
        f"  children     {len(analysis.children)}: {states}" + ("; complete" if analysis.complete else ""),
        f"  cases        {len(analysis.cases)}: {len(ranked)} ranked, {len(unranked)} not ranked",
    ]
    lines = [*head, "", "Measured (ranked cases; mean ±sd over repeats):"]
    if ranked:
        lines.append(
            table(
                ["case", "values", "GPUs", "records/s", "records/s/GPU", "tokens/s", "boot s", "GPU-h/1k", "mark"],
                [
                    [
                        str(c.case_index),
                        _case(c.case),
                        "-" if c.gpus is None else str(c.gpus),
                        _stat(c.records_per_s),
                        _stat(c.records_per_s_per_gpu),
                        _stat(c.output_tokens_per_s, 1),
                        _stat(c.boot_s, 1),
                        _stat(c.gpu_hours_per_1k, 4),
                        " ".join(m for m, on in (("best", c.best), ("pareto", c.pareto)) if on),
                    ]
                    for c in ranked
                ],
            )
        )
    else:
        lines.append("  (no case is complete yet)")
    projected = [c for c in ranked if c.projection is not None]
    if projected:
        lines += ["", "Projected for the targets (from the means above, not measured):"]
        lines.append(
            table(
                ["case", "jobs", "at once", "GPU-hours", "wall s", "in budget"],
                [
                    [
                        str(c.case_index),
                        "-" if c.projection is None or c.projection.jobs is None else str(c.projection.jobs),
                        "-"
                        if c.projection is None or c.projection.concurrent_jobs is None
                        else str(c.projection.concurrent_jobs),
                        _num(None if c.projection is None else c.projection.gpu_hours, 3),
                        _num(None if c.projection is None else c.projection.wall_s, 0),
                        "-"
                        if c.projection is None or c.projection.within_budget is None
                        else ("yes" if c.projection.within_budget else "no"),
                    ]
                    for c in projected
                ],
            )
        )
    with_requests = [c for c in analysis.cases if c.requests is not None]
    if with_requests:
        error = with_requests[0].requests.latency_bucket_error if with_requests[0].requests else 0.0
        lines += ["", f"Requests (every repeat merged; latency percentiles within ±{error:.2%}, the bucket error):"]
        lines.append(
            table(
                ["case", "sent", "failed", "error rate", "retried", "p50 s", "p90 s", "p95 s", "p99 s", "feasible"],
                [
                    [
                        str(c.case_index),
                        str(r.sent),
                        str(r.failed),
                        _num(r.error_rate, 4),
                        str(r.retried),
                        _num(r.latency_p50_s, 3),
                        _num(r.latency_p90_s, 3),
                        _num(r.latency_p95_s, 3),
                        _num(r.latency_p99_s, 3),
                        "yes" if c.feasible else "no",
                    ]
                    for c in with_requests
                    if (r := c.requests) is not None
                ],
            )
        )
    if unranked:
        lines += ["", "Not ranked:"]
        lines += [
            f"  case {c.case_index} ({_case(c.case)}): {c.reason if not c.complete else 'infeasible: ' + str(c.infeasible_reason)}"
            for c in unranked
        ]
    if analysis.best is not None:
        best = analysis.cases[analysis.best]
        lines += [
            "",
            f"Recommendation: case {best.case_index} ({_case(best.case)}), lowest GPU-hours per 1,000 records",
        ]
        if analysis.pareto:
            lines.append(
                f"Pareto set (throughput per GPU vs time to target): cases {', '.join(map(str, analysis.pareto))}"
            )
    lines += ["", f"evidence: {_evidence(result)}", f"analysis: {result.analysis_file}"]
    if result.plot:
        lines.append(f"plot: {result.plot}")
    return "\n".join(lines)
