"""A vLLM replica over two nodes, launched rank by rank: the step's command line as the supervisor writes it, then
each task's launcher (``SLURM_PROCID`` = its rank) run as the file ``srun`` runs, exec'ing a stand-in ``vllm`` that
prints the argv it got.

Checked: each rank execs its own argv from the plan (rank 0 serves the API, rank 1 adds ``--headless``), both carry
``--nnodes 2 --node-rank R --master-addr`` (the step's first node, as the supervisor resolved it) ``--master-port``
(the port rank 0's launcher probed and published; rank 1 waited for it); the API key is in neither. Each rank's bound
argv, with the probed ports replaced by ``<port>`` and ``<master_port>``, equals the golden file
``golden/launch/multi-node-rank-<R>.json``. Accept an intended change with ``UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts import ClusterProfile, ExecutionPlan, ReplicaPlan
from data_designer.slurm.contracts.records import PORT_SCHEMA
from data_designer.slurm.planner import SERVER_API_KEY_ENV, compile, load_run, resolve_config
from data_designer.slurm.runtime import _launch
from data_designer.slurm.runtime.store import RecordOk, read_record
from data_designer.slurm.runtime.supervisor import LAUNCHER_FILE
from data_designer.slurm.runtime.supervisor._replicas import srun_argv

GOLDEN = Path(__file__).parent / "golden" / "launch"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
MASTER_ADDR = "10.0.0.2"
FAKE_VLLM = (
    "#!{python}\nimport json, os, sys\nprint(json.dumps(dict(argv=sys.argv[1:], key=os.environ.get('VLLM_API_KEY'))))\n"
)


def multi_node_plan() -> ExecutionPlan:
    run = {
        "schema_version": 1,
        "name": "ranks",
        "data_designer": {
            "inline": {
                "model_configs": [{"alias": "big", "model": "big-70b", "provider": "local"}],
                "columns": [{"name": "q", "column_type": "llm-text", "model_alias": "big", "prompt": "Ask."}],
            }
        },
        "records": 4,
        "sharding": {"shards": 1},
        "deployments": {
            "big": {
                "engine": "vllm",
                "model": "/models/big-70b",
                "tensor_parallel": 2,
                "pipeline_parallel": 2,
                "cpus_per_replica": 2,
                "engine_args": {"max-model-len": 8192, "compilation-config": '{"mode": 3}'},
            }
        },
        "client": {"cpus": 1, "memory_gb": 1},
    }
    profile = ClusterProfile.model_validate(
        {
            "workspace_root": "/shared/ws",
            "partitions": {"gpu": "gpu", "cpu": "cpu"},
            "gpus_per_node": 2,
            "compute_python": {"interpreter": sys.executable},
        }
    )
    spec = load_run(json.dumps(run), file="run.json")
    return compile(spec, profile, cluster="golden", config=resolve_config(spec))


def the_replica() -> ReplicaPlan:
    (replica,) = multi_node_plan().allocation.replicas
    return replica


def launcher_argv(replica: ReplicaPlan, port_dir: Path) -> list[str]:
    """What the step's tasks run: the srun command line from its launcher on (``srun``'s own options dropped)."""
    argv = srun_argv(replica, python=sys.executable, port_dir=port_dir, environ={}, master_addr=MASTER_ADDR)
    start = argv.index("-m")
    assert argv[start - 1 : start + 2] == [sys.executable, "-m", _launch.__name__]
    return [sys.executable, "-I", str(LAUNCHER_FILE), *argv[start + 2 :]]


def launch_ranks(tmp_path: Path, replica: ReplicaPlan) -> list[dict[str, Any]]:
    """Start every rank's launcher at once (rank 1 must wait for rank 0's record); what each exec'd server got."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vllm = bin_dir / "vllm"
    vllm.write_text(FAKE_VLLM.format(python=sys.executable), encoding="utf-8")
    vllm.chmod(0o755)
    port_dir = tmp_path / "ports"
    command = launcher_argv(replica, port_dir)
    base = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", SERVER_API_KEY_ENV: "s3cret-k3y"}
    results: dict[int, subprocess.CompletedProcess[str]] = {}

    def run(rank: int) -> None:
        env = {**base, "SLURM_PROCID": str(rank)}
        results[rank] = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)

    threads = [threading.Thread(target=run, args=(rank,)) for rank in reversed(range(replica.ranks))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out = []
    for rank in range(replica.ranks):
        done = results[rank]
        assert done.returncode == 0, done.stderr
        record = read_record(port_dir / _launch.port_record_name("big", 0, rank), PORT_SCHEMA)
        assert isinstance(record, RecordOk), record
        out.append({"server": json.loads(done.stdout), "record": record.payload})
    return out


def test_each_rank_execs_its_own_argv_with_the_head_s_address_and_port(tmp_path: Path) -> None:
    replica = the_replica()
    assert (replica.node_indices, replica.ranks, replica.bind) == ((0, 1), 2, "all")
    launched = launch_ranks(tmp_path, replica)
    head = launched[0]["record"]
    assert head.master_port is not None
    assert head.master_port != head.port
    for rank, found in enumerate(launched):
        argv = found["server"]["argv"]
        record = found["record"]
        assert record.master_port == head.master_port, "every rank rendezvouses at rank 0's port"
        assert found["server"]["key"] == "s3cret-k3y", "the key reaches vLLM in VLLM_API_KEY"
        assert not any("s3cret" in word for word in argv)
        assert argv[argv.index("--nnodes") + 1 : argv.index("--nnodes") + 2] == ["2"]
        assert argv[argv.index("--node-rank") + 1] == str(rank)
        assert argv[argv.index("--master-addr") + 1] == MASTER_ADDR
        assert argv[argv.index("--master-port") + 1] == str(head.master_port)
        assert argv[argv.index("--port") + 1] == str(record.port)
        assert ("--headless" in argv) == (rank > 0)
        placeholders = {str(record.port): "<port>", str(head.master_port): "<master_port>"}
        check_golden(f"multi-node-rank-{rank}", ["vllm", *(placeholders.get(word, word) for word in argv)])


def test_a_rank_whose_head_never_publishes_gives_up_and_says_why(tmp_path: Path) -> None:
    replica = the_replica().model_copy(update={"startup_timeout_s": 1})
    command = launcher_argv(replica, tmp_path / "ports")
    env = {**os.environ, "SLURM_PROCID": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == _launch.EXIT_LAUNCH_FAILED
    assert "rank 0 published no master port" in done.stderr


def test_a_task_beyond_the_ranks_fails_its_launch(tmp_path: Path) -> None:
    command = launcher_argv(the_replica(), tmp_path / "ports")
    done = subprocess.run(command, env={**os.environ, "SLURM_PROCID": "2"}, capture_output=True, text=True, timeout=60)
    assert done.returncode == _launch.EXIT_LAUNCH_FAILED
    assert "task 2 has no rank template (2 ranks)" in done.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--", "vllm"], "not both"),
        (["--master-addr", ""], None),
    ],
)
def test_rank_templates_are_checked(tmp_path: Path, extra: list[str], message: str | None) -> None:
    templates = json.dumps([["vllm", "{master_addr}"], ["vllm", "--headless"]])
    argv = ["--port-dir", str(tmp_path), "--alias", "a", "--replica", "0", "--bind-host", "127.0.0.1"]
    argv += ["--rank-templates", templates]
    if message is None:
        with pytest.raises(ValueError, match="needs --master-addr"):
            _launch.launch(argv, {"SLURM_PROCID": "0"})
        return
    with pytest.raises(ValueError, match=message):
        _launch.launch([*argv, "--master-addr", "h", *extra], {"SLURM_PROCID": "0"})


def check_golden(name: str, argv: list[str]) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(argv, indent=2) + "\n"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"{path.name} is missing; accept it with UPDATE_GOLDEN=1"
    assert path.read_text(encoding="utf-8") == text, f"{path.name} changed; if intended, accept with UPDATE_GOLDEN=1"
