"""expand(): ordered children, axis values applied, record policies, ids and digests, every problem at once."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from data_designer.slurm.contracts import (
    BenchmarkPlan,
    BenchmarkSpec,
    ClusterFacts,
    ClusterProfile,
    ImageRecord,
    InvalidInputError,
    VllmDeployment,
)
from data_designer.slurm.planner import parse_document, sha256_digest, validate_document
from data_designer.slurm.planner._compile import plan_digest
from data_designer.slurm.planner._expand import CHILD_ID_LENGTH, benchmark_plan_digest, child_id, expand
from data_designer.slurm.planner._inputs import load_base_run, load_run, resolve_config

CONFIG: dict[str, Any] = {
    "model_configs": [
        {"alias": "writer", "model": "meta/llama-3.1-8b-instruct", "provider": "local"},
        {"alias": "judge", "model": "judge-model", "provider": "local"},
        {"alias": "nim", "model": "nvidia/nemotron", "provider": "nvidia"},
    ],
    "columns": [
        {"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "x"},
        {"name": "b", "column_type": "llm-text", "model_alias": "judge", "prompt": "y"},
        {"name": "c", "column_type": "llm-text", "model_alias": "nim", "prompt": "z"},
    ],
}

PROFILE: dict[str, Any] = {
    "workspace_root": "/ws",
    "partitions": {"gpu": "gpu", "cpu": "cpu"},
    "gpus_per_node": 4,
    "container_runtime": "pyxis",
    "compute_python": {"interpreter": "/venv/bin/python"},
}


JUDGE_NO_GPU = {"engine": "command", "argv": ["serve", "{port}"], "model": "/m/judge", "gpus_per_replica": 0}


def base_run(**changes: Any) -> dict[str, Any]:
    run: dict[str, Any] = {
        "schema_version": 1,
        "name": "base",
        "data_designer": {"inline": copy.deepcopy(CONFIG)},
        "records": 1000,
        "sharding": {"shards": 8},
        "deployments": {
            "writer": {"engine": "vllm", "model": "/m/llama"},
            "judge": {"engine": "command", "argv": ["serve", "{model}", "--port", "{port}"], "model": "/m/judge"},
        },
        "external": {"nim": {"endpoint": "https://api.example/v1", "api_key_env": "NIM_KEY"}},
    }
    run.update(changes)
    return run


def benchmark(axes: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schema_version": 1,
        "name": "sweep",
        "base": {"inline": base_run()},
        "axes": axes,
        "records": {"policy": "fixed", "records": 200},
    }
    spec.update(changes)
    return spec


def plan_of(
    spec: dict[str, Any],
    profile: dict[str, Any] | None = None,
    *,
    facts: ClusterFacts | None = None,
    images: list[ImageRecord] | None = None,
    text: str | None = None,
) -> BenchmarkPlan:
    source = parse_document(text if text is not None else json.dumps(spec, indent=1), file="bench.json")
    bench = validate_document(BenchmarkSpec, source, operation="test")
    base = load_base_run(bench, file="bench.json")
    cluster = ClusterProfile.model_validate({**PROFILE, **(profile or {})})
    return expand(
        bench,
        cluster,
        cluster="c",
        base=base,
        config=resolve_config(base),
        facts=facts,
        images=images,
        source=source,
    )


def problems_of(spec: dict[str, Any], profile: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
    with pytest.raises(InvalidInputError) as caught:
        plan_of(spec, profile, **kwargs)
    return [p.render() for p in caught.value.problems]


def test_children_follow_declared_axis_order_with_repeats_innermost() -> None:
    plan = plan_of(
        benchmark(
            [
                {"axis": "concurrency", "alias": "writer", "values": [8, 16]},
                {"axis": "engine_arg", "alias": "writer", "arg": "max-num-seqs", "values": [64, 128, 256]},
            ],
            repeats=2,
        )
    )
    seen = [
        (dict(c.case)["concurrency.writer"], dict(c.case)["engine_arg.writer.max-num-seqs"], c.repeat)
        for c in plan.children
    ]
    assert seen == [(conc, seqs, rep) for conc in (8, 16) for seqs in (64, 128, 256) for rep in (0, 1)]
    assert [c.index for c in plan.children] == list(range(12))
    assert [label for label, _ in plan.children[0].case] == ["concurrency.writer", "engine_arg.writer.max-num-seqs"]


def test_each_child_is_the_base_run_with_its_case_applied_and_one_shard() -> None:
    plan = plan_of(
        benchmark(
            [
                {"axis": "concurrency", "alias": "nim", "values": [4]},
                {"axis": "tensor_parallel", "alias": "writer", "values": [2]},
                {"axis": "replicas", "alias": "judge", "values": [3]},
                {"axis": "engine_arg", "alias": "writer", "arg": "max-num-seqs", "values": [64]},
                {"axis": "model", "alias": "writer", "values": ["/m/other"]},
                {"axis": "model", "alias": "nim", "values": ["nvidia/other"]},
                {"axis": "image", "alias": "writer", "values": ["/images/vllm.sqsh"]},
                {"axis": "image", "values": ["/images/client.sqsh"]},
            ],
            exclusive=False,
        )
    )
    (child,) = plan.children
    run = child.plan.run
    writer = run.deployments["writer"]
    assert isinstance(writer, VllmDeployment)
    assert (writer.tensor_parallel, writer.model, writer.image) == (2, "/m/other", "/images/vllm.sqsh")
    assert writer.engine_args == {"max-num-seqs": 64}
    assert run.deployments["judge"].replicas == 3
    assert run.client.concurrency["nim"] == 4
    assert run.external["nim"].model == "nvidia/other"
    assert run.client.image == "/images/client.sqsh"
    assert (run.name, run.records, run.sharding.shards, run.submission.exclusive) == ("base", 200, 1, False)
    assert len(child.plan.shards) == 1
    assert "--max-num-seqs" in child.plan.allocation.replicas[0].argv


def test_nodes_fill_the_nodes_with_replicas_of_the_alias() -> None:
    plan = plan_of(
        benchmark(
            [
                {"axis": "tensor_parallel", "alias": "writer", "values": [1, 2, 8]},
                {"axis": "nodes", "alias": "writer", "values": [2]},
            ],
            base={"inline": base_run(deployments={"writer": {"engine": "vllm", "model": "/m"}, "judge": JUDGE_NO_GPU})},
        ),
        facts=None,
    )
    replicas = [c.plan.run.deployments["writer"].replicas for c in plan.children]
    assert replicas == [8, 4, 1]  # 2 nodes x 4 GPUs: 8 x TP1, 4 x TP2, one TP8 replica spanning both nodes
    assert [c.plan.allocation.nodes for c in plan.children] == [2, 2, 2]


def test_nodes_without_known_gpus_per_node_are_unresolved_not_guessed() -> None:
    plan = plan_of(benchmark([{"axis": "nodes", "alias": "writer", "values": [1, 2]}]), {"gpus_per_node": "auto"})
    assert {(u.what, u.key_path) for u in plan.unresolved} == {
        ("gpus_per_node", "axes[0]"),
        ("gpus_per_node", "gpus_per_node"),
    }
    assert [c.plan.run.deployments["writer"].replicas for c in plan.children] == [1, 1]
    assert len({c.child_id for c in plan.children}) == 2
    assert plan.gpu_hours_upper_bound is None
    probed = plan_of(
        benchmark([{"axis": "nodes", "alias": "writer", "values": [1, 2]}]),
        {"gpus_per_node": "auto"},
        facts=ClusterFacts(gpus_per_node=2),
    )
    assert [c.plan.run.deployments["writer"].replicas for c in probed.children] == [2, 4]
    assert probed.unresolved == ()


def test_records_fixed_or_scaled_with_total_concurrency_within_bounds() -> None:
    policy = {"policy": "scaled", "per_concurrency": 10, "min_records": 500, "max_records": 1500}
    plan = plan_of(benchmark([{"axis": "concurrency", "alias": "writer", "values": [1, 50, 200]}], records=policy))
    # Total concurrency: writer's value + judge's and nim's default (32 each).
    assert [c.records for c in plan.children] == [650, 1140, 1500]
    assert [c.plan.run.records for c in plan.children] == [650, 1140, 1500]
    low = plan_of(
        benchmark(
            [{"axis": "concurrency", "alias": "writer", "values": [1]}],
            base={"inline": base_run(client={"default_concurrency": 1})},
            records=policy,
        )
    )
    assert [c.records for c in low.children] == [500]


def test_benchmark_settings_reach_the_plan() -> None:
    plan = plan_of(benchmark([], repeats=3, exclusive=True, max_concurrent_children=2))
    assert (plan.exclusive, plan.max_concurrent_children) == (True, 2)
    assert [c.case for c in plan.children] == [(), (), ()]
    assert all(c.plan.allocation.exclusive for c in plan.children)
    hours = plan.children[0].plan.gpu_hours_upper_bound
    assert hours is not None
    assert plan.gpu_hours_upper_bound == pytest.approx(3 * hours)


def test_repeats_share_a_plan_and_ids_derive_from_benchmark_case_plan_and_repeat() -> None:
    plan = plan_of(benchmark([{"axis": "concurrency", "alias": "writer", "values": [8, 16]}], repeats=2))
    first, second = plan.children[:2]
    assert first.plan_digest == second.plan_digest == first.plan.digest == plan_digest(first.plan)
    assert first.child_id != second.child_id
    for child in plan.children:
        assert len(child.child_id) == CHILD_ID_LENGTH
        assert child.child_id == child_id(plan.digest, child.case, child.plan_digest, child.repeat)
    assert (
        child_id(plan.digest, first.case, first.plan_digest, 0)
        == sha256_digest(
            {"benchmark": plan.digest, "case": [["concurrency.writer", 8]], "plan": first.plan_digest, "repeat": 0}
        )[:CHILD_ID_LENGTH]
    )


def test_the_digest_covers_everything_but_the_child_ids_and_reloads() -> None:
    plan = plan_of(benchmark([{"axis": "concurrency", "alias": "writer", "values": [8, 16]}]))
    assert benchmark_plan_digest(plan) == plan.digest
    reloaded = BenchmarkPlan.model_validate_json(plan.model_dump_json())
    assert reloaded == plan
    assert benchmark_plan_digest(reloaded) == plan.digest
    changed = plan.model_copy(update={"max_concurrent_children": 7})
    assert benchmark_plan_digest(changed) != plan.digest


def test_request_targets_at_their_defaults_keep_the_digest_a_benchmark_had_before_them() -> None:
    axes = [{"axis": "concurrency", "alias": "writer", "values": [8, 16]}]
    plan = plan_of(benchmark(axes))
    body = plan.model_dump(mode="json", exclude={"digest": True, "children": {"__all__": {"child_id", "plan"}}})
    targets = body["benchmark"]["targets"]
    assert (targets.pop("max_error_rate"), targets.pop("max_p95_latency_s")) == (0.0, None)
    assert sha256_digest(body) == plan.digest, "the digest of the targets issue 31 found"
    explicit = plan_of(benchmark(axes, targets={"max_error_rate": 0, "max_p95_latency_s": None}))
    assert explicit.digest == plan.digest
    assert plan_of(benchmark(axes, targets={"max_error_rate": 0.01})).digest != plan.digest
    assert plan_of(benchmark(axes, targets={"max_p95_latency_s": 2.5})).digest != plan.digest


def test_equal_cases_give_equal_plan_digests_across_benchmarks() -> None:
    one = plan_of(benchmark([{"axis": "concurrency", "alias": "writer", "values": [8, 16]}]))
    other = plan_of(
        benchmark([{"axis": "concurrency", "alias": "writer", "values": [16, 32]}], name="another", repeats=2)
    )
    assert one.children[1].plan_digest == other.children[0].plan_digest
    assert one.digest != other.digest
    assert one.children[1].child_id != other.children[0].child_id


def test_the_resolved_benchmark_inlines_the_base_run_and_its_config(tmp_path: Any) -> None:
    spec = benchmark([{"axis": "concurrency", "alias": "writer", "values": [8]}])
    plan = plan_of(spec)
    assert plan.benchmark.base.run is None
    inline = plan.benchmark.base.inline
    assert inline is not None
    assert inline["data_designer"] == {"config": None, "inline": CONFIG}
    assert inline["client"]["default_concurrency"] == 32  # defaults written out
    # A base run named by path gives the same benchmark plan as the same run inline.
    run_text = json.dumps(base_run())
    by_path = {**spec, "base": {"run": "/runs/base.json"}}
    source = parse_document(json.dumps(by_path), file="bench.json")
    bench = validate_document(BenchmarkSpec, source, operation="test")
    base = load_base_run(bench, run_text, file="bench.json")
    again = expand(
        bench,
        ClusterProfile.model_validate(PROFILE),
        cluster="c",
        base=base,
        config=resolve_config(base),
        source=source,
    )
    assert again.digest == plan.digest
    assert again == plan


def test_defaults_written_out_key_order_and_yaml_give_the_same_digest() -> None:
    spec = benchmark([{"axis": "concurrency", "alias": "writer", "values": [8, 16]}])
    plan = plan_of(spec)
    written = dict(plan.benchmark.model_dump(mode="json"))
    assert plan_of(written).digest == plan.digest
    reordered = {key: spec[key] for key in reversed(list(spec))}
    reordered["axes"] = [{key: axis[key] for key in reversed(list(axis))} for axis in spec["axes"]]
    assert plan_of(reordered).digest == plan.digest
    as_yaml = yaml.safe_dump(spec, sort_keys=False)  # deployments keep their order: replicas pack in it
    source = parse_document(as_yaml, file="bench.yaml")
    bench = validate_document(BenchmarkSpec, source, operation="test")
    base = load_base_run(bench, file="bench.yaml")
    again = expand(
        bench,
        ClusterProfile.model_validate(PROFILE),
        cluster="c",
        base=base,
        config=resolve_config(base),
        source=source,
    )
    assert again.digest == plan.digest


def test_named_images_are_unresolved_in_a_dry_run_and_resolved_from_a_registry() -> None:
    spec = benchmark([{"axis": "image", "alias": "writer", "values": ["vllm-a", "/images/b.sqsh"]}])
    dry = plan_of(spec)
    assert [(u.what, u.key_path) for u in dry.unresolved] == [("image", "axes[0].values[0]")]
    registry = [ImageRecord(name="vllm-a", path="/images/a.sqsh", kind="squashfs", digest="0" * 64)]
    resolved = plan_of(spec, images=registry)
    assert resolved.unresolved == ()
    image = resolved.children[0].plan.allocation.replicas[0].image
    assert image is not None
    assert image.path == "/images/a.sqsh"


def test_every_axis_problem_is_reported_at_once_with_its_key_path_and_line() -> None:
    spec = benchmark(
        [
            {"axis": "tensor_parallel", "alias": "judge", "values": [2]},
            {"axis": "concurrency", "alias": "ghost", "values": [1]},
            {"axis": "replicas", "alias": "nim", "values": [2]},
            {"axis": "engine_arg", "alias": "writer", "arg": "port", "values": [1]},
            {"axis": "engine_arg", "alias": "writer", "arg": "max-num-seqz", "values": [1]},
            {"axis": "engine_arg", "alias": "writer", "arg": "disable-log-stats", "values": [True, False]},
            {"axis": "model", "alias": "writer", "values": ["/m/a", "/m/a"]},
            {"axis": "nodes", "alias": "writer", "values": [1]},
            {"axis": "replicas", "alias": "writer", "values": [1]},
        ]
    )
    text = json.dumps(spec, indent=1)
    lines = text.splitlines()
    found = problems_of(spec, text=text)
    assert len(found) == 8, found

    def line_of(fragment: str, after: int = 0) -> int:
        return next(n for n, line in enumerate(lines, 1) if n > after and fragment in line)

    axes_line = line_of('"axes"')
    assert found[0].startswith(f"bench.json:{line_of('judge', axes_line)}: axes[0].alias: the tensor_parallel axis")
    assert "'judge' uses engine 'command'" in found[0]
    assert found[1].startswith("bench.json:")
    assert "axes[1].alias: alias 'ghost' is neither deployed nor external" in found[1]
    assert "axes[2].alias: the replicas axis needs a deployed alias; 'nim' is external" in found[2]
    assert "axes[3].arg: engine arg 'port' (--port) is set by the runtime" in found[3]
    assert "axes[4].arg: 'vllm serve'" in found[4]
    assert "did you mean 'max-num-seqs'?" in found[4]
    assert "axes[5].values[1]: --disable-log-stats is a switch without a --no-disable-log-stats form" in found[5]
    assert "axes[6].values[1]: value '/m/a' repeats values[0]" in found[6]
    assert "axes[8]: axis 'replicas.writer' sets what axes[7] ('nodes.writer') already sets" in found[7]


def test_child_problems_map_to_axis_values_and_base_problems_are_reported_once() -> None:
    spec = benchmark(
        [
            {"axis": "tensor_parallel", "alias": "writer", "values": [1, 6]},
            {"axis": "nodes", "alias": "judge", "values": [1, 2]},
            {"axis": "concurrency", "alias": "writer", "values": [1, 2, 4]},
        ],
        base={"inline": base_run(submission={"time_limit": "00:10:00"})},
    )
    found = problems_of(spec)
    time_limit = [p for p in found if "submission.time_limit" in p]
    assert len(time_limit) == 1
    assert time_limit[0].startswith("bench.json:")
    assert ": base.inline.submission.time_limit: time limit '00:10:00'" in time_limit[0]
    assert "(in " not in time_limit[0]  # found in every case
    shape = [p for p in found if "axes[0].values[1]" in p]
    assert len(shape) == 1
    assert "a replica of 'writer' needs 6 GPUs" in shape[0]
    assert "(in 6 of 12 cases, first tensor_parallel.writer=6, nodes.judge=1, concurrency.writer=1)" in shape[0]


def test_nodes_too_few_for_a_replica_is_a_problem_of_that_value() -> None:
    spec = benchmark(
        [
            {"axis": "tensor_parallel", "alias": "writer", "values": [8]},
            {"axis": "nodes", "alias": "writer", "values": [1, 2]},
        ]
    )
    (problem,) = problems_of(spec)
    assert "axes[1].values[0]: 1 node(s) of 4 GPUs cannot hold a replica of 'writer' (8 GPUs)" in problem
    assert "(in case tensor_parallel.writer=8, nodes.writer=1)" in problem


def test_a_base_run_file_s_problems_name_that_file() -> None:
    spec = benchmark([{"axis": "concurrency", "alias": "writer", "values": [8]}], base={"run": "/runs/base.yaml"})
    run_text = "\n".join(
        [
            "schema_version: 1",
            "name: base",
            "data_designer: {inline: " + json.dumps(CONFIG) + "}",
            "records: 10",
            "sharding: {shards: 1}",
            "deployments: {writer: {engine: vllm, model: /m}, judge: {engine: vllm, model: /j}}",
            "external: {nim: {endpoint: 'https://x/v1'}}",
            "submission:",
            "  time_limit: '00:10:00'",
        ]
    )
    source = parse_document(json.dumps(spec), file="bench.json")
    bench = validate_document(BenchmarkSpec, source, operation="test")
    base_source = parse_document(run_text, file="/runs/base.yaml")
    base = load_run(run_text, file="/runs/base.yaml")
    with pytest.raises(InvalidInputError) as caught:
        expand(
            bench,
            ClusterProfile.model_validate(PROFILE),
            cluster="c",
            base=base,
            config=resolve_config(base),
            source=source,
            base_source=base_source,
        )
    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.key_path) == ("/runs/base.yaml", 9, ("submission", "time_limit"))


def test_an_axis_over_a_flag_of_one_release_is_checked_against_each_child_s_release() -> None:
    def sweep(version: str | None, values: list[Any]) -> dict[str, Any]:
        run = base_run()
        run["deployments"]["writer"] = {"engine": "vllm", "model": "/m/llama"}
        if version is not None:
            run["deployments"]["writer"]["vllm_version"] = version
        axis = {"axis": "engine_arg", "alias": "writer", "arg": "disable-prefix-caching", "values": values}
        return benchmark([axis], base={"inline": run})

    plan = plan_of(sweep("0.33.0", [True]))
    assert [child.plan.allocation.replicas[0].argv[-1] for child in plan.children] == ["--disable-prefix-caching"]
    for version in ("0.32.0", None):
        found = problems_of(sweep(version, [True]))
        assert len(found) == 1, found
        assert "axes[0].values[0]" in found[0]
        assert "vllm 0.32.0 has no option --disable-prefix-caching (vllm 0.33.0 has it)" in found[0]
        assert "vllm_version" in found[0], "the fix says how to state the release"
    # A value no release accepts is reported once, at the axis, by the release that has the flag.
    (refused,) = problems_of(sweep("0.33.0", [True, False]))
    assert "axes[0].values[1]" in refused
    assert "switch without a --no-disable-prefix-caching form" in refused
