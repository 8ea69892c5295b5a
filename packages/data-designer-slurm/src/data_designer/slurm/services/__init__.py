"""Public Python services of data-designer-slurm: one operation per CLI command, each returning a frozen result.

The services live in rooms by capability (``profiles``, ``plans``, ``runs``, ``collect``, ``benchmarks``, ``images``,
and ``context``, what every call stands on); this face re-exports each room's operations.
"""

from data_designer.slurm.contracts import ProbeFailedError
from data_designer.slurm.planner import ProfileTemplate
from data_designer.slurm.services.benchmarks import (
    analyze_benchmark,
    benchmark_status,
    find_benchmark,
    list_benchmarks,
    run_benchmark,
)
from data_designer.slurm.services.collect import load_dataset, merge_run
from data_designer.slurm.services.images import add_image, image_info, list_images, remove_image
from data_designer.slurm.services.plans import plan_benchmark, plan_run
from data_designer.slurm.services.profiles import (
    default_profile_path,
    init_profile,
    load_profile_file,
    resolve_profile_path,
    select_cluster,
    validate_profile,
)
from data_designer.slurm.services.runs import (
    cancel_run,
    execute_run,
    follow_logs,
    is_finished,
    is_unavailable,
    list_runs,
    locate_run,
    remove_run,
    retry_run,
    run_logs,
    run_status,
    wait_run,
)

__all__ = [
    "ProbeFailedError",
    "ProfileTemplate",
    "add_image",
    "analyze_benchmark",
    "benchmark_status",
    "cancel_run",
    "default_profile_path",
    "execute_run",
    "find_benchmark",
    "follow_logs",
    "image_info",
    "init_profile",
    "is_finished",
    "is_unavailable",
    "list_benchmarks",
    "list_images",
    "list_runs",
    "load_dataset",
    "load_profile_file",
    "locate_run",
    "merge_run",
    "plan_benchmark",
    "plan_run",
    "remove_image",
    "remove_run",
    "resolve_profile_path",
    "retry_run",
    "run_benchmark",
    "run_logs",
    "run_status",
    "select_cluster",
    "validate_profile",
    "wait_run",
]
