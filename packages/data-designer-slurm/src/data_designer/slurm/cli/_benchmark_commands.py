"""``data-designer slurm benchmark run BENCH --dry-run``: expand a benchmark into its children, offline."""

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
    from data_designer.slurm.contracts import BenchmarkDryRun

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
    """Run a benchmark's children on Slurm (today: --dry-run only).

    With --dry-run the benchmark is expanded into its ordered children (declared axis order,
    repeats innermost), each compiled against the profile's cluster, and summarised: every child
    with its case, records, nodes, GPUs, GPU-hours and plan digest, the total upper bound of
    GPU-hours, and anything unresolved offline. Nothing is submitted and Slurm is not contacted.

    Exit codes: 0 planned; 2 invalid input (every problem listed with file, line and key), or
    --dry-run missing; 3 a file does not exist; 4 --out is not empty (pass --force).
    """

    def call() -> BenchmarkDryRun:
        if not dry_run:
            raise not_available()
        from data_designer.slurm.services import plan_benchmark

        return plan_benchmark(
            bench_file, profile=profile, cluster=cluster, out=out, force=force, max_array_size=max_array_size
        )

    run("benchmark.dry_run", call, render_benchmark, as_json=as_json, debug=debug)


def not_available() -> Exception:
    """Running children needs the benchmark records and submission that arrive in a later release (exit 2)."""
    from data_designer.slurm.contracts import InvalidInputError

    return InvalidInputError(
        "benchmark run without --dry-run is not available yet: running the children arrives in a later release",
        code="not_available",
        key_path="--dry-run",
        hint="pass --dry-run to expand and review the children: data-designer slurm benchmark run BENCH --dry-run",
    )


def render_benchmark(result: BenchmarkDryRun) -> str:
    """The summary lines, the children table, then unresolved entries, warnings and written files."""
    together = "one at a time" if result.max_concurrent_children == 1 else f"{result.max_concurrent_children} at once"
    nodes = "exclusive nodes" if result.exclusive else "shared nodes"
    submittable = (
        "yes, once submitting is available" if result.submittable else f"no: {len(result.unresolved)} unresolved"
    )
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
