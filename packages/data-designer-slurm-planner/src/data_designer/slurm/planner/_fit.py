"""Does a compiled plan fit the cluster? A pure check of a plan against the facts Slurm gave (no I/O).

``check_fit(plan, facts)`` returns one :class:`Problem` per violation, each naming the run-file key
that sets the value, the value, the cluster's limit and a fix; no facts (an offline dry run) means
no problems. What it checks, on the plan's partition:

- the partition exists;
- the time limit against the partition's MaxTime (``submission.time_limit``);
- the nodes of one allocation against the partition's nodes;
- per node, the CPUs (``--cpus-per-task``: the client's on node 0 plus the replicas' placed on a node),
  the memory (``--mem``: the client's on node 0 plus the replicas') and the GPUs (the replicas' GPUs
  on a node, against the GRES) against the largest node of the partition, the key named being the
  largest contributor on the node that needs the most;
- when each of these fits some node, that enough nodes offer all of them together.

Every node of an allocation asks for the same CPUs, memory and GPUs (sbatch's per-node options), so
each node must offer the most any one node needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from data_designer.slurm.contracts import (
    ClusterFacts,
    ExecutionPlan,
    KeyPath,
    NodeShape,
    PartitionFacts,
    Problem,
    VllmDeployment,
    format_key_path,
    format_time_limit,
)

_LARGER_NODES = "or use a partition with larger nodes (submission.partition)"


@dataclass(frozen=True)
class _Part:
    """One term of a per-node sum: the key that sets it, its authored value, how many times it counts, its amount."""

    key: KeyPath
    value: int
    times: int
    amount: int

    @property
    def total(self) -> int:
        return self.times * self.amount

    def render(self, unit: str) -> str:
        each = f"{self.value}" if self.value == self.amount else f"{self.value} ({self.amount}{unit})"
        key = format_key_path(self.key)
        return f"{key} {each}" if self.times == 1 else f"{self.times} x {key} {each}"


def check_fit(plan: ExecutionPlan, facts: ClusterFacts) -> list[Problem]:
    """Every way ``plan`` asks for more than the partition it names offers (empty when ``facts`` has no partitions)."""
    if not facts.partitions:
        return []
    allocation = plan.allocation
    partition = facts.partition(allocation.partition)
    if partition is None:
        names = ", ".join(p.name for p in facts.partitions)
        return [
            Problem(
                code="cluster_partition",
                key_path=("submission", "partition"),
                message=f"partition {allocation.partition!r} is not one of the cluster's partitions ({names})",
                hint="set submission.partition (or the profile's partitions.gpu) to one of: " + names,
            )
        ]
    problems: list[Problem] = []
    where = f"partition {partition.name!r}"
    if partition.max_time_s is not None and allocation.time_limit_s > partition.max_time_s:
        problems.append(
            Problem(
                code="cluster_time_limit",
                key_path=("submission", "time_limit"),
                message=f"time limit {allocation.time_limit} is above the MaxTime of {where} "
                f"({format_time_limit(partition.max_time_s)}): Slurm would keep the jobs pending forever",
                hint=f"set submission.time_limit (or the profile's default_time_limit) to at most "
                f"{format_time_limit(partition.max_time_s)}, or use a partition with a longer MaxTime",
            )
        )
    nodes = allocation.nodes
    if nodes is None or allocation.cpus_per_node is None:
        return problems  # unresolved: refused before this check
    if nodes > partition.nodes:
        problems.append(_nodes_problem(plan, partition, nodes))
    per_node = _per_node(plan, nodes)
    shape_problems = [p for p in (_dimension(per_node, kind, partition) for kind in _NOUNS) if p is not None]
    problems.extend(shape_problems)
    if not shape_problems and nodes <= partition.nodes:
        need = {kind: max(sum(p.total for p in node[kind]) for node in per_node) for kind in ("cpus", "memory", "gpus")}
        fitting = partition.nodes_fitting(cpus=need["cpus"], memory_mb=need["memory"], gpus=need["gpus"])
        if fitting < nodes and _known_gpus(partition, need["gpus"]):
            problems.append(
                Problem(
                    code="cluster_node_shape",
                    key_path=("submission", "partition"),
                    message=f"an allocation needs {nodes} node(s) with {need['cpus']} CPUs, {need['memory']} MB and "
                    f"{need['gpus']} GPUs each; {where} has {fitting} such node(s)",
                    hint=f"ask less per node (client, deployments), {_LARGER_NODES}",
                )
            )
    return problems


def _per_node(plan: ExecutionPlan, nodes: int) -> list[dict[str, list[_Part]]]:
    """Per node of the allocation, the terms of its CPUs, memory and GPUs."""
    allocation, run = plan.allocation, plan.run
    client = allocation.client
    table: list[dict[str, list[_Part]]] = [{"cpus": [], "memory": [], "gpus": []} for _ in range(nodes)]
    table[0]["cpus"].append(_Part(("client", "cpus"), client.cpus, 1, client.cpus))
    table[0]["memory"].append(_Part(("client", "memory_gb"), client.memory_gb, 1, client.memory_mb))
    for replica in allocation.replicas:
        deployment = run.deployments.get(replica.alias)
        gpu_key = "tensor_parallel" if isinstance(deployment, VllmDeployment) else "gpus_per_replica"
        gpu_value = deployment.tensor_parallel if isinstance(deployment, VllmDeployment) else replica.gpus
        memory_gb = deployment.memory_gb_per_replica if deployment is not None else replica.memory_mb // 1000
        prefix = ("deployments", replica.alias)
        for node in replica.node_indices or ():
            if node >= nodes:
                continue
            _add(table[node]["cpus"], _Part((*prefix, "cpus_per_replica"), replica.cpus, 1, replica.cpus))
            _add(table[node]["memory"], _Part((*prefix, "memory_gb_per_replica"), memory_gb, 1, replica.memory_mb))
            if replica.gpus_per_node:
                _add(table[node]["gpus"], _Part((*prefix, gpu_key), gpu_value, 1, replica.gpus_per_node))
    return table


def _add(parts: list[_Part], part: _Part) -> None:
    for i, existing in enumerate(parts):
        if existing.key == part.key and existing.amount == part.amount:
            parts[i] = _Part(existing.key, existing.value, existing.times + 1, existing.amount)
            return
    parts.append(part)


_NOUNS = {"cpus": "CPUs", "memory": "MB", "gpus": "GPUs"}


def _dimension(per_node: Sequence[dict[str, list[_Part]]], kind: str, partition: PartitionFacts) -> Problem | None:
    """The problem of the node that needs the most of ``kind``, when no node of the partition offers that much."""
    totals = [sum(p.total for p in node[kind]) for node in per_node]
    need = max(totals)
    known = [offer for offer in (_offer(shape, kind) for shape in partition.shapes) if offer is not None]
    if need == 0 or not known:
        return None  # nothing asked, or nothing readable (an unreadable GRES: gpus_per_node resolution says so)
    limit = max(known)
    if need <= limit:
        return None
    node = totals.index(need)
    parts = per_node[node][kind]
    culprit = max(parts, key=lambda p: (p.total, p.key[0] == "client"))
    noun = _NOUNS[kind]
    terms = " + ".join(p.render(f" {noun}") for p in parts)
    on = "node 0, with the client" if node == 0 else f"node {node}"
    return Problem(
        code=f"cluster_{kind}",
        key_path=culprit.key,
        message=f"{terms} = {need} {noun} per node ({on}); the nodes of partition {partition.name!r} have at most "
        f"{limit} {noun}",
        hint=_fix(culprit, need, limit, kind),
    )


def _offer(shape: NodeShape, kind: str) -> int | None:
    return shape.cpus if kind == "cpus" else shape.memory_mb if kind == "memory" else shape.gpus


def _fix(culprit: _Part, need: int, limit: int, kind: str) -> str:
    """Lower the culprit by what is too much, when that leaves it positive; else only other ways."""
    excess = need - limit
    if kind == "memory":
        # Whole GB of 1000 MB: the largest value whose MB still fit.
        allowed = (culprit.total - excess) // culprit.times // 1000
    else:
        allowed = (culprit.total - excess) // culprit.times
    if kind == "gpus":
        return (
            f"use at most {limit} GPUs per replica on one node (set {format_key_path(culprit.key)} to at most {max(limit, 1)}, or to a "
            f"multiple of {limit} to span nodes), set the profile's gpus_per_node to {limit}, {_LARGER_NODES}"
        )
    if allowed >= 1:
        return f"set {format_key_path(culprit.key)} to at most {allowed}, {_LARGER_NODES}"
    return f"ask for less per node (client, deployments), {_LARGER_NODES}"


def _known_gpus(partition: PartitionFacts, gpus: int) -> bool:
    return gpus == 0 or all(shape.gpus is not None for shape in partition.shapes)


def _nodes_problem(plan: ExecutionPlan, partition: PartitionFacts, nodes: int) -> Problem:
    last = max(plan.allocation.replicas, key=lambda r: max(r.node_indices or (0,)), default=None)
    key: KeyPath = ("deployments",) if last is None else ("deployments", last.alias, "replicas")
    return Problem(
        code="cluster_nodes",
        key_path=key,
        message=f"an allocation needs {nodes} nodes; partition {partition.name!r} has {partition.nodes}",
        hint="deploy fewer replicas or fewer GPUs per replica (each allocation holds all of them), "
        "or use a larger partition (submission.partition)",
    )
