"""Public Python services of data-designer-slurm: one operation per CLI command, each returning a frozen result."""

from data_designer.slurm.contracts import ProbeFailedError
from data_designer.slurm.planner import ProfileTemplate
from data_designer.slurm.services._profile import (
    default_profile_path,
    init_profile,
    load_profile_file,
    resolve_profile_path,
    select_cluster,
    validate_profile,
)

__all__ = [
    "ProbeFailedError",
    "ProfileTemplate",
    "default_profile_path",
    "init_profile",
    "load_profile_file",
    "resolve_profile_path",
    "select_cluster",
    "validate_profile",
]
