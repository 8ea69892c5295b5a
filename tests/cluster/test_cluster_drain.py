"""One shard's allocation under failure on the real local Slurm cluster: a dying replica, the time-limit warning,
a requeue and a real time limit, each with the real Data Designer client worker and the in-tree test server.

Every run is one shard submitted with ``data-designer slurm execute``; the writer alias has two replicas (one
fake GPU each), the critic one. Servers are slowed with ``--latency-s`` so that a signal lands mid-generation,
and each test gives its servers a model name of its own, so "no server process left" looks only at its own.
A retry is submitted as the future ``retry`` command will: ``planner.bind_retry`` (``DDSLURM_ATTEMPT=next``).
"""

from __future__ import annotations

import importlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pyarrow as pa
import pytest
from pydantic import BaseModel

from data_designer.slurm.contracts import TERMINAL_TASK_STATES, ExecuteResult, ExecutionPlan, SubmissionBinding
from data_designer.slurm.contracts.records import (
    ATTEMPT_SCHEMA,
    INDEX_COLUMN,
    MANIFEST_SCHEMA,
    PROGRESS_SCHEMA,
    STATUS_SCHEMA,
    AttemptRecord,
    OutputManifest,
    RecordSchema,
    StatusRecord,
)
from data_designer.slurm.planner import bind_retry, missing_ranges
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record, shard_coverage
from data_designer.slurm.runtime.testing import TEST_SERVER_MODULE, command_lines, run_logs, wait_for_record

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

M = TypeVar("M", bound=BaseModel)
pq: Any = importlib.import_module("pyarrow.parquet")  # pyarrow.parquet has no type hints
WAIT_S = 300.0


@dataclass
class Submitted:
    """A one-shard run submitted through the CLI, and how to follow it."""

    layout: RunLayout
    result: ExecuteResult
    slurm_env: dict[str, str]
    """What the Slurm commands need from the environment (the local cluster's ``SLURM_CONF``, ``PATH``)."""
    models: tuple[str, ...]
    scheduler: SlurmScheduler = field(init=False)

    def __post_init__(self) -> None:
        self.scheduler = SlurmScheduler(SubprocessRunner(overrides=self.slurm_env))

    def slurm(self, *argv: str) -> None:
        """Run one Slurm command against the local cluster; it must succeed."""
        env = {**os.environ, **self.slurm_env}
        done = subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"{argv}: {done.stderr}"

    @property
    def job_ids(self) -> list[str]:
        return [job.job_id for job in self.result.jobs]

    def wait(self, path: Path, schema: RecordSchema[M], timeout_s: float = WAIT_S) -> M:
        return wait_for_record(path, schema, timeout_s=timeout_s, poll_s=0.2, describe=self.diagnosis)

    def status(self, attempt: int, timeout_s: float = WAIT_S) -> StatusRecord:
        return self.wait(self.layout.status(0, attempt), STATUS_SCHEMA, timeout_s)

    def manifest(self, attempt: int) -> OutputManifest:
        return self.wait(self.layout.output_manifest(0, attempt), MANIFEST_SCHEMA, 10)

    def attempt(self, attempt: int) -> AttemptRecord:
        return self.wait(self.layout.attempt_record(0, attempt), ATTEMPT_SCHEMA, 10)

    def table(self, attempt: int) -> pa.Table:
        manifest = self.manifest(attempt)
        output = self.layout.output_dir(0, attempt)
        tables = [pq.read_table(output / part.path) for part in manifest.parts]
        return pa.concat_tables(tables).sort_by(INDEX_COLUMN) if tables else pa.table({INDEX_COLUMN: []})

    def wait_for_records(self, attempt: int, at_least: int) -> None:
        wait_for_record(
            self.layout.progress(0, attempt),
            PROGRESS_SCHEMA,
            timeout_s=WAIT_S,
            accept=lambda progress: progress.records_done >= at_least,
            poll_s=0.1,
            describe=self.diagnosis,
        )

    def wait_until_jobs_end(self, job_ids: list[str]) -> None:
        deadline = time.monotonic() + WAIT_S
        while True:
            tasks = self.scheduler.observe(job_ids).tasks
            if tasks and all(task.state in TERMINAL_TASK_STATES for task in tasks):
                return
            assert time.monotonic() < deadline, f"jobs {job_ids} still running: {tasks}"
            time.sleep(1)

    def servers_left(self) -> list[str]:
        """Command lines of this run's test servers still alive (every node of the local cluster is this host)."""
        module = TEST_SERVER_MODULE
        return [
            " ".join(argv)
            for argv in command_lines().values()
            if module in argv and any(model in argv for model in self.models)
        ]

    def wait_for_no_servers(self) -> None:
        deadline = time.monotonic() + 30
        while self.servers_left():
            assert time.monotonic() < deadline, f"server processes left behind: {self.servers_left()}"
            time.sleep(0.5)

    def diagnosis(self) -> str:
        return run_logs(self.layout)

    def cancel(self) -> None:
        self.scheduler.cancel(self.job_ids, confirm_timeout_s=60)


def run_document(
    e2e: ModuleType, *, records: int, writer: tuple[str, ...], token: str, **submission: Any
) -> dict[str, Any]:
    """One shard; writer (2 replicas, ``writer`` flags) and critic (1 replica), models named with ``token``."""
    deployments = {
        "writer": e2e.server("writer", replicas=2, gpus=1, flags=("--latency-s", "0.25", *writer)),
        "critic": e2e.server("critic", replicas=1, gpus=0, flags=("--latency-s", "0.05")),
    }
    for alias, deployment in deployments.items():
        deployment["model"] = f"{alias}-{token}"
        deployment["startup_timeout_s"] = 60
    config = json.loads(json.dumps(e2e.CONFIG))
    for model in config["model_configs"]:
        model["model"] = f"{model['alias']}-{token}"
    return {
        "schema_version": 1,
        "name": "drain",
        "data_designer": {"inline": config},
        "records": records,
        "sharding": {"shards": 1},
        "deployments": deployments,
        "client": {"batch_size": 5, "cpus": 1, "memory_gb": 1, "concurrency": {"writer": 2, "critic": 2}},
        "submission": {"time_limit": "00:15:00", "warning_lead_s": 60, "drain_grace_s": 30, **submission},
    }


def submit(e2e: ModuleType, directory: Path, local_slurm: Mapping[str, str], run: dict[str, Any]) -> Submitted:
    layout, result = e2e.execute(directory, local_slurm, run, sys.executable)
    models = tuple(d["model"] for d in run["deployments"].values())
    return Submitted(layout, result, e2e.slurm_env(local_slurm), models)


def indices(table: pa.Table) -> list[int]:
    return [int(i) for i in table.column(INDEX_COLUMN).to_pylist()]


def test_a_replica_dying_mid_shard_fails_over_to_the_other(
    e2e: ModuleType, local_slurm: dict[str, str], tmp_path: Path
) -> None:
    token = secrets.token_hex(3)
    flags = ("--crash-after", "8", "--crash-claim", str(tmp_path / "crash.claim"))
    run = submit(e2e, tmp_path, local_slurm, run_document(e2e, records=30, writer=flags, token=token))
    try:
        status = run.status(1)
        assert status.status == "succeeded", f"{status}\n{run.diagnosis()}"
        manifest = run.manifest(1)
        assert manifest.complete
        assert manifest.records == 30
        assert indices(run.table(1)) == list(range(30))
        routing = manifest.models["writer"].routing
        assert routing is not None
        assert routing.failovers >= 1, routing
        assert routing.unrouted == 0
        assert sorted(r.failures > 0 for r in routing.replicas) == [False, True], routing
        assert routing.failover_s, "the failover time was measured"
        died = [r for r in run.attempt(1).replicas if r.exit_code is not None]
        assert [(r.alias, r.exit_code) for r in died] == [("writer", 5)], "the crashing replica's EXIT_CRASHED"
        run.wait_until_jobs_end(run.job_ids)
        run.wait_for_no_servers()
    finally:
        run.cancel()


def test_the_warning_signal_drains_a_partial_result_and_a_retry_fills_exactly_the_rest(
    e2e: ModuleType, local_slurm: dict[str, str], tmp_path: Path
) -> None:
    token = secrets.token_hex(3)
    records = 60
    run = submit(e2e, tmp_path, local_slurm, run_document(e2e, records=records, writer=(), token=token))
    since = datetime.now(UTC) - timedelta(minutes=1)
    retry_jobs: list[str] = []
    try:
        run.wait_for_records(1, at_least=5)
        run.slurm("scancel", "--batch", "--signal=USR1", f"{run.job_ids[0]}_0")
        status = run.status(1)
        assert status.status == "time_limit", f"{status}\n{run.diagnosis()}"
        assert status.signal == "SIGUSR1"
        assert status.records is not None
        assert 0 < status.records < records, status
        assert status.drain_s is not None
        manifest = run.manifest(1)
        assert manifest.drained is not None
        assert manifest.drained.signal == "SIGUSR1"
        assert manifest.drained.settled, "every in-flight request finished: all aliases are routed"
        table = run.table(1)
        produced = [(r.start, r.stop) for r in manifest.ranges]
        assert table.num_rows == manifest.records == status.records
        assert indices(table) == [i for start, stop in produced for i in range(start, stop)]
        run.wait_until_jobs_end(run.job_ids)
        run.wait_for_no_servers()

        plan = ExecutionPlan.model_validate_json(run.layout.plan_record.read_bytes())
        prefix = run.result.jobs[0].job_name.rsplit("-c", 1)[0]
        binding = SubmissionBinding(run_id=run.result.run_id, run_dir=run.result.run_dir, job_name_prefix=prefix)
        unit = bind_retry(plan, binding, shards=[0], generation=1)
        retry_jobs = [chunk.job_id for chunk in run.scheduler.submit(unit, since=since).chunks]
        second = run.status(2)
        assert second.status == "succeeded", f"{second}\n{run.diagnosis()}"
        rest = run.manifest(2)
        assert rest.complete
        assert [(r.start, r.stop) for r in rest.ranges] == list(missing_ranges((0, records), produced))
        assert sorted(indices(table) + indices(run.table(2))) == list(range(records)), "no duplicate, no gap"
        coverage = shard_coverage(run.layout, plan.shards[0], plan_digest=plan.digest)
        assert coverage.complete
        assert coverage.overlap == ()
        run.wait_until_jobs_end(retry_jobs)
        run.wait_for_no_servers()
    finally:
        run.cancel()
        if retry_jobs:
            run.scheduler.cancel(retry_jobs, confirm_timeout_s=60)


def test_a_requeued_shard_continues_in_a_new_attempt_and_ends_complete(
    e2e: ModuleType, local_slurm: dict[str, str], tmp_path: Path
) -> None:
    token = secrets.token_hex(3)
    records = 60
    document = run_document(e2e, records=records, writer=(), token=token, requeue=True)
    run = submit(e2e, tmp_path, local_slurm, document)
    try:
        run.wait_for_records(1, at_least=5)
        run.slurm("scontrol", "requeue", f"{run.job_ids[0]}_0")
        second = run.status(2)
        assert second.status == "succeeded", f"{second}\n{run.diagnosis()}"
        attempt = run.attempt(2)
        assert attempt.restart_count == 1
        first = read_record(run.layout.output_manifest(0, 1), MANIFEST_SCHEMA)
        if isinstance(first, RecordOk):  # the first run published before KillWait ran out: it is continued
            produced = [(r.start, r.stop) for r in first.payload.ranges]
            assert [(r.start, r.stop) for r in attempt.assigned or ()] == list(missing_ranges((0, records), produced))
            earlier = read_record(run.layout.status(0, 1), STATUS_SCHEMA)
            assert isinstance(earlier, RecordOk)
            assert earlier.payload.status == "preempted", earlier.payload
            union = indices(run.table(1)) + indices(run.table(2))
            print(f"requeue: attempt 1 published {first.payload.records} records; attempt 2 generated the rest")
        else:
            union = indices(run.table(2))
            print("requeue: attempt 1 published nothing before KillWait; attempt 2 generated every record")
        assert sorted(union) == list(range(records)), "no duplicate, no gap"
        plan = ExecutionPlan.model_validate_json(run.layout.plan_record.read_bytes())
        coverage = shard_coverage(run.layout, plan.shards[0], plan_digest=plan.digest)
        assert coverage.complete
        assert coverage.overlap == ()
        run.wait_until_jobs_end(run.job_ids)
        run.wait_for_no_servers()
    finally:
        run.cancel()


def test_a_real_time_limit_delivers_the_warning_and_ends_with_a_classified_partial_result(
    e2e: ModuleType, local_slurm: dict[str, str], tmp_path: Path
) -> None:
    # --time=3 with the warning 60 s ahead: Slurm signals somewhere in the last 120 s; 2,000 slow records
    # cannot finish in 3 minutes.
    token = secrets.token_hex(3)
    records = 2000
    document = run_document(
        e2e, records=records, writer=(), token=token, time_limit="00:03:00", warning_lead_s=60, drain_grace_s=15
    )
    for deployment in document["deployments"].values():
        deployment["startup_timeout_s"] = 20
    run = submit(e2e, tmp_path, local_slurm, document)
    try:
        status = run.status(1, timeout_s=400)
        assert status.status == "time_limit", f"{status}\n{run.diagnosis()}"
        assert status.signal == "SIGUSR1"
        assert status.records is not None
        assert 0 < status.records < records
        manifest = run.manifest(1)
        assert manifest.drained is not None
        assert run.table(1).num_rows == manifest.records == status.records
        run.wait_until_jobs_end(run.job_ids)
        run.wait_for_no_servers()
    finally:
        run.cancel()
