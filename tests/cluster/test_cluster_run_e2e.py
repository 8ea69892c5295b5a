"""A real run end to end on the local Slurm cluster: ``data-designer slurm execute``, the supervisor, the test
server as ``command`` deployments and the real Data Designer client worker, down to the Parquet records.

The 4-shard run (one module fixture, shared by the tests that read it) has a sampler column and two LLM text
columns served by two aliases: ``writer`` with two replicas on one node (one fake GPU each), ``critic`` with one.
Each server stamps its text with ``replica=<alias>-<port>``, so a record says which replica wrote it. Every node
of the local cluster is 127.0.0.1: the servers of the four concurrent shards share one space of ports.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pytest
from pydantic import BaseModel

from data_designer.slurm.contracts import TERMINAL_TASK_STATES, ExecuteResult, TaskEvidence
from data_designer.slurm.contracts.records import (
    ATTEMPT_SCHEMA,
    INDEX_COLUMN,
    MANIFEST_SCHEMA,
    STATUS_SCHEMA,
    AttemptRecord,
    OutputManifest,
    RecordSchema,
    StatusRecord,
)
from data_designer.slurm.planner import ProfileTemplate, render_profile
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.testing import TEST_SERVER, run_logs

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

M = TypeVar("M", bound=BaseModel)
pq: Any = importlib.import_module("pyarrow.parquet")  # pyarrow.parquet has no type hints
DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
SHARDS = 4
RECORDS = 48
POLL_TIMEOUT_S = 240.0

CONFIG: dict[str, Any] = {
    "model_configs": [
        {"alias": "writer", "model": "e2e-writer", "provider": "local", "inference_parameters": {"max_tokens": 16}},
        {"alias": "critic", "model": "e2e-critic", "provider": "local", "inference_parameters": {"max_tokens": 8}},
    ],
    "columns": [
        {
            "name": "product",
            "column_type": "sampler",
            "sampler_type": "category",
            "params": {"values": ["kettle", "lamp", "bicycle", "teapot", "radio", "tent", "drum", "kite"]},
        },
        {"name": "stars", "column_type": "sampler", "sampler_type": "uniform", "params": {"low": 1, "high": 5}},
        {"name": "review", "column_type": "llm-text", "model_alias": "writer", "prompt": "Review a {{ product }}."},
        {"name": "verdict", "column_type": "llm-text", "model_alias": "critic", "prompt": "Judge: {{ review }}"},
    ],
}


def server(alias: str, *, replicas: int, gpus: int, flags: tuple[str, ...] = ()) -> dict[str, Any]:
    argv = [*TEST_SERVER, "--host", "{host}"]
    argv += ["--port", "{port}", "--model", "{model}", "--replica-id", f"{alias}-{{port}}", *flags]
    return {
        "engine": "command",
        "argv": argv,
        "model": f"e2e-{alias}",
        "replicas": replicas,
        "gpus_per_replica": gpus,
        "cpus_per_replica": 1,
        "startup_timeout_s": 600,
    }


def run_document(*, shards: int, records: int, writer_flags: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "name": "e2e",
        "data_designer": {"inline": CONFIG},
        "records": records,
        "sharding": {"shards": shards},
        "deployments": {
            "writer": server("writer", replicas=2, gpus=1, flags=writer_flags),
            "critic": server("critic", replicas=1, gpus=0),
        },
        "client": {"batch_size": 6, "cpus": 1, "memory_gb": 1},
        "submission": {"time_limit": "00:15:00", "warning_lead_s": 60, "drain_grace_s": 30},
    }


def slurm_env(local_slurm: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in local_slurm.items() if k in ("SLURM_CONF", "PATH")}


def write_profile(
    directory: Path, local_slurm: Mapping[str, str], python: str, *, container_runtime: str = "none"
) -> Path:
    template = ProfileTemplate(
        cluster="local",
        workspace_root=str(directory / "ws"),
        account=local_slurm["DDSLURM_ACCOUNT"],
        gpu_partition=local_slurm["DDSLURM_GPU_PARTITION"],
        cpu_partition=local_slurm["DDSLURM_CPU_PARTITION"],
        python=python,
        container_runtime=container_runtime,
    )
    profile = directory / "profile.yaml"
    profile.write_text(render_profile(template), encoding="utf-8")
    return profile


@dataclass
class FinishedRun:
    """A run submitted with the real CLI and polled until every shard ended."""

    layout: RunLayout
    result: ExecuteResult
    tasks: dict[int, TaskEvidence]
    statuses: dict[int, StatusRecord]

    def read(self, path: Path, schema: RecordSchema[M]) -> M:
        found = read_record(path, schema)
        assert isinstance(found, RecordOk), (path, found, self.diagnosis())
        return found.payload

    def attempt(self, shard: int) -> AttemptRecord:
        return self.read(self.layout.attempt_record(shard, 1), ATTEMPT_SCHEMA)

    def manifest(self, shard: int) -> OutputManifest:
        return self.read(self.layout.output_manifest(shard, 1), MANIFEST_SCHEMA)

    def table(self, shard: int) -> pa.Table:
        manifest = self.manifest(shard)
        output = self.layout.output_dir(shard, 1)
        return pa.concat_tables([pq.read_table(output / part.path) for part in manifest.parts]).sort_by(INDEX_COLUMN)

    def diagnosis(self) -> str:
        return run_logs(self.layout, tail_chars=1500)


def execute(
    directory: Path,
    local_slurm: Mapping[str, str],
    run: dict[str, Any],
    python: str,
    *,
    container_runtime: str = "none",
) -> tuple[RunLayout, ExecuteResult]:
    """``data-designer slurm execute --json`` of ``run`` with a profile for ``python`` (HOME in ``directory``)."""
    assert DATA_DESIGNER.is_file(), f"the host console script {DATA_DESIGNER} is missing: run 'uv sync'"
    directory.mkdir(parents=True, exist_ok=True)
    profile = write_profile(directory, local_slurm, python, container_runtime=container_runtime)
    run_file = directory / "run.json"
    run_file.write_text(json.dumps(run), encoding="utf-8")
    (directory / "home").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
    env.update({**slurm_env(local_slurm), "HOME": str(directory / "home"), "COLUMNS": "200"})
    command = [str(DATA_DESIGNER), "slurm", "execute", str(run_file), "--profile", str(profile), "--json"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    result = ExecuteResult.model_validate_json(done.stdout)
    layout = RunLayout.of(Path(result.run_dir).parent.parent, result.run_id)
    assert layout.run_dir == Path(result.run_dir)
    return layout, result


def execute_and_wait(
    directory: Path,
    local_slurm: Mapping[str, str],
    run: dict[str, Any],
    python: str,
    *,
    container_runtime: str = "none",
) -> FinishedRun:
    """:func:`execute`, then a bounded poll until every shard ended.

    A shard has ended when its ``status.json`` exists, or when Slurm says its task is terminal and no status
    appeared within a few seconds after (a supervisor that could not even start writes none).
    """
    layout, result = execute(directory, local_slurm, run, python, container_runtime=container_runtime)
    scheduler = SlurmScheduler(SubprocessRunner(overrides=slurm_env(local_slurm)))
    job_ids = [job.job_id for job in result.jobs]
    shards = range(int(run["sharding"]["shards"]))
    assert len(job_ids) == 1, "a few shards fit one array job (MaxArraySize 11): array index = shard"
    shard_of = {(job_ids[0], shard): shard for shard in shards}
    statuses: dict[int, StatusRecord] = {}
    tasks: dict[int, TaskEvidence] = {}
    terminal_since: dict[int, float] = {}
    deadline = time.monotonic() + POLL_TIMEOUT_S
    try:
        while True:
            for shard in shards:
                found = read_record(layout.status(shard, 1), STATUS_SCHEMA)
                if isinstance(found, RecordOk):
                    statuses[shard] = found.payload
            for task in scheduler.observe(job_ids).tasks:
                of_task = shard_of.get((task.job_id, task.array_index or 0))
                if of_task is not None:
                    tasks[of_task] = task
                    if task.state in TERMINAL_TASK_STATES:
                        terminal_since.setdefault(of_task, time.monotonic())
            ended = [s for s in shards if s in statuses or time.monotonic() - terminal_since.get(s, 1e18) > 5]
            if len(ended) == len(shards) and all(s in terminal_since for s in shards):
                break
            assert time.monotonic() < deadline, f"run not over after {POLL_TIMEOUT_S}s: {tasks}"
            time.sleep(1)
    finally:
        scheduler.cancel(job_ids, confirm_timeout_s=60)  # nothing left behind, whatever happened
    return FinishedRun(layout, result, tasks, statuses)


@pytest.fixture(scope="module")
def four_shards(tmp_path_factory: pytest.TempPathFactory, local_slurm: dict[str, str]) -> FinishedRun:
    directory = tmp_path_factory.mktemp("e2e-four-shards")
    return execute_and_wait(directory, local_slurm, run_document(shards=SHARDS, records=RECORDS), sys.executable)


def writer_stamps(table: pa.Table) -> list[str]:
    """The replica stamp of every ``review`` (the test server's text starts ``replica=<id>``)."""
    stamps = []
    for text in table.column("review").to_pylist():
        words = [w for w in str(text).split() if w.startswith("replica=")]
        assert words, f"no replica stamp in {text!r}"
        stamps.append(words[0].removeprefix("replica="))
    return stamps


def test_four_shards_produce_exactly_the_requested_records_without_port_collisions(four_shards: FinishedRun) -> None:
    run = four_shards
    assert {s: status.status for s, status in run.statuses.items()} == dict.fromkeys(range(SHARDS), "succeeded"), (
        run.diagnosis()
    )
    assert {s: task.state for s, task in run.tasks.items()} == dict.fromkeys(range(SHARDS), "completed")

    tables = {shard: run.table(shard) for shard in range(SHARDS)}
    merged = pa.concat_tables(tables.values()).sort_by(INDEX_COLUMN)
    assert merged.num_rows == RECORDS
    assert merged.column(INDEX_COLUMN).to_pylist() == list(range(RECORDS))
    for shard, table in tables.items():
        manifest = run.manifest(shard)
        assert manifest.records == table.num_rows == RECORDS // SHARDS
        assert table.column("_dd_shard").to_pylist() == [shard] * table.num_rows
        assert set(table.column("_dd_run_id").to_pylist()) == {run.result.run_id}
        assert all(str(v).strip() for v in table.column("verdict").to_pylist())

    # Sampler values differ between shards: the sequences, not the sets (8 categories in 12 draws share a set).
    products = [tuple(t.column("product").to_pylist()) for t in tables.values()]
    stars = [tuple(t.column("stars").to_pylist()) for t in tables.values()]
    assert len(set(products)) == SHARDS, products
    assert len(set(stars)) == SHARDS, stars

    # Per shard: two writer replicas on one node with their own GPUs, one critic; every review written by one of
    # this shard's writer replicas (identified by port).
    ports: list[tuple[str, int]] = []
    for shard in range(SHARDS):
        attempt = run.attempt(shard)
        writers = [r for r in attempt.replicas if r.alias == "writer"]
        assert len(writers) == 2
        assert len([r for r in attempt.replicas if r.alias == "critic"]) == 1
        assert len({r.ports[0].node for r in writers}) == 1
        assert len({r.ports[0].step_gpus for r in writers}) == 2, [r.ports for r in writers]
        for replica in attempt.replicas:
            assert replica.port is not None
            ports += [(p.node or "", p.port) for p in replica.ports]
        writer_ports = {f"writer-{r.port}" for r in writers}
        assert set(writer_stamps(tables[shard])) <= writer_ports
    # Every node is 127.0.0.1: all ports of all shards must differ, not only those on one node.
    assert len({port for _node, port in ports}) == len(ports) == 3 * SHARDS, ports
    assert len({node for node, _port in ports}) == SHARDS, "each shard ran on its own node"

    # The shards really ran at the same time: every supervisor started before any of them finished.
    started = [run.attempt(shard).supervisor_started_at for shard in range(SHARDS)]
    finished = [run.statuses[shard].finished_at for shard in range(SHARDS)]
    assert max(started) < min(finished), (started, finished)

    # The worker rewrites every alias's model config without the host's alarming removal warning.
    logs = sorted(run.layout.run_dir.glob("shards/*/attempts/*/logs/client.log"))
    assert len(logs) == SHARDS, logs
    for log in logs:
        assert "No model configurations found" not in log.read_text(encoding="utf-8"), log
    print_breakdown(run)


def print_breakdown(run: FinishedRun) -> None:
    for shard in range(SHARDS):
        attempt, timings = run.attempt(shard), run.manifest(shard).timings
        spans = [f"{r.alias}-{r.replica}:{r.port} ready {r.startup_s}s" for r in attempt.replicas]
        print(
            f"shard {shard}: {attempt.nodes} {spans} gen {timings.generation_s:.2f}s {timings.records_per_s:.1f} rec/s"
        )


def test_both_replicas_of_the_two_replica_alias_served_requests(four_shards: FinishedRun) -> None:
    """The worker's local router spreads ``writer`` over its two replicas: the manifest counts requests per
    replica, and the records themselves carry the stamps of both servers."""
    for shard in range(SHARDS):
        writers = [r for r in four_shards.attempt(shard).replicas if r.alias == "writer"]
        assert set(writer_stamps(four_shards.table(shard))) == {f"writer-{r.port}" for r in writers}
        usage = four_shards.manifest(shard).models["writer"]
        assert usage.routing is not None, usage
        served = {replica.base_url: replica.requests for replica in usage.routing.replicas}
        assert set(served) == {r.base_url for r in writers}
        assert all(count > 0 for count in served.values()), served
        assert sum(served.values()) >= RECORDS // SHARDS
        critic = four_shards.manifest(shard).models["critic"].routing
        assert critic is not None, "every deployed alias goes through the router (it is the drain's gate)"
        assert [(r.requests, r.failures) for r in critic.replicas] == [(RECORDS // SHARDS + 1, 0)], critic


def test_a_server_crashing_at_start_is_classified_with_its_log_tail_within_30_seconds(
    tmp_path: Path, local_slurm: dict[str, str]
) -> None:
    run_doc = run_document(shards=1, records=4, writer_flags=("--crash-at-start",))
    run = execute_and_wait(tmp_path, local_slurm, run_doc, sys.executable)
    status = run.statuses[0]
    assert status.status == "server_failed_to_start", run.diagnosis()
    assert str(status.step).startswith("server-writer"), status
    assert any("simulated crash at start" in line for line in status.log_tail), status
    assert status.records == 0, "nothing published is 0, not unknown"
    elapsed = (status.finished_at - run.attempt(0).supervisor_started_at).total_seconds()
    print(f"crash at start classified {elapsed:.1f}s after the supervisor started (startup budget 600s)")
    assert elapsed < 30
    assert not run.layout.output_manifest(0, 1).exists()


def test_a_compute_python_without_the_runtime_fails_as_environment_mismatch(
    tmp_path: Path, local_slurm: dict[str, str]
) -> None:
    """An interpreter without the runtime cannot import the supervisor, so the batch script's preflight import
    ends the job with the supervisor's ``environment_mismatch`` exit code (6) before ``exec``; Slurm's record
    then classifies it, and the job's error file names the missing package. No attempt is claimed.
    """
    from data_designer.slurm.contracts.records import EXIT_CODES
    from data_designer.slurm.planner import ENVIRONMENT_MISMATCH_EXIT_CODE

    assert EXIT_CODES["environment_mismatch"] == ENVIRONMENT_MISMATCH_EXIT_CODE
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    python = str(bare / "bin" / "python")
    assert subprocess.run([python, "-c", "import data_designer"], capture_output=True, check=False).returncode != 0
    run = execute_and_wait(tmp_path, local_slurm, run_document(shards=1, records=4), python)
    task = run.tasks[0]
    assert (task.state, task.exit_code) == ("failed", ENVIRONMENT_MISMATCH_EXIT_CODE), task
    assert run.statuses == {}, "a supervisor that cannot be imported writes no status"
    errors = "".join(p.read_text(errors="replace") for p in run.layout.run_dir.glob("slurm-*.err"))
    assert "ModuleNotFoundError: No module named 'data_designer'" in errors, run.diagnosis()
    assert not run.layout.attempt_record(0, 1).exists()
