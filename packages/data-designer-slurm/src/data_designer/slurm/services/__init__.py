"""Public Python services of data-designer-slurm: one operation per CLI command, each returning a frozen result."""

from data_designer.slurm.contracts import ProbeFailedError
from data_designer.slurm.planner import ProfileTemplate
from data_designer.slurm.services._log_follow import follow_logs
from data_designer.slurm.services._logs import run_logs
from data_designer.slurm.services._plans import plan_benchmark, plan_run
from data_designer.slurm.services._profile import (
    default_profile_path,
    init_profile,
    load_profile_file,
    resolve_profile_path,
    select_cluster,
    validate_profile,
)
from data_designer.slurm.services._runs import locate_run
from data_designer.slurm.services._status import is_finished, is_unavailable, run_status, wait_run

__all__ = [
    "ProbeFailedError",
    "ProfileTemplate",
    "default_profile_path",
    "follow_logs",
    "init_profile",
    "is_finished",
    "is_unavailable",
    "load_profile_file",
    "locate_run",
    "plan_benchmark",
    "plan_run",
    "resolve_profile_path",
    "run_logs",
    "run_status",
    "select_cluster",
    "validate_profile",
    "wait_run",
]

# Execute (issue 5).
from data_designer.slurm.services._execute import execute_run

__all__ += ["execute_run"]

# Runs of a workspace: runs ls, runs rm (issue 13).
from data_designer.slurm.services._runs_list import list_runs, remove_run  # noqa: E402 (appended block)

__all__ += ["list_runs", "remove_run"]

# Acting on a run: retry, cancel (issue 13).
from data_designer.slurm.services._cancel import cancel_run  # noqa: E402 (appended block)
from data_designer.slurm.services._retry import retry_run  # noqa: E402 (appended block)

__all__ += ["cancel_run", "retry_run"]

# Collecting a run: merge (issue 14).
from data_designer.slurm.services._merge import merge_run  # noqa: E402 (appended block)

__all__ += ["merge_run"]

# Collecting a run: a merged run (or its validated parts) as a pandas DataFrame (issue 14).
from data_designer.slurm.services._dataset import load_dataset  # noqa: E402 (appended block)

__all__ += ["load_dataset"]

# Benchmarks: run every child, their status, the workspace's benchmarks (issue 15).
from data_designer.slurm.services._benchmark_run import run_benchmark  # noqa: E402 (appended block)
from data_designer.slurm.services._benchmark_status import (  # noqa: E402 (appended block)
    benchmark_status,
    find_benchmark,
    list_benchmarks,
)

__all__ += ["benchmark_status", "find_benchmark", "list_benchmarks", "run_benchmark"]

# Benchmarks: analyze (issue 16).
from data_designer.slurm.services._benchmark_analyze import analyze_benchmark  # noqa: E402 (appended block)

__all__ += ["analyze_benchmark"]

# Container images: image add, ls, info, rm (issue 17).
from data_designer.slurm.services._image_info import image_info, list_images  # noqa: E402 (appended block)
from data_designer.slurm.services._image_removal import remove_image  # noqa: E402 (appended block)
from data_designer.slurm.services._images import add_image  # noqa: E402 (appended block)

__all__ += ["add_image", "image_info", "list_images", "remove_image"]
