"""Caps: every count a run or benchmark authors is refused above its cap, cheaply, naming the key, value and cap.

A refusal must come before anything proportional to the value is built, so the over-cap values here are the
hostile ones (``10**9``): a test that allocated in proportion would not finish.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

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
    ClusterFacts,
    ClusterProfile,
    InvalidInputError,
    Problem,
    RunSpec,
    format_key_path,
)
from data_designer.slurm.planner._compile import compile
from data_designer.slurm.planner._expand import expand
from data_designer.slurm.planner._inputs import resolve_config
from data_designer.slurm.planner._limits import benchmark_limit_problems, run_limit_problems

HOSTILE = 10**9

CONFIG: dict[str, Any] = {
    "model_configs": [{"alias": "writer", "model": "m", "provider": "local"}],
    "columns": [{"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "x"}],
}
PROFILE = ClusterProfile.model_validate(
    {
        "workspace_root": "/ws",
        "partitions": {"gpu": "gpu", "cpu": "cpu"},
        "gpus_per_node": 8,
        "compute_python": {"interpreter": "/venv/bin/python"},
    },
    strict=False,
)
FACTS = ClusterFacts(max_array_size=1001)


def _run(deployment: dict[str, Any] | None = None, **changes: Any) -> RunSpec:
    data: dict[str, Any] = {
        "schema_version": 1,
        "name": "r",
        "data_designer": {"inline": copy.deepcopy(CONFIG)},
        "records": 1000,
        "sharding": {"shards": 4},
        "deployments": {"writer": {"engine": "vllm", "model": "/m/llama", **(deployment or {})}},
    }
    data.update(changes)
    return RunSpec.model_validate(data, strict=False)


def _compile_problems(run: RunSpec) -> tuple[Problem, ...]:
    with pytest.raises(InvalidInputError) as caught:
        compile(run, PROFILE, cluster="c", config=resolve_config(run), facts=FACTS)
    return caught.value.problems


def _only(problems: tuple[Problem, ...] | list[Problem]) -> Problem:
    assert len(problems) == 1, problems
    return problems[0]


def _names(problem: Problem, key_path: str, value: int, cap: int) -> None:
    assert problem.code == "over_limit"
    assert format_key_path(problem.key_path or ()) == key_path
    assert f"{value:,}" in problem.message or repr(value) in problem.message, problem.message
    assert f"{cap:,}" in problem.message, problem.message
    assert problem.hint


def test_a_run_at_the_caps_of_parallelism_and_replicas_has_no_limit_problems() -> None:
    run = _run(
        {"tensor_parallel": 4, "pipeline_parallel": 4, "replicas": MAX_REPLICAS_PER_DEPLOYMENT},
        records=MAX_SHARDS,
        sharding={"shards": MAX_SHARDS},
    )
    assert run_limit_problems(run) == []


@pytest.mark.parametrize(
    ("deployment", "key_path", "cap"),
    [
        ({"tensor_parallel": HOSTILE}, "deployments.writer.tensor_parallel", MAX_TENSOR_PARALLEL),
        ({"pipeline_parallel": HOSTILE}, "deployments.writer.pipeline_parallel", MAX_PIPELINE_PARALLEL),
        ({"replicas": HOSTILE}, "deployments.writer.replicas", MAX_REPLICAS_PER_DEPLOYMENT),
        ({"replicas": MAX_REPLICAS_PER_DEPLOYMENT + 1}, "deployments.writer.replicas", MAX_REPLICAS_PER_DEPLOYMENT),
    ],
)
def test_a_deployment_count_above_its_cap_is_refused_by_compile(
    deployment: dict[str, Any], key_path: str, cap: int
) -> None:
    value = next(iter(deployment.values()))
    _names(_only(_compile_problems(_run(deployment))), key_path, value, cap)


def test_shards_above_the_cap_are_refused_and_at_the_cap_compile() -> None:
    over = _run(records=HOSTILE, sharding={"shards": 10_000_000})
    _names(_only(_compile_problems(over)), "sharding.shards", 10_000_000, MAX_SHARDS)
    assert run_limit_problems(_run(records=MAX_SHARDS, sharding={"shards": MAX_SHARDS})) == []
    # compiling at the cap is measured by benchmarks/bench_limits.py; one above it is refused
    _names(
        _only(_compile_problems(_run(records=HOSTILE, sharding={"shards": MAX_SHARDS + 1}))),
        "sharding.shards",
        MAX_SHARDS + 1,
        MAX_SHARDS,
    )


def test_records_per_shard_that_make_too_many_shards_are_refused_with_the_smallest_allowed_size() -> None:
    run = _run(records=HOSTILE, sharding={"records_per_shard": 1})
    problem = _only(_compile_problems(run))
    _names(problem, "sharding.records_per_shard", HOSTILE, MAX_SHARDS)
    assert problem.hint == f"use records_per_shard of at least {HOSTILE // MAX_SHARDS:,}"
    assert run_limit_problems(_run(records=HOSTILE, sharding={"records_per_shard": HOSTILE // MAX_SHARDS})) == []


def test_gpus_per_replica_are_capped_as_the_product_of_the_parallelisms() -> None:
    tp, pp = MAX_TENSOR_PARALLEL, MAX_GPUS_PER_REPLICA // MAX_TENSOR_PARALLEL * 2
    problem = _only(run_limit_problems(_run({"tensor_parallel": tp, "pipeline_parallel": pp})))
    _names(problem, "deployments.writer.tensor_parallel", tp * pp, MAX_GPUS_PER_REPLICA)
    command = {"engine": "command", "argv": ["serve"], "model": "m", "gpus_per_replica": HOSTILE}
    problem = _only(run_limit_problems(_run(deployments={"writer": command})))
    _names(problem, "deployments.writer.gpus_per_replica", HOSTILE, MAX_GPUS_PER_REPLICA)


def test_replicas_and_gpus_of_all_deployments_together_are_capped() -> None:
    each = {"engine": "vllm", "model": "/m", "replicas": MAX_REPLICAS_PER_DEPLOYMENT}
    three = {"writer": each, "judge": each, "critic": each}
    problem = _only(run_limit_problems(_run(deployments=three)))
    _names(problem, "deployments", 3 * MAX_REPLICAS_PER_DEPLOYMENT, MAX_REPLICAS)
    wide = {"engine": "vllm", "model": "/m", "replicas": 64, "tensor_parallel": 512}
    problem = _only(run_limit_problems(_run(deployments={"writer": wide})))
    _names(problem, "deployments", 64 * 512, MAX_ALLOCATION_GPUS)


# --- benchmarks -------------------------------------------------------------------------------------------------------


def _benchmark(axes: list[dict[str, Any]], repeats: int = 1) -> BenchmarkSpec:
    return BenchmarkSpec.model_validate(
        {
            "schema_version": 1,
            "name": "b",
            "base": {"inline": _run().model_dump(mode="json")},
            "axes": axes,
            "repeats": repeats,
            "records": {"policy": "fixed", "records": 10},
        },
        strict=False,
    )


def _expand_problems(benchmark: BenchmarkSpec, base: RunSpec | None = None) -> tuple[Problem, ...]:
    base = base or _run()
    with pytest.raises(InvalidInputError) as caught:
        expand(benchmark, PROFILE, cluster="c", base=base, config=resolve_config(base), facts=FACTS)
    return caught.value.problems


def _concurrency(values: int) -> dict[str, Any]:
    return {"axis": "concurrency", "alias": "writer", "values": list(range(1, values + 1))}


def test_children_are_counted_from_the_axes_before_expanding() -> None:
    # 100 x 100 x 100 x 100 cases would be 10**8 plans; the count alone refuses them.
    benchmark = _benchmark([_concurrency(100), _concurrency(100), _concurrency(100), _concurrency(100)])
    problem = _only(benchmark_limit_problems(benchmark))
    assert problem.key_path == ("axes",)
    assert "at least" in problem.message
    assert f"{MAX_BENCHMARK_CHILDREN:,}" in problem.message
    problems = _expand_problems(benchmark)
    assert [p.code for p in problems] == ["over_limit"], problems


def test_children_at_the_cap_pass_and_one_more_is_refused() -> None:
    assert benchmark_limit_problems(_benchmark([_concurrency(100)], repeats=MAX_BENCHMARK_CHILDREN // 100)) == []
    over = benchmark_limit_problems(_benchmark([_concurrency(101)], repeats=MAX_BENCHMARK_CHILDREN // 100))
    problem = _only(over)
    assert f"{101 * (MAX_BENCHMARK_CHILDREN // 100):,} children" in problem.message
    assert "at least" not in problem.message


def test_hostile_repeats_are_refused_with_the_key_and_the_cap() -> None:
    problems = _expand_problems(_benchmark([], repeats=HOSTILE))
    repeats = next(p for p in problems if p.key_path == ("repeats",))
    _names(repeats, "repeats", HOSTILE, MAX_REPEATS)
    assert any(p.key_path == ("axes",) and f"{HOSTILE:,} children" in p.message for p in problems)


def test_a_replicas_axis_value_above_the_cap_is_reported_at_the_axis_value() -> None:
    benchmark = _benchmark([{"axis": "replicas", "alias": "writer", "values": [1, HOSTILE]}])
    problem = _only(_expand_problems(benchmark))
    assert problem.code == "over_limit"
    assert problem.key_path == ("axes", 0, "values", 1)
    assert f"{MAX_REPLICAS_PER_DEPLOYMENT:,}" in problem.message


def test_a_nodes_axis_that_fills_too_many_nodes_is_refused() -> None:
    benchmark = _benchmark([{"axis": "nodes", "alias": "writer", "values": [HOSTILE]}])
    problem = _only(_expand_problems(benchmark))
    assert problem.code == "over_limit"
    assert problem.key_path == ("axes", 0, "values", 0)
    assert f"{8 * HOSTILE}" in problem.message  # eight one-GPU replicas per node of eight GPUs


def test_replicas_over_all_cases_together_are_capped() -> None:
    per_case = MAX_REPLICAS_PER_DEPLOYMENT
    cases = MAX_BENCHMARK_REPLICAS // per_case + 1
    benchmark = _benchmark([_concurrency(cases)])
    base = _run({"replicas": per_case})
    problem = _only(_expand_problems(benchmark, base))
    assert problem.code == "over_limit"
    assert problem.key_path == ("axes",)
    assert f"{MAX_BENCHMARK_REPLICAS:,}" in problem.message
