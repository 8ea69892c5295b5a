"""check_fit(): a compiled plan against given partition facts; each violation names the key, the value and the limit."""

from __future__ import annotations

import json
from typing import Any

from data_designer.slurm.contracts import (
    ClusterFacts,
    ClusterProfile,
    ExecutionPlan,
    NodeShape,
    PartitionFacts,
    format_key_path,
)
from data_designer.slurm.planner import check_fit, compile
from data_designer.slurm.planner._inputs import load_run, resolve_config

CONFIG: dict[str, Any] = {
    "model_configs": [{"alias": "writer", "model": "test-model", "provider": "local"}],
    "columns": [{"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "x"}],
}
PROFILE: dict[str, Any] = {
    "workspace_root": "/ws",
    "partitions": {"gpu": "gpu", "cpu": "cpu"},
    "gpus_per_node": 2,
    "compute_python": {"interpreter": "/venv/bin/python"},
    "default_time_limit": "01:00:00",
}


def _run(*, client: dict[str, Any] | None = None, writer: dict[str, Any] | None = None, **changes: Any) -> str:
    deployment = {"engine": "command", "argv": ["srv", "{port}"], "model": "test-model", "gpus_per_replica": 1}
    run: dict[str, Any] = {
        "schema_version": 1,
        "name": "r",
        "data_designer": {"inline": CONFIG},
        "records": 10,
        "sharding": {"shards": 1},
        "deployments": {"writer": {**deployment, **(writer or {})}},
        "client": {"cpus": 1, "memory_gb": 1, **(client or {})},
    }
    run.update(changes)
    return json.dumps(run)


def _plan(run: str, **profile: Any) -> ExecutionPlan:
    spec = load_run(run, file="run.json")
    cluster = ClusterProfile.model_validate({**PROFILE, **profile})
    return compile(spec, cluster, cluster="c", config=resolve_config(spec), facts=ClusterFacts(gpus_per_node=2))


def _facts(
    *, cpus: int = 4, memory_mb: int = 4000, gpus: int | None = 2, nodes: int = 4, max_time: str | None = None
) -> ClusterFacts:
    shape = NodeShape(
        cpus=cpus, memory_mb=memory_mb, gpus=gpus, gres=None if gpus is None else f"gpu:{gpus}", nodes=nodes
    )
    seconds = None if max_time is None else {"00:30:00": 1800}[max_time]
    partitions = (
        PartitionFacts(name="cpu", default=True, nodes=nodes, shapes=(shape,)),
        PartitionFacts(name="gpu", nodes=nodes, shapes=(shape,), max_time_s=seconds, max_time=max_time or "infinite"),
    )
    return ClusterFacts(gpus_per_node=2, max_array_size=11, partitions=partitions)


def _one(plan: ExecutionPlan, facts: ClusterFacts) -> tuple[str, str | None, str, str | None]:
    (problem,) = check_fit(plan, facts)
    return problem.code, format_key_path(problem.key_path or ()), problem.message, problem.hint


def test_a_plan_that_fits_has_no_problems_and_no_facts_mean_no_check() -> None:
    plan = _plan(_run())
    assert check_fit(plan, _facts()) == []
    assert check_fit(_plan(_run(client={"cpus": 64, "memory_gb": 500})), ClusterFacts()) == []


def test_the_default_client_cpus_with_a_co_located_replica_are_too_many_for_4_cpu_nodes() -> None:
    code, key, message, hint = _one(_plan(_run(client={"cpus": 4})), _facts())
    assert (code, key) == ("cluster_cpus", "client.cpus")
    assert message == (
        "client.cpus 4 + deployments.writer.cpus_per_replica 1 = 5 CPUs per node (node 0, with the client); "
        "the nodes of partition 'gpu' have at most 4 CPUs"
    )
    assert hint is not None
    assert hint.startswith("set client.cpus to at most 3, ")


def test_client_memory_above_the_node_memory_names_the_key_the_mb_and_the_limit() -> None:
    code, key, message, hint = _one(_plan(_run(client={"memory_gb": 16})), _facts())
    assert (code, key) == ("cluster_memory", "client.memory_gb")
    assert "client.memory_gb 16 (16000 MB)" in message
    assert "= 17000 MB per node" in message  # the replica's default 1 GB on the same node counts too
    assert message.endswith("the nodes of partition 'gpu' have at most 4000 MB")
    assert hint is not None
    assert hint.startswith("set client.memory_gb to at most 3, ")


def test_gpus_per_replica_above_the_nodes_gres_names_the_deployment_key() -> None:
    plan = _plan(_run(writer={"gpus_per_replica": 3}), gpus_per_node=4)  # the profile says 4, the nodes have 2
    code, key, message, hint = _one(plan, _facts())
    assert (code, key) == ("cluster_gpus", "deployments.writer.gpus_per_replica")
    assert message.startswith("deployments.writer.gpus_per_replica 3 = 3 GPUs per node")
    assert message.endswith("at most 2 GPUs")
    assert hint is not None
    assert "gpus_per_node to 2" in hint


def test_a_time_limit_above_max_time_names_submission_time_limit() -> None:
    plan = _plan(_run(submission={"time_limit": "01:00:00"}))
    code, key, message, hint = _one(plan, _facts(max_time="00:30:00"))
    assert (code, key) == ("cluster_time_limit", "submission.time_limit")
    assert "01:00:00" in message
    assert "MaxTime of partition 'gpu' (00:30:00)" in message
    assert hint is not None
    assert "at most 00:30:00" in hint


def test_more_nodes_than_the_partition_has_names_the_replicas() -> None:
    plan = _plan(_run(writer={"replicas": 3, "gpus_per_replica": 2}))  # 3 nodes of 2 GPUs
    code, key, message, _ = _one(plan, _facts(nodes=2))
    assert (code, key) == ("cluster_nodes", "deployments.writer.replicas")
    assert message == "an allocation needs 3 nodes; partition 'gpu' has 2"


def test_an_unknown_partition_is_one_problem_listing_the_partitions() -> None:
    plan = _plan(_run(submission={"partition": "big"}))
    code, key, message, _ = _one(plan, _facts())
    assert (code, key) == ("cluster_partition", "submission.partition")
    assert message == "partition 'big' is not one of the cluster's partitions (cpu, gpu)"


def test_every_violation_is_its_own_problem() -> None:
    plan = _plan(_run(client={"cpus": 8, "memory_gb": 16}, submission={"time_limit": "02:00:00"}))
    codes = {(p.code, p.key_path) for p in check_fit(plan, _facts(max_time="00:30:00"))}
    assert codes == {
        ("cluster_time_limit", ("submission", "time_limit")),
        ("cluster_cpus", ("client", "cpus")),
        ("cluster_memory", ("client", "memory_gb")),
    }


def test_no_node_with_every_resource_at_once_is_a_shape_problem() -> None:
    many_cpus = NodeShape(cpus=16, memory_mb=1000, gpus=2, nodes=2)
    much_memory = NodeShape(cpus=2, memory_mb=64000, gpus=2, nodes=2)
    facts = ClusterFacts(partitions=(PartitionFacts(name="gpu", nodes=4, shapes=(many_cpus, much_memory)),))
    code, key, message, _ = _one(_plan(_run(client={"cpus": 4, "memory_gb": 8})), facts)
    assert (code, key) == ("cluster_node_shape", "submission.partition")
    assert (
        message
        == "an allocation needs 1 node(s) with 5 CPUs, 9000 MB and 1 GPUs each; partition 'gpu' has 0 such node(s)"
    )


def test_an_unreadable_gres_is_not_read_as_zero_gpus() -> None:
    assert check_fit(_plan(_run()), _facts(gpus=None)) == []
