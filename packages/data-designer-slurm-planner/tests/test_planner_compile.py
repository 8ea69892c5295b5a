"""compile(): defaults resolved, every problem at once, packing, argv templates, images, unresolved facts, binding."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from data_designer.slurm.contracts import (
    ClusterFacts,
    ClusterProfile,
    ExecutionPlan,
    ImageRecord,
    InvalidInputError,
    RunSpec,
    SubmissionBinding,
    format_key_path,
)
from data_designer.slurm.planner import Document
from data_designer.slurm.planner._argv import bind_argv, escape_braces
from data_designer.slurm.planner._compile import compile, plan_digest
from data_designer.slurm.planner._inputs import load_run, resolve_config
from data_designer.slurm.planner._sbatch import bind_retry, bind_submission, format_indices

CONFIG: dict[str, Any] = {
    "model_configs": [
        {"alias": "writer", "model": "meta/llama-3.1-8b-instruct", "provider": "local"},
        {"alias": "nim", "model": "nvidia/nemotron", "provider": "nvidia"},
    ],
    "columns": [
        {"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "x"},
        {"name": "b", "column_type": "llm-text", "model_alias": "nim", "prompt": "y"},
    ],
}

PROFILE: dict[str, Any] = {
    "workspace_root": "/ws",
    "account": "acct",
    "partitions": {"gpu": "gpu", "cpu": "cpu"},
    "gpus_per_node": 4,
    "compute_python": {"interpreter": "/venv/bin/python"},
    "default_time_limit": "04:00:00",
}


def _run(**changes: Any) -> dict[str, Any]:
    run: dict[str, Any] = {
        "schema_version": 1,
        "name": "r",
        "data_designer": {"inline": copy.deepcopy(CONFIG)},
        "records": 100,
        "sharding": {"shards": 4},
        "deployments": {"writer": {"engine": "vllm", "model": "/m/llama"}},
        "external": {"nim": {"endpoint": "https://api.example/v1", "api_key_env": "NIM_KEY"}},
    }
    run.update(changes)
    return run


def _compile(
    run: dict[str, Any],
    profile: dict[str, Any] | None = None,
    *,
    facts: ClusterFacts | None = None,
    images: list[ImageRecord] | None = None,
) -> ExecutionPlan:
    spec = load_run(json.dumps(run), file="run.json")
    cluster = ClusterProfile.model_validate({**PROFILE, **(profile or {})})
    return compile(spec, cluster, cluster="c", config=resolve_config(spec), facts=facts, images=images)


def _problems(run: dict[str, Any], profile: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, str]:
    with pytest.raises(InvalidInputError) as caught:
        _compile(run, profile, **kwargs)
    return {f"{p.code}@{format_key_path(p.key_path or ())}": p.message for p in caught.value.problems}


def test_every_default_is_spelled_out_in_the_plan_s_run() -> None:
    plan = _compile(_run())
    submission = plan.run.submission
    assert (submission.time_limit, submission.partition, submission.account) == ("04:00:00", "gpu", "acct")
    assert plan.run.client.concurrency == {"writer": 32, "nim": 32}
    assert plan.run.data_designer.config is None
    assert plan.run.data_designer.inline == CONFIG
    assert plan.allocation.time_limit_s == 4 * 3600
    assert plan.allocation.partition == "gpu"
    assert plan.cluster == "c"


def test_writing_the_defaults_out_gives_the_same_digest() -> None:
    plan = _compile(_run())
    written = plan.run.model_dump(mode="json")
    assert _compile(written).digest == plan.digest


def test_shards_get_ranges_and_distinct_seeds() -> None:
    plan = _compile(_run(records=10, sharding={"shards": 3}, seed=5))
    assert [(s.start, s.stop) for s in plan.shards] == [(0, 4), (4, 7), (7, 10)]
    assert len({s.seed for s in plan.shards}) == 3
    assert plan.shards == _compile(_run(records=10, sharding={"shards": 3}, seed=5)).shards
    assert plan.shards[0].seed != _compile(_run(records=10, sharding={"shards": 3}, seed=6)).shards[0].seed


def test_endpoints_and_client_invocation() -> None:
    plan = _compile(_run(client={"concurrency": {"nim": 4}}))
    client = plan.allocation.client
    assert client.argv == (
        "/venv/bin/python",
        "-m",
        "data_designer.slurm.runtime.worker",
        "--plan",
        "plan.json",
        "--shard",
        "{shard}",
        "--attempt",
        "{attempt}",
    )
    writer, nim = client.endpoints
    assert (writer.kind, writer.model, writer.replicas, writer.concurrency) == ("deployed", "writer", (0,), 32)
    assert (nim.kind, nim.model, nim.endpoint, nim.api_key_env, nim.concurrency) == (
        "external",
        "nvidia/nemotron",
        "https://api.example/v1",
        "NIM_KEY",
        4,
    )


def test_vllm_argv_environment_and_health() -> None:
    plan = _compile(
        _run(deployments={"writer": {"engine": "vllm", "model": "/m/{x}", "engine_args": {"max-num-seqs": 8}}}),
        {"huggingface": {"hf_home": "/hf", "offline": True}, "environment": ["HF_TOKEN"]},
    )
    (replica,) = plan.allocation.replicas
    assert replica.argv == (
        "vllm",
        "serve",
        "/m/{{x}}",
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--tensor-parallel-size",
        "1",
        "--pipeline-parallel-size",
        "1",
        "--served-model-name",
        "writer",
        "--max-num-seqs",
        "8",
    )
    assert bind_argv(replica.argv, {"host": "127.0.0.1", "port": "8000"})[2] == "/m/{x}"
    assert replica.environment == {"HF_HOME": "/hf", "HF_HUB_OFFLINE": "1"}
    assert replica.pass_environment == ("HF_TOKEN",)
    assert (replica.health_path, replica.bind, replica.requires_api_key) == ("/health", "loopback", True)
    assert (replica.node_indices, replica.gpu_indices) == ((0,), (0,))


def test_replicas_pack_in_declared_alias_order_and_remote_ones_need_a_key() -> None:
    deployments = {
        "writer": {"engine": "vllm", "model": "m", "tensor_parallel": 2, "replicas": 3, "cpus_per_replica": 2},
        "judge": {"engine": "vllm", "model": "m", "tensor_parallel": 8},
    }
    config = copy.deepcopy(CONFIG)
    config["model_configs"].append({"alias": "judge", "model": "j"})
    config["columns"].append({"name": "c", "column_type": "llm-judge", "model_alias": "judge", "prompt": "z"})
    plan = _compile(_run(deployments=deployments, data_designer={"inline": config}))
    placed = [(r.alias, r.replica, r.node_indices, r.gpu_indices, r.bind) for r in plan.allocation.replicas]
    assert placed == [
        ("writer", 0, (0,), (0, 1), "loopback"),
        ("writer", 1, (0,), (2, 3), "loopback"),
        ("writer", 2, (1,), (0, 1), "all"),
        ("judge", 0, (2, 3), (0, 1, 2, 3), "all"),
    ]
    assert [r.requires_api_key for r in plan.allocation.replicas] == [True, True, True, True]  # loopback too
    # The key is no argv's business: a remote replica's argv equals a loopback one's (see test_planner_hygiene.py).
    assert plan.allocation.replicas[2].argv == plan.allocation.replicas[0].argv
    assert (plan.allocation.nodes, plan.allocation.gpus, plan.allocation.cpus_per_node) == (4, 14, 8)
    assert plan.gpu_hours_upper_bound == 4 * 4 * 4 * 4.0
    assert plan.submission.script is not None
    assert "#SBATCH --nodes=4\n" in plan.submission.script
    assert "#SBATCH --gres=gpu:4\n" in plan.submission.script


def test_memory_per_node_is_the_client_s_plus_the_replicas_there_and_reaches_the_script() -> None:
    deployments = {
        "writer": {"engine": "vllm", "model": "m", "tensor_parallel": 2, "replicas": 3, "memory_gb_per_replica": 20},
        "judge": {"engine": "vllm", "model": "m", "tensor_parallel": 8},  # the default 32 GB, on each of 2 nodes
    }
    config = copy.deepcopy(CONFIG)
    config["model_configs"].append({"alias": "judge", "model": "j"})
    config["columns"].append({"name": "c", "column_type": "llm-judge", "model_alias": "judge", "prompt": "z"})
    plan = _compile(_run(deployments=deployments, data_designer={"inline": config}, client={"memory_gb": 3}))
    assert [(r.alias, r.node_indices, r.memory_mb) for r in plan.allocation.replicas] == [
        ("writer", (0,), 20_000),
        ("writer", (0,), 20_000),
        ("writer", (1,), 20_000),
        ("judge", (2, 3), 32_000),
    ]
    assert (plan.allocation.client.memory_gb, plan.allocation.client.memory_mb) == (3, 3_000)
    # Node 0 holds the client and two writers: 3 + 20 + 20 GB; the others hold less; sbatch asks every node the most.
    assert plan.allocation.memory_mb_per_node == 43_000
    assert plan.submission.script is not None
    assert "#SBATCH --mem=43000\n" in plan.submission.script


def test_the_default_run_requests_four_cpus_and_48_gb_with_one_vllm_replica() -> None:
    plan = _compile(_run())
    assert (plan.allocation.cpus_per_node, plan.allocation.memory_mb_per_node) == (4 + 4, 16_000 + 32_000)
    assert plan.run.client.memory_gb == 16
    assert plan.run.deployments["writer"].memory_gb_per_replica == 32
    command = {"engine": "command", "argv": ["/bin/server", "{port}"], "model": "m"}
    small = _compile(_run(deployments={"writer": command}, client={"memory_gb": 1, "cpus": 1}))
    assert (small.allocation.cpus_per_node, small.allocation.memory_mb_per_node) == (2, 2_000)
    assert small.allocation.replicas[0].memory_mb == 1_000


def test_an_exclusive_allocation_asks_for_all_of_each_node_s_memory_and_plans_what_it_needs() -> None:
    plan = _compile(_run(submission={"exclusive": True}))
    assert plan.submission.script is not None
    assert "#SBATCH --mem=0\n" in plan.submission.script
    assert "#SBATCH --exclusive\n" in plan.submission.script
    assert plan.allocation.memory_mb_per_node == 48_000  # the least a node must have, for the cluster check


def test_memory_is_unknown_while_the_nodes_are() -> None:
    plan = _compile(_run(), {"gpus_per_node": "auto"})
    assert plan.allocation.memory_mb_per_node is None
    assert plan.allocation.replicas[0].memory_mb == 32_000


def test_command_templates_substitute_what_is_known_and_keep_host_and_port() -> None:
    deployments = {
        "writer": {
            "engine": "command",
            "argv": [
                "/srv/{{literal}}",
                "--url=http://{host}:{port}/",
                "{model}",
                "{gpus}",
                "{served_name}",
                "{api_key_env}",
            ],
            "model": "weird {model} name",
            "gpus_per_replica": 2,
        }
    }
    plan = _compile(_run(deployments=deployments))
    (replica,) = plan.allocation.replicas
    assert replica.argv == (
        "/srv/{{literal}}",
        "--url=http://{host}:{port}/",
        "weird {{model}} name",
        "2",
        "writer",
        "DDSLURM_SERVER_API_KEY",
    )
    assert bind_argv(replica.argv, {"host": "h", "port": "1"}) == (
        "/srv/{literal}",
        "--url=http://h:1/",
        "weird {model} name",
        "2",
        "writer",
        "DDSLURM_SERVER_API_KEY",
    )


def test_a_problem_of_a_deployment_is_reported_once_however_many_replicas_check_it() -> None:
    run = _run(
        deployments={"writer": {"engine": "vllm", "model": "m", "replicas": 2, "engine_args": {"enforce-eagr": True}}}
    )
    with pytest.raises(InvalidInputError) as caught:
        _compile(run)
    found = [(p.code, p.key_path) for p in caught.value.problems]
    assert found == [("engine_arg_unknown", ("deployments", "writer", "engine_args", "enforce-eagr"))]


def test_every_problem_is_reported_at_once() -> None:
    run = _run(
        deployments={
            "writer": {
                "engine": "vllm",
                "model": "m",
                "startup_timeout_s": 3000,
                "engine_args": {"port": 1, "max-num-seqz": 2},
            },
            "extra": {"engine": "command", "argv": ["srv", "{nope}", "{host:>4}", "{"], "model": "m"},
        },
        external={},
        client={"concurrency": {"ghost": 2}},
        submission={"time_limit": "00:30:00"},
    )
    problems = _problems(run)
    assert set(problems) == {
        "alias_not_served@deployments",
        "unknown_alias@client.concurrency.ghost",
        "time_limit_too_short@submission.time_limit",
        "engine_arg_controlled@deployments.writer.engine_args.port",
        "engine_arg_unknown@deployments.writer.engine_args.max-num-seqz",
        "unknown_placeholder@deployments.extra.argv[1]",
        "unknown_placeholder@deployments.extra.argv[2]",
        "argv_template@deployments.extra.argv[3]",
    }
    assert "'nim'" in problems["alias_not_served@deployments"]
    message = problems["time_limit_too_short@submission.time_limit"]
    for number in ("1800 s", "3000 s", "120 s", "300 s", "60 s", "3480 s"):
        assert number in message


def test_the_time_limit_may_equal_the_budget() -> None:
    run = _run(
        deployments={"writer": {"engine": "vllm", "model": "m", "startup_timeout_s": 60}},
        submission={"time_limit": "9:00", "drain_grace_s": 60, "warning_lead_s": 360},
    )
    assert _compile(run).allocation.time_limit_s == 540
    run["submission"]["drain_grace_s"] = 61
    assert "time_limit_too_short@submission.time_limit" in _problems(run)


def test_a_spanning_replica_must_fill_whole_nodes() -> None:
    run = _run(deployments={"writer": {"engine": "vllm", "model": "m", "tensor_parallel": 6}})
    assert "replica_shape@deployments.writer.tensor_parallel" in _problems(run)


def test_more_shards_than_records_is_an_error() -> None:
    assert "empty_shard@sharding.shards" in _problems(_run(records=3, sharding={"shards": 4}))


def test_blocking_config_findings_are_problems() -> None:
    config = copy.deepcopy(CONFIG)
    config["columns"].append({"name": "f", "column_type": "custom", "generator_function": "f"})
    assert "custom_column@columns[2].column_type" in _problems(_run(data_designer={"inline": config}))


def test_served_aliases_no_column_uses_are_warnings() -> None:
    config = copy.deepcopy(CONFIG)
    config["columns"] = config["columns"][:1]
    config["model_configs"][0]["model"] = "/m/llama"  # the deployment's: no model_mismatch warning
    plan = _compile(_run(data_designer={"inline": config}))
    assert [(w.code, w.key_path) for w in plan.warnings] == [("alias_unused", "external.nim")]


def test_a_config_model_other_than_the_deployment_s_is_a_warning_and_the_deployment_wins() -> None:
    plan = _compile(_run())
    [warning] = [w for w in plan.warnings if w.code == "model_mismatch"]
    assert warning.key_path == "deployments.writer.model"
    assert "'meta/llama-3.1-8b-instruct'" in warning.message
    assert "'/m/llama'" in warning.message
    assert warning.message == (
        "the Data Designer config names 'meta/llama-3.1-8b-instruct' (model_configs[0].model), the deployment "
        "'/m/llama': the deployment wins, the client asks its server for 'writer'"
    )
    writer = plan.allocation.client.endpoints[0]
    assert (writer.alias, writer.model) == ("writer", "writer")
    assert plan.allocation.replicas[0].served_name == "writer"


def test_a_config_model_naming_the_deployment_s_model_or_served_name_is_no_warning() -> None:
    for model in ("/m/llama", "writer"):
        config = copy.deepcopy(CONFIG)
        config["model_configs"][0]["model"] = model
        plan = _compile(_run(data_designer={"inline": config}))
        assert [w for w in plan.warnings if w.code == "model_mismatch"] == [], model


def test_a_command_deployment_without_served_name_serves_its_model_and_the_client_asks_for_it() -> None:
    config = copy.deepcopy(CONFIG)
    config["model_configs"][0]["model"] = "other"
    command = {"engine": "command", "argv": ["serve", "--port", "{port}", "--model", "{model}"], "model": "m-1"}
    plan = _compile(_run(data_designer={"inline": config}, deployments={"writer": command}))
    assert plan.allocation.replicas[0].served_name == "m-1"
    assert plan.allocation.client.endpoints[0].model == "m-1"
    [warning] = [w for w in plan.warnings if w.code == "model_mismatch"]
    assert "'other'" in warning.message
    assert warning.message.endswith(", the client asks its server for 'm-1'")


def test_an_external_model_other_than_the_config_s_is_a_warning() -> None:
    plan = _compile(_run(external={"nim": {"endpoint": "https://api.example/v1", "model": "nvidia/other"}}))
    [warning] = [w for w in plan.warnings if w.key_path == "external.nim.model"]
    assert warning.code == "model_mismatch"
    assert "'nvidia/nemotron'" in warning.message
    assert "the run file 'nvidia/other': the run file wins" in warning.message
    assert plan.allocation.client.endpoints[1].model == "nvidia/other"


def test_gpus_per_node_auto_is_unresolved_without_facts_and_resolved_with_them() -> None:
    plan = _compile(_run(), {"gpus_per_node": "auto"})
    assert [u.what for u in plan.unresolved] == ["gpus_per_node"]
    assert plan.allocation.nodes is None
    assert plan.allocation.cpus_per_node is None
    assert plan.allocation.replicas[0].node_indices is None
    assert plan.submission.script is None
    assert plan.gpu_hours_upper_bound is None
    assert len(plan.submission.chunks) == 1
    resolved = _compile(_run(), {"gpus_per_node": "auto"}, facts=ClusterFacts(gpus_per_node=8))
    assert resolved.unresolved == ()
    assert resolved.allocation.gpus_per_node == 8


def test_images_resolve_from_the_registry_by_name_or_stay_unresolved() -> None:
    run = _run(deployments={"writer": {"engine": "vllm", "model": "m", "image": "vllm"}})
    record = ImageRecord(name="vllm", path="/img/vllm.sqsh", kind="squashfs", digest="d" * 64)
    plan = _compile(run, {"container_runtime": "pyxis"}, images=[record])
    image = plan.allocation.replicas[0].image
    assert image is not None
    assert (image.path, image.digest, image.runtime) == ("/img/vllm.sqsh", "d" * 64, "pyxis")
    assert plan.unresolved == ()
    registries: list[list[ImageRecord] | None] = [None, []]
    for registry in registries:
        dry = _compile(run, {"container_runtime": "pyxis"}, images=registry)
        assert [(u.what, u.key_path) for u in dry.unresolved] == [("image", "deployments.writer.image")]
        assert dry.allocation.replicas[0].image is not None
        assert dry.allocation.replicas[0].image.path is None


def test_an_image_needs_a_container_runtime() -> None:
    run = _run(deployments={"writer": {"engine": "vllm", "model": "m", "image": "/img/x.sif"}})
    assert "no_container_runtime@deployments.writer.image" in _problems(run)


def test_whole_node_clusters_request_exclusive_nodes_without_gres() -> None:
    plan = _compile(_run(), {"gpu_request": "whole_node"})
    assert plan.submission.script is not None
    assert "#SBATCH --exclusive\n" in plan.submission.script
    assert "--gres" not in plan.submission.script
    assert plan.gpu_hours_upper_bound == 4 * 4 * 4.0


def test_authored_sbatch_options_and_odd_names_travel_as_argv() -> None:
    plan = _compile(
        _run(submission={"sbatch_options": ["--constraint=a100&ib"], "partition": "gpu part"}),
        {"sbatch_options": ["--qos=high"], "account": "acct;$(x)"},
    )
    assert plan.submission.sbatch_args == (
        "--qos=high",
        "--constraint=a100&ib",
        "--partition=gpu part",
        "--account=acct;$(x)",
    )
    assert plan.submission.script is not None
    assert "a100" not in plan.submission.script
    assert "--partition" not in plan.submission.script
    assert "--account" not in plan.submission.script


def test_the_plan_stores_authored_sbatch_options_as_sbatch_reads_them() -> None:
    # The profile is built directly (not loaded), so compile itself resolves abbreviations and short letters.
    plan = _compile(_run(submission={"sbatch_options": ["--mail-t", "END"]}), {"sbatch_options": ["-q", "high", "-Qk"]})
    assert plan.submission.sbatch_args[:4] == ("--qos=high", "--quiet", "--no-kill", "--mail-type=END")
    # Every option the planner binds comes after the authored ones, so a later option of the plan always wins.
    unit = bind_submission(plan, SubmissionBinding(run_id="x", run_dir="/ws/runs/x", job_name_prefix="dd-r-x"))
    assert unit.sbatch_args[:4] == plan.submission.sbatch_args[:4]
    assert all(not arg.startswith(("--qos", "--quiet", "--no-kill", "--mail-type")) for arg in unit.sbatch_args[4:])


def test_compile_refuses_a_reserved_option_however_it_is_spelled() -> None:
    # Both built directly (load_run would refuse the run's option first), so compile itself must refuse them.
    spec = RunSpec.model_validate(_run(submission={"sbatch_options": ["-N2"]}))
    cluster = ClusterProfile.model_validate({**PROFILE, "sbatch_options": ["--qos=high", "--wra=x"]})
    with pytest.raises(InvalidInputError) as caught:
        compile(spec, cluster, cluster="c", config=resolve_config(spec))
    problems = {f"{p.code}@{format_key_path(p.key_path or ())}": p.message for p in caught.value.problems}
    assert problems["reserved_sbatch_option@clusters.c.sbatch_options[1]"].startswith("sbatch option --wrap")
    assert problems["reserved_sbatch_option@submission.sbatch_options[0]"].startswith("sbatch option --nodes")


def test_max_array_size_chunks_the_shards() -> None:
    plan = _compile(
        _run(records=5000, sharding={"records_per_shard": 2}, submission={"max_concurrent_shards": 16}),
        facts=ClusterFacts(max_array_size=1001),
    )
    assert len(plan.shards) == 2500
    assert [(c.array_spec, c.index_offset) for c in plan.submission.chunks] == [
        ("0-1000%16", 0),
        ("0-1000%16", 1001),
        ("0-497%16", 2002),
    ]


def test_the_digest_covers_every_other_field_and_nothing_run_specific() -> None:
    plan = _compile(_run())
    assert plan.digest == plan_digest(plan)
    assert plan_digest(plan.model_copy(update={"cluster": "other"})) != plan.digest
    assert _compile(_run()).digest == plan.digest
    unit_a = bind_submission(plan, SubmissionBinding(run_id="a", run_dir="/ws/runs/a", job_name_prefix="dd-r-a"))
    unit_b = bind_submission(plan, SubmissionBinding(run_id="b", run_dir="/ws/runs/b", job_name_prefix="dd-r-b"))
    assert unit_a.script == unit_b.script == plan.submission.script
    assert unit_a.sbatch_args != unit_b.sbatch_args


def test_a_retry_submits_only_the_named_shards_taking_the_next_attempt() -> None:
    plan = _compile(
        _run(records=30, sharding={"shards": 30}, submission={"max_concurrent_shards": 4}),
        facts=ClusterFacts(max_array_size=11),
    )
    binding = SubmissionBinding(run_id="x", run_dir="/ws/runs/x", job_name_prefix="dd-r-x")
    unit = bind_retry(plan, binding, shards=[3, 4, 5, 9, 25], generation=2)
    assert [(c.job_name, c.array_spec, c.index_offset) for c in unit.chunks] == [
        ("dd-r-x-r2-c0", "3-5,9%4", 0),
        ("dd-r-x-r2-c2", "3%4", 22),
    ]
    assert [(t.index, t.shard) for c in unit.chunks for t in c.tasks] == [(3, 3), (4, 4), (5, 5), (9, 9), (3, 25)]
    # throttled: the second chunk waits for the first (afterany), so at most 4 of the retry's tasks run at once
    assert [c.after for c in unit.chunks] == [None, "dd-r-x-r2-c0"]
    unthrottled = _compile(_run(records=30, sharding={"shards": 30}), facts=ClusterFacts(max_array_size=11))
    assert [c.after for c in bind_retry(unthrottled, binding, shards=[3, 25], generation=1).chunks] == [None, None]
    assert [a for a in unit.sbatch_args if a.startswith("--export")] == ["--export=ALL,NIM_KEY,DDSLURM_ATTEMPT=next"]
    assert unit.script == plan.submission.script
    with pytest.raises(InvalidInputError, match="not in the plan"):
        bind_retry(plan, binding, shards=[30], generation=1)
    with pytest.raises(InvalidInputError, match="at least one shard"):
        bind_retry(plan, binding, shards=[], generation=1)


@pytest.mark.parametrize(
    ("indices", "spec"), [([0], "0"), ([3, 1, 2, 2], "1-3"), ([0, 2, 4, 5, 6, 9], "0,2,4-6,9"), (range(11), "0-10")]
)
def test_array_specs_are_compact(indices: list[int], spec: str) -> None:
    assert format_indices(indices) == spec


def test_binding_adds_job_names_working_directory_and_logs() -> None:
    plan = _compile(_run(records=30, sharding={"shards": 30}), facts=ClusterFacts(max_array_size=11))
    unit = bind_submission(plan, SubmissionBinding(run_id="x", run_dir="/ws/runs/x/", job_name_prefix="dd-r-x"))
    assert [c.job_name for c in unit.chunks] == ["dd-r-x-c0", "dd-r-x-c1", "dd-r-x-c2"]
    assert [c.index_offset for c in unit.chunks] == [0, 11, 22]
    assert unit.sbatch_args == (
        "--export=ALL,NIM_KEY",  # the run names NIM_KEY (api_key_env): its value travels by environment only
        "--chdir=/ws/runs/x/",
        "--output=/ws/runs/x/slurm-%x_%a.out",
        "--error=/ws/runs/x/slurm-%x_%a.err",
    )
    assert unit.environment == ("NIM_KEY",)


def test_binding_refuses_unresolved_plans_and_pattern_characters() -> None:
    unresolved = _compile(_run(), {"gpus_per_node": "auto"})
    with pytest.raises(InvalidInputError) as caught:
        bind_submission(unresolved, SubmissionBinding(run_id="x", run_dir="/ws/x", job_name_prefix="p"))
    assert [p.key_path for p in caught.value.problems] == [("gpus_per_node",)]
    plan = _compile(_run())
    for bad in ("/ws/100%", "relative/dir", "/ws/a\\b"):
        with pytest.raises(InvalidInputError, match="run directory"):
            bind_submission(plan, SubmissionBinding(run_id="x", run_dir=bad, job_name_prefix="p"))


def test_escape_and_bind_round_trip_any_text() -> None:
    for text in ("", "{", "}}", "{host}", "a{b}c{{d}}", "$(touch X) `x` ';&"):
        assert bind_argv((escape_braces(text),), {}) == (text,)


def test_a_config_file_is_read_from_the_text_the_caller_passes() -> None:
    run = RunSpec.model_validate({**_run(), "data_designer": {"config": "/cfg/c.yaml"}}, strict=False)
    with pytest.raises(InvalidInputError, match="was not given"):
        resolve_config(run)
    document = resolve_config(run, json.dumps(CONFIG))
    assert isinstance(document, Document)
    assert document.file == "/cfg/c.yaml"
    cluster = ClusterProfile.model_validate(PROFILE)
    from_file = compile(run, cluster, cluster="c", config=document)
    assert from_file.digest == _compile(_run()).digest


def test_gpus_per_node_is_not_needed_when_nothing_uses_gpus() -> None:
    deployments = {"writer": {"engine": "command", "argv": ["srv", "{port}"], "model": "m", "gpus_per_replica": 0}}
    plan = _compile(_run(deployments=deployments), {"gpus_per_node": "auto"})
    assert plan.unresolved == ()
    assert (plan.allocation.nodes, plan.allocation.gpus_per_node, plan.allocation.gpus) == (1, None, 0)
    assert plan.gpu_hours_upper_bound == 0.0
    assert plan.submission.script is not None
    assert "--gres" not in plan.submission.script
    exclusive = _compile(_run(deployments=deployments), {"gpus_per_node": "auto", "gpu_request": "whole_node"})
    assert exclusive.gpu_hours_upper_bound is None


def test_a_compute_image_runs_the_supervisor_under_apptainer_and_the_client_in_it() -> None:
    record = ImageRecord(name="dd", path="/img/dd.sif", kind="sif")
    profile = {"compute_python": {"image": "dd"}, "container_runtime": "apptainer"}
    plan = _compile(_run(), profile, images=[record])
    assert plan.submission.script is not None
    assert plan.submission.script.endswith(
        "exec apptainer exec /img/dd.sif python3 -m data_designer.slurm.runtime.supervisor --plan plan.json\n"
    )
    assert plan.allocation.client.argv[0] == "python3"
    assert plan.allocation.client.image is not None
    assert plan.allocation.client.image.path == "/img/dd.sif"
    dry = _compile(_run(), profile)
    assert [(u.what, u.key_path) for u in dry.unresolved] == [("image", "compute_python.image")]
    assert dry.submission.script is None
    assert set(_problems(_run(), {**profile, "container_runtime": "pyxis"}, images=[record])) == {
        "compute_image_runtime@compute_python.image"
    }


@pytest.mark.parametrize("module", ["_compile", "_argv", "_layout", "_sbatch", "_inputs"])
def test_the_compiler_modules_import_no_clock_environment_filesystem_or_subprocess(module: str) -> None:
    import ast
    import importlib

    source = importlib.import_module(f"data_designer.slurm.planner.{module}").__file__
    assert source is not None
    with open(source, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    banned = {
        "os",
        "sys",
        "time",
        "datetime",
        "subprocess",
        "pathlib",
        "random",
        "uuid",
        "socket",
        "shutil",
        "tempfile",
    }
    assert imported & banned == set()
