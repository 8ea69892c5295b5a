"""The caps of ``data_designer.slurm.contracts`` (``_limits``) applied to runs and benchmarks (pure).

:func:`compile` and :func:`expand` call these first, before anything proportional to a count is built: every
check is arithmetic on the authored numbers (the product of a benchmark's axes stops multiplying once past
its cap). Each problem names the key, the value and the cap, with a fix.
"""

from __future__ import annotations

from data_designer.slurm.contracts import (
    MAX_ALLOCATION_GPUS,
    MAX_BENCHMARK_CHILDREN,
    MAX_BENCHMARK_REPLICAS,
    MAX_GPUS_PER_REPLICA,
    MAX_PIPELINE_PARALLEL,
    MAX_REPEATS,
    MAX_REPLICAS,
    MAX_REPLICAS_PER_DEPLOYMENT,
    MAX_SHARDS,
    MAX_TENSOR_PARALLEL,
    BenchmarkSpec,
    KeyPath,
    Problem,
    RunSpec,
    VllmDeployment,
)

OVER_LIMIT = "over_limit"
"""The code of every problem of a value above its cap."""


def over_limit(key_path: KeyPath, message: str, hint: str) -> Problem:
    return Problem(code=OVER_LIMIT, key_path=key_path, message=message, hint=hint)


def run_limit_problems(run: RunSpec) -> list[Problem]:
    """Problems of every count in ``run`` above its cap: shards, replicas, parallelism, GPUs."""
    problems = _shard_problems(run)
    replicas = 0
    gpus = 0
    for alias, deployment in run.deployments.items():
        at = ("deployments", alias)
        if isinstance(deployment, VllmDeployment):
            per_replica = deployment.tensor_parallel * deployment.pipeline_parallel
            each = _capped((*at, "tensor_parallel"), deployment.tensor_parallel, MAX_TENSOR_PARALLEL, "GPUs")
            each += _capped((*at, "pipeline_parallel"), deployment.pipeline_parallel, MAX_PIPELINE_PARALLEL, "stages")
            problems += each
            if per_replica > MAX_GPUS_PER_REPLICA and not each:
                problems.append(
                    over_limit(
                        (*at, "tensor_parallel"),
                        f"tensor_parallel {deployment.tensor_parallel} x pipeline_parallel "
                        f"{deployment.pipeline_parallel} = {per_replica:,} GPUs per replica is above the limit of "
                        f"{MAX_GPUS_PER_REPLICA:,}",
                        f"use at most {MAX_GPUS_PER_REPLICA:,} GPUs per replica",
                    )
                )
        else:
            per_replica = deployment.gpus_per_replica
            problems += _capped((*at, "gpus_per_replica"), per_replica, MAX_GPUS_PER_REPLICA, "GPUs")
        problems += _capped((*at, "replicas"), deployment.replicas, MAX_REPLICAS_PER_DEPLOYMENT, "replicas")
        replicas += deployment.replicas
        gpus += deployment.replicas * per_replica
    if problems:
        return problems  # the totals would only repeat a deployment's problem
    if replicas > MAX_REPLICAS:
        problems.append(
            over_limit(
                ("deployments",),
                f"the deployments have {replicas:,} replicas together, above the limit of {MAX_REPLICAS:,} per "
                "allocation",
                f"use at most {MAX_REPLICAS:,} replicas in one run, or split the work into several runs",
            )
        )
    if gpus > MAX_ALLOCATION_GPUS:
        problems.append(
            over_limit(
                ("deployments",),
                f"the deployments need {gpus:,} GPUs per allocation, above the limit of {MAX_ALLOCATION_GPUS:,}",
                "use fewer or smaller replicas per allocation, and more shards instead",
            )
        )
    return problems


def benchmark_limit_problems(benchmark: BenchmarkSpec) -> list[Problem]:
    """Problems of a benchmark's ``repeats`` and its number of children, from the axes' lengths alone."""
    problems = _capped(("repeats",), benchmark.repeats, MAX_REPEATS, "repeats")
    cases = 1
    partial = False
    for index, axis in enumerate(benchmark.axes):
        cases *= len(axis.values)
        if cases * benchmark.repeats > MAX_BENCHMARK_CHILDREN and index < len(benchmark.axes) - 1:
            partial = True  # past the cap: the exact product does not matter, and may be huge
            break
    children = cases * benchmark.repeats
    if children > MAX_BENCHMARK_CHILDREN:
        least = "at least " if partial else ""
        problems.append(
            over_limit(
                ("axes",),
                f"the axes and repeats make {least}{children:,} children ({least}{cases:,} cases x "
                f"{benchmark.repeats} repeats), above the limit of {MAX_BENCHMARK_CHILDREN:,}",
                "sweep fewer values, lower repeats, or split the sweep into several benchmarks",
            )
        )
    return problems


def benchmark_replicas_problem(replicas: int) -> Problem | None:
    """The problem of ``replicas`` planned over a benchmark's distinct cases so far, if above the cap."""
    if replicas <= MAX_BENCHMARK_REPLICAS:
        return None
    return over_limit(
        ("axes",),
        f"the benchmark's cases plan at least {replicas:,} replicas together, above the limit of "
        f"{MAX_BENCHMARK_REPLICAS:,}",
        "sweep fewer or smaller replicas and nodes values, or split the sweep into several benchmarks",
    )


def _shard_problems(run: RunSpec) -> list[Problem]:
    shards, per_shard = run.sharding.shards, run.sharding.records_per_shard
    if shards is not None:
        return _capped(("sharding", "shards"), shards, MAX_SHARDS, "shards")
    assert per_shard is not None
    count = -(-run.records // per_shard)
    if count <= MAX_SHARDS:
        return []
    return [
        over_limit(
            ("sharding", "records_per_shard"),
            f"{run.records:,} records at records_per_shard {per_shard:,} make {count:,} shards, above the limit of "
            f"{MAX_SHARDS:,}",
            f"use records_per_shard of at least {-(-run.records // MAX_SHARDS):,}",
        )
    ]


def _capped(key_path: KeyPath, value: int, cap: int, unit: str) -> list[Problem]:
    if value <= cap:
        return []
    name = key_path[-1]
    return [over_limit(key_path, f"{name} {value!r} is above the limit of {cap:,}", f"use at most {cap:,} {unit}")]
