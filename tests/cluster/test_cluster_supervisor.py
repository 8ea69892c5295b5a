"""The allocation supervisor on the real local Slurm cluster: real sbatch of a compiled plan, real srun steps.

Each run is a plan compiled for the local cluster (``gpu`` partition, 2 fake GPUs per node) with the
in-tree test server as a ``command`` deployment of two one-GPU replicas on one node and the stand-in client
worker (``runtime.testing.stand_in_worker``) that calls each endpoint once. Every node is 127.0.0.1, so the servers of concurrent shards share
one address space of ports: probed ports must not collide.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from pydantic import BaseModel

from data_designer.slurm.contracts import ClusterProfile, ExecutionPlan, SubmissionBinding
from data_designer.slurm.contracts.records import (
    ATTEMPT_SCHEMA,
    STATUS_SCHEMA,
    AttemptRecord,
    RecordSchema,
    StatusRecord,
)
from data_designer.slurm.planner import bind_submission, compile, load_run, resolve_config
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.testing import (
    processes_mentioning,
    run_logs,
    stand_in_argv,
    wait_for_record,
    with_client_argv,
    writer_run,
)

pytestmark = pytest.mark.cluster

M = TypeVar("M", bound=BaseModel)


@dataclass
class SubmittedRun:
    layout: RunLayout
    job_id: str
    submitted_at: float

    def wait_for_status(self, shard: int, timeout_s: float) -> tuple[StatusRecord, float]:
        """The shard's final status and how long after submission it appeared."""
        path = self.layout.status(shard, 1)
        status = wait_for_record(path, STATUS_SCHEMA, timeout_s=timeout_s, poll_s=0.1, describe=self.diagnosis)
        return status, time.monotonic() - self.submitted_at

    def read(self, path: Path, schema: RecordSchema[M]) -> M:
        result = read_record(path, schema)
        assert isinstance(result, RecordOk), (path, result)
        return result.payload

    def attempt(self, shard: int) -> AttemptRecord:
        return self.read(self.layout.attempt_record(shard, 1), ATTEMPT_SCHEMA)

    def diagnosis(self) -> str:
        return run_logs(self.layout)


def compile_plan(
    tmp_path: Path,
    local_slurm: Mapping[str, str],
    *,
    shards: int,
    server_flags: tuple[str, ...] = (),
    replicas: int = 2,
    gpus_per_replica: int = 1,
) -> ExecutionPlan:
    flags = ("--request-log", f"{tmp_path}/requests-{{port}}.jsonl", *server_flags)
    run = writer_run(
        "svc",
        server_flags=flags,
        records=2 * shards,
        shards=shards,
        replicas=replicas,
        gpus_per_replica=gpus_per_replica,
        startup_timeout_s=600,
        submission={"warning_lead_s": 60, "drain_grace_s": 30},
    )
    profile = ClusterProfile.model_validate(
        {
            "workspace_root": str(tmp_path / "ws"),
            "account": local_slurm["DDSLURM_ACCOUNT"],
            "partitions": {"gpu": local_slurm["DDSLURM_GPU_PARTITION"], "cpu": local_slurm["DDSLURM_CPU_PARTITION"]},
            "gpus_per_node": int(local_slurm["DDSLURM_GPUS_PER_NODE"]),
            "compute_python": {"interpreter": sys.executable},
            "default_time_limit": "00:15:00",
        }
    )
    spec = load_run(json.dumps(run), file="run.json")
    plan = compile(spec, profile, cluster=local_slurm["DDSLURM_CLUSTER"], config=resolve_config(spec))
    return with_client_argv(plan, stand_in_argv())


def submit(tmp_path: Path, local_slurm: Mapping[str, str], plan: ExecutionPlan) -> SubmittedRun:
    run_id = f"svc-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"
    layout = RunLayout.of(tmp_path / "ws", run_id)
    layout.run_dir.mkdir(parents=True)
    layout.plan_record.write_text(plan.model_dump_json())
    unit = bind_submission(plan, SubmissionBinding(run_id=run_id, run_dir=str(layout.run_dir), job_name_prefix=run_id))
    runner = SubprocessRunner(overrides={k: v for k, v in local_slurm.items() if k in ("SLURM_CONF", "PATH")})
    started = time.monotonic()
    result = SlurmScheduler(runner).submit(unit, since=datetime.now(UTC) - timedelta(minutes=5))
    return SubmittedRun(layout, result.chunks[0].job_id, started)


def assert_nothing_left(run: SubmittedRun, local_slurm: Mapping[str, str], mention: str) -> None:
    runner = SubprocessRunner(overrides={k: v for k, v in local_slurm.items() if k in ("SLURM_CONF", "PATH")})
    deadline = time.monotonic() + 60
    while True:
        queue = runner.run(["squeue", "--noheader", "-j", run.job_id, "-o", "%i %T"], timeout_s=30)
        if queue.ok and not queue.stdout.strip():
            break
        assert time.monotonic() < deadline, queue.stdout
        time.sleep(0.5)
    deadline = time.monotonic() + 10
    while left := processes_mentioning(mention):
        assert time.monotonic() < deadline, f"processes left behind: {left}"
        time.sleep(0.2)


def test_two_shards_each_with_two_replicas_on_disjoint_gpus_succeed_without_port_collisions(
    tmp_path: Path, local_slurm: dict[str, str]
) -> None:
    run = submit(tmp_path, local_slurm, compile_plan(tmp_path, local_slurm, shards=2))
    statuses = [run.wait_for_status(shard, timeout_s=120) for shard in (0, 1)]
    assert_nothing_left(run, local_slurm, str(tmp_path))

    assert [s.status for s, _ in statuses] == ["succeeded", "succeeded"], run.diagnosis()
    all_ports: list[int] = []
    for shard in (0, 1):
        attempt = run.attempt(shard)
        assert len(attempt.replicas) == 2
        steps = [replica.ports[0] for replica in attempt.replicas]
        # Two steps on one node, each with its own Slurm-assigned GPU.
        assert len({step.node for step in steps}) == 1
        gpus = [step.step_gpus for step in steps]
        assert None not in gpus
        assert len(set(gpus)) == 2, gpus
        assert len({step.cuda_visible_devices for step in steps}) == 2
        ports = [replica.port for replica in attempt.replicas]
        assert None not in ports
        all_ports += [p for p in ports if p is not None]
        answers = json.loads((run.layout.attempt_dir(shard, 1) / "stand-in-answers.json").read_text())
        assert answers["argv"] == ["--shard", str(shard), "--attempt", "1"]
        assert sorted(a["text"].split()[0] for a in answers["answers"]) == sorted(f"replica=writer-{p}" for p in ports)
        startups = [replica.startup_s for replica in attempt.replicas]
        print(f"shard {shard}: nodes {attempt.nodes}, GPUs {gpus}, ports {ports}, startup {startups}")
    assert len(set(all_ports)) == 4, f"servers of concurrent shards collided on ports: {all_ports}"
    for port in all_ports:
        assert (tmp_path / f"requests-{port}.jsonl").read_text().count("/v1/chat/completions") == 1


def test_a_server_crashing_at_start_is_classified_within_30_seconds(
    tmp_path: Path, local_slurm: dict[str, str]
) -> None:
    plan = compile_plan(tmp_path, local_slurm, shards=1, server_flags=("--crash-at-start",))
    assert plan.allocation.replicas[0].startup_timeout_s == 600
    run = submit(tmp_path, local_slurm, plan)
    status, elapsed = run.wait_for_status(0, timeout_s=60)
    assert_nothing_left(run, local_slurm, str(tmp_path))

    print(f"crash at start classified {elapsed:.1f}s after submission")
    assert status.status == "server_failed_to_start", run.diagnosis()
    assert any("simulated crash at start" in line for line in status.log_tail), status
    assert elapsed < 30
    assert not (run.layout.attempt_dir(0, 1) / "stand-in-answers.json").exists()


def test_a_strict_server_serving_another_model_name_fails_to_start_naming_both_names(
    tmp_path: Path, local_slurm: dict[str, str]
) -> None:
    # The test server serves its last --model: 'other-model', where the client would ask for 'writer'.
    plan = compile_plan(tmp_path, local_slurm, shards=1, replicas=1, server_flags=("--model", "other-model"))
    run = submit(tmp_path, local_slurm, plan)
    status, elapsed = run.wait_for_status(0, timeout_s=120)
    assert_nothing_left(run, local_slurm, str(tmp_path))

    print(f"model name mismatch classified {elapsed:.1f}s after submission (startup budget 600 s)")
    assert status.status == "server_failed_to_start", run.diagnosis()
    assert "server writer-r0 serves 'other-model' but the client will ask for 'writer'" in status.message, status
    assert not (run.layout.attempt_dir(0, 1) / "stand-in-answers.json").exists()


def test_a_replica_spanning_two_nodes_probes_a_port_on_each_and_serves_with_the_attempt_key(
    tmp_path: Path, local_slurm: dict[str, str]
) -> None:
    plan = compile_plan(
        tmp_path, local_slurm, shards=1, replicas=1, gpus_per_replica=4, server_flags=("--api-key-env", "{api_key_env}")
    )
    (replica,) = plan.allocation.replicas
    assert (replica.node_indices, replica.bind, replica.requires_api_key) == ((0, 1), "all", True)
    run = submit(tmp_path, local_slurm, plan)
    status, _ = run.wait_for_status(0, timeout_s=120)
    assert_nothing_left(run, local_slurm, str(tmp_path))

    assert status.status == "succeeded", run.diagnosis()
    (started,) = run.attempt(0).replicas
    assert [(p.task, p.node, p.bind_host) for p in started.ports] == [(0, "node1", "0.0.0.0"), (1, "node2", "0.0.0.0")]
    assert len({p.port for p in started.ports}) == 2, "the tasks on both nodes (one address here) got distinct ports"
    assert started.base_url == f"http://127.0.0.1:{started.ports[0].port}/v1"
    answers = json.loads((run.layout.attempt_dir(0, 1) / "stand-in-answers.json").read_text())
    assert [a["text"].split()[0] for a in answers["answers"]] == [f"replica=writer-{started.port}"]


def sacct_rows(local_slurm: Mapping[str, str], job_id: str, *, names: set[str]) -> dict[str, tuple[str, str]]:
    """``JobName -> (ReqMem, AllocTRES)`` of a job's rows, waiting until every one of ``names`` has one."""
    runner = SubprocessRunner(overrides={k: v for k, v in local_slurm.items() if k in ("SLURM_CONF", "PATH")})
    argv = ["sacct", "-j", job_id, "-o", "JobName,ReqMem,AllocTRES", "-P", "-n"]
    deadline = time.monotonic() + 30
    while True:
        result = runner.run(argv, timeout_s=30)
        rows = {name: (mem, tres) for name, mem, tres in (line.split("|") for line in result.stdout.splitlines())}
        if names <= set(rows):
            return rows
        assert time.monotonic() < deadline, result.stdout
        time.sleep(0.5)


def test_the_client_s_memory_reaches_the_allocation_and_each_step_takes_only_its_own(
    tmp_path: Path, local_slurm: dict[str, str]
) -> None:
    plan = compile_plan(tmp_path, local_slurm, shards=1)  # client.memory_gb: 1, two 1 GB replicas on node 0
    assert (plan.allocation.client.memory_mb, plan.allocation.memory_mb_per_node) == (1_000, 3_000)
    assert plan.submission.script is not None
    assert "#SBATCH --mem=3000\n" in plan.submission.script
    run = submit(tmp_path, local_slurm, plan)
    status, _ = run.wait_for_status(0, timeout_s=120)
    assert_nothing_left(run, local_slurm, str(tmp_path))

    # Both replicas had to be ready at once: a step asking for all of the job's memory would have blocked the other.
    assert status.status == "succeeded", run.diagnosis()
    name = f"{run.layout.run_id}-c0"  # sacct may first show a placeholder row: wait for the job's own
    rows = sacct_rows(local_slurm, run.job_id, names={name, "writer-r0", "writer-r1"})
    job = rows[name]
    assert job[0] == "3000M", rows  # ReqMem: --mem per node, as planned
    assert "mem=3000M" in job[1], rows
    for step in ("writer-r0", "writer-r1"):
        assert "mem=1000M" in rows[step][1].split(","), rows
