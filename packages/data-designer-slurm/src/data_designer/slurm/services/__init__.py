"""Public Python services of data-designer-slurm: one operation per CLI command, each returning a frozen result."""

from data_designer.slurm.contracts import ProbeFailedError
from data_designer.slurm.planner import ProfileTemplate
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
    "init_profile",
    "is_finished",
    "is_unavailable",
    "load_profile_file",
    "locate_run",
    "plan_benchmark",
    "plan_run",
    "resolve_profile_path",
    "run_status",
    "select_cluster",
    "validate_profile",
    "wait_run",
]

# Execute (issue 5).
from data_designer.slurm.services._execute import execute_run

__all__ += ["execute_run"]
