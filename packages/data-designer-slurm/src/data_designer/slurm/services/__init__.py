"""Public Python services of data-designer-slurm: one operation per CLI command, each returning a frozen result.

The services live in rooms by capability (``profiles``, ``plans``, ``runs``, ``collect``, ``benchmarks``, ``images``,
and ``context``, what every call stands on); this face re-exports each room's operations, and ``client``'s Python
client (``SlurmDataDesigner`` and its run and benchmark handles) over them.

Importing this face is cheap: each name is imported from its room on first use (PEP 562), so ``merge`` does not pay
for the benchmark analysis, nor ``status`` for the images.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from data_designer.slurm.contracts import ProbeFailedError
    from data_designer.slurm.planner import ProfileTemplate
    from data_designer.slurm.services.benchmarks import (
        analyze_benchmark,
        benchmark_status,
        find_benchmark,
        list_benchmarks,
        run_benchmark,
    )
    from data_designer.slurm.services.client import BenchmarkHandle, BenchmarkReport, RunHandle, SlurmDataDesigner
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

_ROOMS: dict[str, str] = {
    "ProbeFailedError": "data_designer.slurm.contracts",
    "ProfileTemplate": "data_designer.slurm.planner",
    "analyze_benchmark": "data_designer.slurm.services.benchmarks",
    "benchmark_status": "data_designer.slurm.services.benchmarks",
    "find_benchmark": "data_designer.slurm.services.benchmarks",
    "list_benchmarks": "data_designer.slurm.services.benchmarks",
    "run_benchmark": "data_designer.slurm.services.benchmarks",
    "BenchmarkHandle": "data_designer.slurm.services.client",
    "BenchmarkReport": "data_designer.slurm.services.client",
    "RunHandle": "data_designer.slurm.services.client",
    "SlurmDataDesigner": "data_designer.slurm.services.client",
    "load_dataset": "data_designer.slurm.services.collect",
    "merge_run": "data_designer.slurm.services.collect",
    "add_image": "data_designer.slurm.services.images",
    "image_info": "data_designer.slurm.services.images",
    "list_images": "data_designer.slurm.services.images",
    "remove_image": "data_designer.slurm.services.images",
    "plan_benchmark": "data_designer.slurm.services.plans",
    "plan_run": "data_designer.slurm.services.plans",
    "default_profile_path": "data_designer.slurm.services.profiles",
    "init_profile": "data_designer.slurm.services.profiles",
    "load_profile_file": "data_designer.slurm.services.profiles",
    "resolve_profile_path": "data_designer.slurm.services.profiles",
    "select_cluster": "data_designer.slurm.services.profiles",
    "validate_profile": "data_designer.slurm.services.profiles",
    "cancel_run": "data_designer.slurm.services.runs",
    "execute_run": "data_designer.slurm.services.runs",
    "follow_logs": "data_designer.slurm.services.runs",
    "is_finished": "data_designer.slurm.services.runs",
    "is_unavailable": "data_designer.slurm.services.runs",
    "list_runs": "data_designer.slurm.services.runs",
    "locate_run": "data_designer.slurm.services.runs",
    "remove_run": "data_designer.slurm.services.runs",
    "retry_run": "data_designer.slurm.services.runs",
    "run_logs": "data_designer.slurm.services.runs",
    "run_status": "data_designer.slurm.services.runs",
    "wait_run": "data_designer.slurm.services.runs",
}
"""Each public name and the module it is imported from."""


def __getattr__(name: str) -> Any:
    module = _ROOMS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "BenchmarkHandle",
    "BenchmarkReport",
    "ProbeFailedError",
    "ProfileTemplate",
    "RunHandle",
    "SlurmDataDesigner",
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
