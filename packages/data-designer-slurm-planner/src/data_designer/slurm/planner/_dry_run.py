"""The files a dry run writes for a plan or a benchmark (pure: names and bytes, no I/O).

One definition serves both ``python -m data_designer.slurm.planner ... --out DIR`` and the
services behind ``data-designer slurm execute|benchmark run --dry-run --out DIR``, so both write
the same files with the same bytes.
"""

from __future__ import annotations

from data_designer.slurm.contracts import DRY_RUN_ID, BenchmarkPlan, ExecutionPlan, SubmissionBinding
from data_designer.slurm.planner._digest import canonical_json
from data_designer.slurm.planner._sbatch import PLAN_FILE, bind_submission

SCRIPT_FILE = "allocation.sbatch"
SUBMISSION_FILE = "submission.json"
BENCHMARK_PLAN_FILE = "benchmark.json"
DRY_RUN_CHILDREN_DIR = "children"

DryRunFile = tuple[str, bytes]
"""A path relative to the output directory, and the file's bytes."""


def plan_files(
    plan: ExecutionPlan, run_dir: str, *, prefix: str = "", job_name_prefix: str | None = None
) -> list[DryRunFile]:
    """``plan.json``, and while nothing is unresolved the batch script and the submission unit.

    The unit is bound to a placeholder run: run id ``dry-run``, ``run_dir`` as its run directory, job
    names ``<job_name_prefix>-c<chunk>`` (default ``dd-<run name>-dry-run``).
    """
    files: list[DryRunFile] = [(prefix + PLAN_FILE, canonical_json(plan))]
    if plan.unresolved or plan.submission.script is None:
        return files
    binding = SubmissionBinding(
        run_id=DRY_RUN_ID,
        run_dir=run_dir.rstrip("/"),
        job_name_prefix=job_name_prefix or f"dd-{plan.run.name}-{DRY_RUN_ID}",
    )
    unit = bind_submission(plan, binding)
    files.append((prefix + SCRIPT_FILE, unit.script.encode("utf-8")))
    files.append((prefix + SUBMISSION_FILE, canonical_json(unit)))
    return files


def benchmark_files(bench: BenchmarkPlan, out_dir: str) -> list[DryRunFile]:
    """``benchmark.json``, then each child's plan files under ``children/<index>-<child id>/``.

    Indices are zero-padded to the width of the largest one, so they sort as numbers.
    """
    files: list[DryRunFile] = [(BENCHMARK_PLAN_FILE, canonical_json(bench))]
    width = len(str(len(bench.children) - 1))
    for child in bench.children:
        prefix = f"{DRY_RUN_CHILDREN_DIR}/{child.index:0{width}d}-{child.child_id}/"
        files += plan_files(
            child.plan,
            f"{out_dir.rstrip('/')}/{prefix}",
            prefix=prefix,
            job_name_prefix=f"dd-{bench.benchmark.name}-{child.child_id}-{DRY_RUN_ID}",
        )
    return files
