"""Cluster profiles: ``profile init`` and ``profile validate``, and the one loader every other service uses."""

from data_designer.slurm.planner import select_cluster
from data_designer.slurm.services.profiles._profile import (
    default_profile_path,
    init_profile,
    load_profile_file,
    resolve_profile_path,
    validate_profile,
)

__all__ = [
    "default_profile_path",
    "init_profile",
    "load_profile_file",
    "resolve_profile_path",
    "select_cluster",
    "validate_profile",
]
