"""Dry runs and the inputs they read: a run file or a benchmark file compiled against a profile, with its seeds."""

from data_designer.slurm.services.plans._plans import (
    BenchmarkInputs,
    Source,
    compile_config,
    expand_located,
    locate,
    plan_benchmark,
    plan_run,
    profile_source_of,
    read_benchmark_inputs,
    read_input,
    read_named,
)
from data_designer.slurm.services.plans._seeds import SEED_TOO_LARGE, seed_files

__all__ = [
    "SEED_TOO_LARGE",
    "BenchmarkInputs",
    "Source",
    "compile_config",
    "expand_located",
    "locate",
    "plan_benchmark",
    "plan_run",
    "profile_source_of",
    "read_benchmark_inputs",
    "read_input",
    "read_named",
    "seed_files",
]
