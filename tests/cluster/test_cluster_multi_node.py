"""A vLLM replica over two nodes on the local Slurm cluster: ready, serving, and failing as one when a rank is killed.

The run has one ``vllm`` deployment, ``writer``, with ``tensor_parallel: 2, pipeline_parallel: 2`` on the cluster's
2-GPU nodes: one replica over two nodes. ``vllm`` on the job's ``PATH`` is the test server's vLLM stand-in
(``runtime.testing.install_vllm_stand_in``), so everything else is the real path: the planner's rank argvs, the
batch script, the supervisor's ``srun`` step (one task per node), the launcher of each task (rank 0 probes and
publishes the master port, rank 1 waits for it), ``exec vllm serve ...``, readiness, the real Data Designer client.
The stand-in's rank 0 serves only once rank 1 joined with a consistent rank set, and refuses otherwise; the ranks
keep a connection open and fail as a unit.

Two runs at once (four nodes): ``served`` generates every record through the replica; in ``killed`` the test sends
SIGKILL to rank 1 while the client is generating, and the replica (the whole step) ends, so the shard fails
``server_died`` instead of producing records.

The end-to-end helpers come from ``test_cluster_run_e2e.py`` through the ``e2e`` fixture (``conftest.py``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from data_designer.slurm.contracts.records import ATTEMPT_SCHEMA
from data_designer.slurm.runtime.store import RecordOk, read_record
from data_designer.slurm.runtime.testing import (
    EXIT_RANK_LOST,
    VLLM_STAND_IN_LOG_NAME,
    VllmStandInStart,
    install_vllm_stand_in,
    read_vllm_stand_in_log,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

CONFIG: dict[str, Any] = {
    "model_configs": [
        {"alias": "writer", "model": "e2e-writer", "provider": "local", "inference_parameters": {"max_tokens": 16}},
    ],
    "columns": [
        {
            "name": "product",
            "column_type": "sampler",
            "sampler_type": "category",
            "params": {"values": ["kettle", "lamp", "bicycle", "teapot"]},
        },
        {"name": "review", "column_type": "llm-text", "model_alias": "writer", "prompt": "Review a {{ product }}."},
    ],
}
RECORDS = {"served": 12, "killed": 400}
KNOBS = {
    "served": {},
    # Slow answers keep the client busy long enough to kill a rank in the middle of generation.
    "killed": {"DDSLURM_VLLM_STAND_IN_LATENCY_S": "0.5"},
}


def run_document(records: int) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "name": "multi-node",
        "data_designer": {"inline": CONFIG},
        "records": records,
        "sharding": {"shards": 1},
        "deployments": {
            "writer": {
                "engine": "vllm",
                "model": "/models/e2e-writer",
                "tensor_parallel": 2,
                "pipeline_parallel": 2,
                "cpus_per_replica": 1,
                "memory_gb_per_replica": 1,
                "startup_timeout_s": 120,
                "engine_args": {"max-model-len": 4096},
            }
        },
        "client": {"batch_size": 4, "cpus": 1, "memory_gb": 1, "concurrency": {"writer": 4}},
        "submission": {"time_limit": "00:10:00", "warning_lead_s": 60, "drain_grace_s": 10},
    }


def starts(directory: Path) -> list[VllmStandInStart]:
    path = directory / "stand-in" / VLLM_STAND_IN_LOG_NAME
    return read_vllm_stand_in_log(path) if path.exists() else []


def kill_rank_1_while_generating(directory: Path, deadline: float) -> int:
    """Once rank 0 answered requests (the attempt's replica is ready) and rank 1 runs, SIGKILL rank 1; its pid."""
    while time.monotonic() < deadline:
        ranks = {start.rank: start for start in starts(directory)}
        attempts = list((directory / "ws").glob("runs/*/shards/00000/attempts/0001/attempt.json"))
        found = read_record(attempts[0], ATTEMPT_SCHEMA) if attempts else None
        replicas = found.payload.replicas if isinstance(found, RecordOk) else ()
        ready = bool(replicas) and all(r.ready_at is not None for r in replicas)
        if ready and 1 in ranks:
            time.sleep(2.0)  # a few requests in flight
            os.kill(ranks[1].pid, signal.SIGKILL)
            return ranks[1].pid
        time.sleep(0.5)
    raise AssertionError(f"the replica was never ready with rank 1 running: {starts(directory)}")


def one_run(e2e: ModuleType, root: Path, name: str, local_slurm: Mapping[str, str]) -> dict[str, Any]:
    directory = root / name
    directory.mkdir(parents=True)
    bin_dir = install_vllm_stand_in(directory / "stand-in", knobs=KNOBS[name])
    base = local_slurm.get("PATH") or os.environ.get("PATH", "")
    exports = {**local_slurm, "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{base}"}
    document = run_document(RECORDS[name])
    if name == "killed":
        with ThreadPoolExecutor(max_workers=1) as pool:
            run = pool.submit(e2e.execute_and_wait, directory, exports, document, sys.executable)
            killed = kill_rank_1_while_generating(directory, time.monotonic() + 180)
            return {"run": run.result(), "starts": starts(directory), "killed": killed}
    run = e2e.execute_and_wait(directory, exports, document, sys.executable)
    return {"run": run, "starts": starts(directory)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, local_slurm: dict[str, str], e2e: ModuleType) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("multi-node")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(one_run, e2e, root, name, local_slurm) for name in RECORDS}
        return {name: future.result() for name, future in futures.items()}


def test_each_rank_ran_on_its_own_node_with_a_consistent_rank_set(runs: dict[str, Any]) -> None:
    for name, found in runs.items():
        logged: list[VllmStandInStart] = found["starts"]
        assert sorted(s.rank for s in logged if s.rank is not None) == [0, 1], (name, logged)
        head, other = sorted(logged, key=lambda s: s.rank or 0)
        assert head.args is not None
        assert other.args is not None
        assert (head.slurm_procid, other.slurm_procid) == ("0", "1"), "the step's task R runs rank R"
        assert head.slurmd_nodename != other.slurmd_nodename, "one rank per node"
        assert not head.args.headless
        assert other.args.headless
        for start in (head, other):
            assert start.args is not None
            assert (start.args.nnodes, start.args.tensor_parallel_size, start.args.pipeline_parallel_size) == (2, 2, 2)
            assert start.args.master_addr == head.args.master_addr
            assert start.args.master_port == head.args.master_port
            assert start.api_key_set, "the key reaches every rank in VLLM_API_KEY"
            assert not any("api-key" in word for word in start.argv)
        run = found["run"]
        attempt = run.attempt(0)
        (replica,) = attempt.replicas
        assert len(replica.nodes) == 2, replica
        assert [p.task for p in replica.ports] == [0, 1]
        head_port = next(p for p in replica.ports if p.task == 0)
        assert head_port.master_port == head.args.master_port, "rank 0's launcher probed the rendezvous port"
        assert replica.port == head.args.port, "the client is sent to rank 0"


def test_a_replica_over_two_nodes_serves_every_record(runs: dict[str, Any]) -> None:
    run = runs["served"]["run"]
    assert run.statuses[0].status == "succeeded", run.diagnosis()
    table = run.table(0)
    assert table.num_rows == RECORDS["served"]
    head = next(s for s in runs["served"]["starts"] if s.rank == 0)
    assert head.args is not None
    assert all(str(text).startswith("replica=") for text in table.column("review").to_pylist())


def test_killing_one_rank_fails_the_replica_as_a_unit(runs: dict[str, Any]) -> None:
    found = runs["killed"]
    run = found["run"]
    status = run.statuses.get(0)
    assert status is not None, run.diagnosis()
    assert status.status == "server_died", (status, run.diagnosis())
    attempt = run.attempt(0)
    (replica,) = attempt.replicas
    assert replica.exit_code is not None, "the whole step ended, rank 0 with it"
    log = (run.layout.attempt_dir(0, 1) / replica.log).read_text(encoding="utf-8", errors="replace")
    assert f"node rank 1 (vm, pid {found['killed']}) went away" in log.replace(os.uname().nodename, "vm"), log[-2000:]
    assert f"task 0: Exited with exit code {EXIT_RANK_LOST}" in log, "rank 0 ended on losing rank 1: " + log[-2000:]
    assert "no replica of 'writer' is left" in status.message, status.message
