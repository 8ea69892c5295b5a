"""runtime.testing.write_run_directory: every outcome's files are real records, the plan is the run's, and the
fake scheduler answers for the run's jobs in the matching states."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from data_designer.slurm.contracts import ExecutionPlan
from data_designer.slurm.contracts.records import (
    ATTEMPT_SCHEMA,
    CLAIM_SCHEMA,
    ENDPOINTS_SCHEMA,
    HEARTBEAT_SCHEMA,
    INPUTS_SCHEMA,
    MANIFEST_SCHEMA,
    PORT_SCHEMA,
    PROGRESS_SCHEMA,
    REQUESTS_SCHEMA,
    RUN_SCHEMA,
    STATUS_SCHEMA,
    SUBMISSION_SCHEMA,
    IndexRange,
    RecordSchema,
)
from data_designer.slurm.planner import plan_digest
from data_designer.slurm.runtime.scheduler import SlurmScheduler
from data_designer.slurm.runtime.store import (
    RecordOk,
    RunLayout,
    read_record,
)
from data_designer.slurm.runtime.testing import (
    OUTCOME_TASK_STATES,
    PREFLIGHT_ERROR_TEXT,
    SERVER_FAILURE_LINE,
    SHARD_OUTCOMES,
    FakeSlurm,
    ShardOutcome,
    outcome_cycle,
    register_run_jobs,
    write_run_directory,
    write_shard_outcomes,
)

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
EVERY = outcome_cycle(SHARD_OUTCOMES)
"""Shard k has outcome SHARD_OUTCOMES[k % 7]."""


M = TypeVar("M", bound=BaseModel)


def ok(path: Path, schema: RecordSchema[M]) -> M:
    found = read_record(path, schema)
    assert isinstance(found, RecordOk), (path, found)
    return found.payload


def shard_of(outcome: ShardOutcome) -> int:
    return SHARD_OUTCOMES.index(outcome)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> RunLayout:
    """Fourteen shards of 10 records: every outcome twice (shard k: SHARD_OUTCOMES[k % 7])."""
    return write_run_directory(tmp_path_factory.mktemp("ws"), shards=14, outcome=EVERY, clock=lambda: NOW)


def test_run_records_are_those_execute_writes(mixed: RunLayout) -> None:
    run = ok(mixed.run_record, RUN_SCHEMA)
    assert (run.run_id, run.shards, run.records) == (str(mixed.run_id), 14, 140)
    assert run.created_at < NOW - timedelta(hours=2)
    inputs = ok(mixed.inputs_manifest, INPUTS_SCHEMA)
    (snapshot,) = inputs.files
    data = (mixed.run_dir / snapshot.path).read_bytes()
    assert (snapshot.sha256, snapshot.size) == (hashlib.sha256(data).hexdigest(), len(data))
    submission = ok(mixed.submission_record(1), SUBMISSION_SCHEMA)
    assert [(j.chunk, j.generation, j.index_offset, j.job_id) for j in submission.jobs] == [(0, 0, 0, "1000")]
    assert [(j.job_name, j.array_spec) for j in submission.jobs] == [
        (c.job_name, c.array_spec) for c in run.unit.chunks
    ]
    assert submission.jobs[0].job_name == f"dd-{mixed.run_id}-c0"


def test_plan_json_is_the_runs_plan(mixed: RunLayout) -> None:
    plan = ExecutionPlan.model_validate_json(mixed.plan_record.read_bytes())
    run = ok(mixed.run_record, RUN_SCHEMA)
    assert plan_digest(plan) == plan.digest == run.plan_digest
    assert plan.config_digest == run.config_digest
    assert [s.records for s in plan.shards] == [10] * 14


def test_succeeded_shard_leaves_every_record(mixed: RunLayout) -> None:
    k = shard_of("succeeded")
    claim = ok(mixed.claim(k, 1), CLAIM_SCHEMA)
    assert (claim.job_id, claim.array_task, claim.attempt, claim.restart_count) == ("1000", k, 1, 0)
    attempt = ok(mixed.attempt_record(k, 1), ATTEMPT_SCHEMA)
    assert attempt.assigned == (IndexRange(0, 10),)
    assert attempt.servers_ready_at is not None
    assert len(attempt.replicas) == 1
    assert attempt.replicas[0].base_url is not None
    endpoints = ok(mixed.endpoints(k, 1), ENDPOINTS_SCHEMA)
    assert endpoints.aliases["writer"].base_urls == (attempt.replicas[0].base_url,)
    ok(mixed.ports_dir(k, 1) / "writer-0.0.json", PORT_SCHEMA)
    assert ok(mixed.heartbeat(k, 1), HEARTBEAT_SCHEMA).phase == "stopping"
    progress = ok(mixed.progress(k, 1), PROGRESS_SCHEMA)
    assert (progress.state, progress.records_done, progress.records_total) == ("succeeded", 10, 10)
    manifest = ok(mixed.output_manifest(k, 1), MANIFEST_SCHEMA)
    assert manifest.complete
    assert manifest.ranges == manifest.assigned == attempt.assigned
    assert manifest.records == 10
    assert manifest.models["writer"].output_tokens
    (part,) = manifest.parts
    data = (mixed.output_dir(k, 1) / part.path).read_bytes()
    assert (part.sha256, part.bytes) == (hashlib.sha256(data).hexdigest(), len(data))
    status = ok(mixed.status(k, 1), STATUS_SCHEMA)
    assert (status.status, status.exit_code, status.records) == ("succeeded", 0, 10)
    for step in ("supervisor", "client", "server-writer-0"):
        assert mixed.log_file(k, 1, step).read_text().count("\n") >= 2


def test_running_shard_is_live_and_unfinished(mixed: RunLayout) -> None:
    k = shard_of("running")
    heartbeat = ok(mixed.heartbeat(k, 1), HEARTBEAT_SCHEMA)
    assert (heartbeat.phase, heartbeat.time) == ("client_running", NOW)
    progress = ok(mixed.progress(k, 1), PROGRESS_SCHEMA)
    assert (progress.state, progress.records_done) == ("generating", 5)
    ok(mixed.claim(k, 1), CLAIM_SCHEMA)
    ok(mixed.attempt_record(k, 1), ATTEMPT_SCHEMA)
    assert not mixed.output_manifest(k, 1).exists()
    assert not mixed.status(k, 1).exists()


def test_partial_shard_drained_the_first_half(mixed: RunLayout) -> None:
    k = shard_of("partial")
    manifest = ok(mixed.output_manifest(k, 1), MANIFEST_SCHEMA)
    start = 10 * k
    assert not manifest.complete
    assert manifest.drained is not None
    assert manifest.drained.signal == "SIGUSR1"
    assert (manifest.assigned, manifest.ranges, manifest.records) == (
        (IndexRange(start, start + 10),),
        (IndexRange(start, start + 5),),
        5,
    )
    (part,) = manifest.parts
    data = (mixed.output_dir(k, 1) / part.path).read_bytes()
    assert (part.sha256, part.bytes, part.first_index) == (hashlib.sha256(data).hexdigest(), len(data), start)
    status = ok(mixed.status(k, 1), STATUS_SCHEMA)
    assert (status.status, status.exit_code, status.signal, status.records) == ("time_limit", 13, "SIGUSR1", 5)


def test_failed_server_shard_names_the_cause(mixed: RunLayout) -> None:
    k = shard_of("failed_server")
    status = ok(mixed.status(k, 1), STATUS_SCHEMA)
    assert (status.status, status.exit_code, status.step) == ("server_failed_to_start", 10, "server-writer-0")
    assert status.log_tail[-1] == SERVER_FAILURE_LINE
    assert mixed.log_file(k, 1, "server-writer-0").read_text().splitlines()[-1] == SERVER_FAILURE_LINE
    assert ok(mixed.attempt_record(k, 1), ATTEMPT_SCHEMA).servers_ready_at is None
    for missing in (mixed.output_manifest(k, 1), mixed.endpoints(k, 1), mixed.progress(k, 1)):
        assert not missing.exists()


def test_cancelled_shard_published_nothing(mixed: RunLayout) -> None:
    k = shard_of("cancelled")
    status = ok(mixed.status(k, 1), STATUS_SCHEMA)
    assert (status.status, status.exit_code, status.signal, status.records) == ("cancelled", 12, "SIGTERM", 0)
    assert ok(mixed.progress(k, 1), PROGRESS_SCHEMA).records_done == 5
    assert not mixed.output_manifest(k, 1).exists()


def test_pending_and_no_attempt_shards_leave_nothing_under_shards(mixed: RunLayout) -> None:
    for outcome in ("pending", "no_attempt"):
        assert not mixed.shard_dir(shard_of(outcome)).exists()
    run = ok(mixed.run_record, RUN_SCHEMA)
    k = shard_of("no_attempt")
    err = mixed.batch_log(run.unit.chunks[0].job_name, k, "err")
    assert err.read_text() == PREFLIGHT_ERROR_TEXT
    assert "ModuleNotFoundError: No module named 'data_designer.slurm.runtime'" in PREFLIGHT_ERROR_TEXT
    assert sorted(p.name for p in mixed.run_dir.glob("slurm-*")) == sorted(
        f"slurm-{run.unit.chunks[0].job_name}_{shard}.{stream}" for shard in (k, k + 7) for stream in ("err", "out")
    )


def check_record(path: Path) -> None:
    """``path`` reads ``RecordOk`` with the schema its name implies (logs and parts are not records)."""
    schema = RECORD_NAMES.get("ports/" if path.parent.name == "ports" else path.name)
    if schema is None:
        assert path.name.endswith((".log", ".parquet")), path
    else:
        ok(path, schema)


RECORD_NAMES: dict[str, RecordSchema[Any]] = {
    "ports/": PORT_SCHEMA,
    "claim": CLAIM_SCHEMA,
    "attempt.json": ATTEMPT_SCHEMA,
    "endpoints.json": ENDPOINTS_SCHEMA,
    "heartbeat.json": HEARTBEAT_SCHEMA,
    "progress.json": PROGRESS_SCHEMA,
    "requests.json": REQUESTS_SCHEMA,
    "status.json": STATUS_SCHEMA,
    "manifest.json": MANIFEST_SCHEMA,
}
"""The schema of every record an attempt directory holds, by file name (spelled out: the test is the oracle)."""


def test_every_record_of_every_outcome_reads_ok(mixed: RunLayout) -> None:
    seen: Counter[str] = Counter()
    for directory, _, names in os.walk(mixed.shards_dir):
        for name in names:
            check_record(Path(directory) / name)
            seen[name] += 1
    # 10 shards wrote an attempt; 2 each of succeeded/partial wrote a manifest; 2 running have no status.
    assert (seen["claim"], seen["manifest.json"], seen["status.json"], seen["endpoints.json"]) == (10, 4, 8, 8)
    assert seen["requests.json"] == 4, "beside every manifest"


def test_shards_take_their_chunks_job_ids(tmp_path: Path) -> None:
    def outcome(shard: int) -> ShardOutcome:
        return "succeeded" if shard in (0, 1001, 2002) else "pending"

    layout = write_run_directory(tmp_path, shards=2003, outcome=outcome, clock=lambda: NOW, job_id_start=500)
    jobs = ok(layout.submission_record(1), SUBMISSION_SCHEMA).jobs
    assert [(j.chunk, j.job_id, j.index_offset, j.array_spec) for j in jobs] == [
        (0, "500", 0, "0-1000"),
        (1, "501", 1001, "0-1000"),
        (2, "502", 2002, "0-0"),
    ]
    claim = ok(layout.claim(2002, 1), CLAIM_SCHEMA)
    assert (claim.job_id, claim.array_task) == ("502", 0)
    attempt = ok(layout.attempt_record(1001, 1), ATTEMPT_SCHEMA)
    assert (attempt.chunk, attempt.array_task, attempt.job_id) == (1, 0, "501")


def test_a_thousand_shards(tmp_path: Path) -> None:
    layout = write_run_directory(tmp_path, shards=1000, clock=lambda: NOW)
    files = Counter(name for _, _, names in os.walk(layout.shards_dir) for name in names)
    assert len(os.listdir(layout.shards_dir)) == 1000
    assert files["manifest.json"] == files["status.json"] == files["part-00000.parquet"] == 1000
    assert sum(files.values()) == 13 * 1000  # requests.json beside the manifest


def _shard_files(layout: RunLayout) -> dict[str, bytes]:
    return {
        str(path.relative_to(layout.shards_dir)): path.read_bytes()
        for path in sorted(layout.shards_dir.rglob("*"))
        if path.is_file()
    }


def test_write_shard_outcomes_finishes_a_submitted_run_as_write_run_directory_would(tmp_path: Path) -> None:
    written = write_run_directory(tmp_path, shards=14, outcome=EVERY, clock=lambda: NOW, max_array_size=5)
    expected = _shard_files(written)
    written.run_dir.rename(tmp_path / "kept")
    submitted = write_run_directory(
        tmp_path, shards=14, outcome=lambda _: "pending", clock=lambda: NOW, max_array_size=5
    )
    assert submitted.run_dir == written.run_dir
    assert _shard_files(submitted) == {}
    write_shard_outcomes(submitted, outcome=EVERY, clock=lambda: NOW)
    assert _shard_files(submitted) == expected  # every chunk's job and task, byte for byte
    with pytest.raises(FileExistsError):  # every file is created exclusively: a finished shard stays as it is
        write_shard_outcomes(submitted, clock=lambda: NOW)


def test_fake_slurm_answers_for_the_runs_jobs(mixed: RunLayout) -> None:
    slurm = FakeSlurm()
    job_ids = register_run_jobs(slurm, mixed, outcome=EVERY)
    assert job_ids == ("1000",)
    observation = SlurmScheduler(slurm, clock=slurm.clock, sleep=slurm.sleep).observe(job_ids)
    by_index = {t.array_index: t for t in observation.tasks}
    assert len(by_index) == len(observation.tasks) == 14
    for shard in range(14):
        raw, exit_code, signal = OUTCOME_TASK_STATES[EVERY(shard)]
        task = by_index[shard]
        assert task.raw_state == raw, shard
        if task.source == "sacct":  # live tasks come from squeue, which prints no exit code
            assert (task.exit_code, task.signal) == (exit_code, signal), shard
    new = slurm.add_job(
        name="later", script="#!/bin/bash\n", indices=None, throttle=None, time_limit_s=None, requeue=False
    )
    assert new.job_id == 1001
