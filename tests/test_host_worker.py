"""The client worker with the real host against real test-server processes: two shards of a toy config.

A plan is compiled for a config with sampler columns and two LLM text columns on two model aliases
(``writer`` deployed with the ``command`` engine, ``critic`` external with an API key named by an
environment variable). Each alias is served by the in-tree test server started as a subprocess on a
free port; the worker runs exactly as the supervisor starts it: the plan's client argv bound to the
shard and attempt, in the run directory, with ``DDSLURM_ATTEMPT_DIR`` and ``DDSLURM_ENDPOINTS``.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts import ClusterProfile, ExecutionPlan
from data_designer.slurm.contracts.records import (
    ENV_ATTEMPT_DIR,
    ENV_ENDPOINTS,
    MANIFEST_SCHEMA,
    PROGRESS_SCHEMA,
    AliasEndpoints,
    EndpointsRecord,
    OutputManifest,
)
from data_designer.slurm.planner import bind_argv, canonical_json, compile, load_run, missing_ranges, resolve_config
from data_designer.slurm.runtime.store import AttemptWriter, RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.supervisor import client_failure_message, read_client_error
from data_designer.slurm.runtime.testing import TEST_SERVER_MODULE, assign_attempt, wait_for_record

pytestmark = pytest.mark.host

pq: Any = importlib.import_module("pyarrow.parquet")

RUN_ID = "toy-20260101T000000Z-0a1b2c"
CRITIC_MODEL = "stub/critic"
KEY_ENV = "DDSLURM_TEST_CRITIC_KEY"

CONFIG: dict[str, Any] = {
    "model_configs": [
        {"alias": "writer", "model": "some/original-model", "provider": "nowhere"},
        {"alias": "critic", "model": CRITIC_MODEL, "provider": "nowhere"},
    ],
    "columns": [
        {
            "name": "topic",
            "column_type": "sampler",
            "sampler_type": "category",
            "params": {"values": ["algebra", "botany", "chess", "dance", "elves", "fjords", "geese", "harps"]},
        },
        {"name": "score", "column_type": "sampler", "sampler_type": "uniform", "params": {"low": 0, "high": 1}},
        {"name": "question", "column_type": "llm-text", "prompt": "Ask about {{ topic }}", "model_alias": "writer"},
        {"name": "review", "column_type": "llm-text", "prompt": "Review: {{ question }}", "model_alias": "critic"},
    ],
}


@dataclass
class Server:
    process: subprocess.Popen[str]
    base_url: str


def start_server(model: str, replica: str, env: dict[str, str], *extra: str) -> Server:
    argv = [sys.executable, "-m", TEST_SERVER_MODULE, "--port", "0", "--model", model, "--replica-id", replica, *extra]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    assert line.startswith("ready "), f"test server did not start: {line!r}"
    return Server(process, f"http://{line.removeprefix('ready ')}/v1")


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Server]]:
    env = {**os.environ, KEY_ENV: "sekrit-critic-key"}
    started = {
        "writer": start_server("writer", "w0", env),
        "critic": start_server(CRITIC_MODEL, "c0", env, "--api-key-env", KEY_ENV),
    }
    yield started
    for server in started.values():
        server.process.terminate()
        server.process.communicate(timeout=10)


def make_plan(
    config: dict[str, Any],
    *,
    records: int,
    shards: int,
    batch_size: int = 10,
    concurrency: int = 8,
    drain_grace_s: int = 120,
    external: bool = True,
) -> ExecutionPlan:
    run: dict[str, Any] = {
        "schema_version": 1,
        "name": "toy",
        "data_designer": {"inline": config},
        "records": records,
        "sharding": {"shards": shards},
        "seed": 7,
        "deployments": {
            "writer": {"engine": "command", "argv": ["server", "{port}"], "model": "writer", "gpus_per_replica": 0}
        },
        "external": {"critic": {"endpoint": "http://placeholder/v1", "api_key_env": KEY_ENV}},
        "client": {"batch_size": batch_size, "default_concurrency": concurrency},
        "submission": {"drain_grace_s": drain_grace_s},
    }
    if not external:
        del run["external"]
    profile = ClusterProfile.model_validate(
        {
            "workspace_root": "/ws",
            "partitions": {"gpu": "gpu", "cpu": "cpu"},
            "gpus_per_node": 2,
            "compute_python": {"interpreter": sys.executable},
            "default_time_limit": "01:00:00",
        }
    )
    spec = load_run(json.dumps(run), file="run.json")
    return compile(spec, profile, cluster="local", config=resolve_config(spec))


def prepare_run(root: Path, plan: ExecutionPlan, servers: dict[str, Server]) -> RunLayout:
    layout = RunLayout.of(root, RUN_ID)
    layout.run_dir.mkdir(parents=True)
    layout.plan_record.write_bytes(canonical_json(plan.model_dump(mode="json")))
    for shard in plan.shards:
        prepare_attempt(layout, plan, servers, shard=shard.shard, attempt=1, assigned=[(shard.start, shard.stop)])
    return layout


def prepare_attempt(
    layout: RunLayout,
    plan: ExecutionPlan,
    servers: dict[str, Server],
    *,
    shard: int,
    attempt: int,
    assigned: Sequence[tuple[int, int]],
) -> None:
    """What the supervisor writes before it starts the worker: attempt.json (the assigned ranges), endpoints.json."""
    assign_attempt(layout, plan_digest=plan.digest, shard=shard, attempt=attempt, assigned=assigned)
    planned = {endpoint.alias for endpoint in plan.allocation.client.endpoints}
    endpoints = EndpointsRecord(
        aliases={
            "writer": AliasEndpoints(
                kind="deployed",
                base_urls=(servers["writer"].base_url, "http://127.0.0.1:9/v1"),
                model="writer",
                api_key_env=None,
            ),
            "critic": AliasEndpoints(
                kind="external", base_urls=(servers["critic"].base_url,), model=CRITIC_MODEL, api_key_env=KEY_ENV
            ),
        }
    )
    endpoints = EndpointsRecord(aliases={a: e for a, e in endpoints.aliases.items() if a in planned})
    AttemptWriter(layout, shard, attempt).write_endpoints(endpoints)


def start_worker(
    layout: RunLayout, plan: ExecutionPlan, shard: int, env: dict[str, str], attempt: int = 1
) -> subprocess.Popen[str]:
    argv = bind_argv(plan.allocation.client.argv, {"shard": str(shard), "attempt": str(attempt)})
    attempt_dir = layout.attempt_dir(shard, attempt)
    env = {**env, ENV_ATTEMPT_DIR: str(attempt_dir), ENV_ENDPOINTS: str(layout.endpoints(shard, attempt))}
    return subprocess.Popen(
        list(argv), cwd=layout.run_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def worker_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, KEY_ENV: "sekrit-critic-key", "HOME": str(tmp_path / "home")}


@dataclass
class ShardOutcome:
    returncode: int
    stderr: str
    seconds: float


def run_workers(layout: RunLayout, plan: ExecutionPlan, env: dict[str, str]) -> list[ShardOutcome]:
    started = time.perf_counter()
    processes = [start_worker(layout, plan, shard.shard, env) for shard in plan.shards]
    outcomes = []
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        outcomes.append(ShardOutcome(process.returncode, stderr, time.perf_counter() - started))
    return outcomes


@pytest.fixture(scope="module")
def two_shards(
    servers: dict[str, Server], tmp_path_factory: pytest.TempPathFactory
) -> tuple[RunLayout, ExecutionPlan, list[ShardOutcome]]:
    tmp = tmp_path_factory.mktemp("two-shards")
    plan = make_plan(CONFIG, records=50, shards=2)
    layout = prepare_run(tmp / "ws", plan, servers)
    return layout, plan, run_workers(layout, plan, worker_env(tmp))


def manifest_of(layout: RunLayout, shard: int, attempt: int = 1) -> OutputManifest:
    found = read_record(layout.output_manifest(shard, attempt), MANIFEST_SCHEMA)
    assert isinstance(found, RecordOk), found
    return found.payload


def rows_of(layout: RunLayout, shard: int, attempt: int = 1) -> list[dict[str, Any]]:
    manifest = manifest_of(layout, shard, attempt)
    rows: list[dict[str, Any]] = []
    for part in manifest.parts:
        rows += pq.read_table(layout.output_dir(shard, attempt) / part.path).to_pylist()
    return rows


def test_each_shard_generates_exactly_its_range_once(
    two_shards: tuple[RunLayout, ExecutionPlan, list[ShardOutcome]],
) -> None:
    layout, plan, outcomes = two_shards
    assert [o.returncode for o in outcomes] == [0, 0], [o.stderr[-3000:] for o in outcomes]
    for shard in plan.shards:
        rows = rows_of(layout, shard.shard)
        manifest = manifest_of(layout, shard.shard)
        assert len(rows) == manifest.records == shard.records
        assert sorted(row["_dd_index"] for row in rows) == list(range(shard.start, shard.stop))
        assert {(row["_dd_shard"], row["_dd_attempt"], row["_dd_run_id"]) for row in rows} == {(shard.shard, 1, RUN_ID)}
        assert {row["_dd_plan_digest"] for row in rows} == {plan.digest}
        assert sum(part.records for part in manifest.parts) == manifest.records
        assert [c.name for c in manifest.columns][-5:] == [
            "_dd_index",
            "_dd_run_id",
            "_dd_plan_digest",
            "_dd_shard",
            "_dd_attempt",
        ]
        assert all(row["question"] and row["review"] for row in rows)
    all_indices = [row["_dd_index"] for shard in plan.shards for row in rows_of(layout, shard.shard)]
    assert sorted(all_indices) == list(range(50))


def test_sampler_values_differ_between_shards(
    two_shards: tuple[RunLayout, ExecutionPlan, list[ShardOutcome]],
) -> None:
    layout, plan, _ = two_shards
    first, second = (rows_of(layout, shard.shard) for shard in plan.shards)
    assert [row["score"] for row in first] != [row["score"] for row in second][: len(first)]
    assert not {row["score"] for row in first} & {row["score"] for row in second}


def test_manifest_counts_requests_and_tokens_per_alias(
    two_shards: tuple[RunLayout, ExecutionPlan, list[ShardOutcome]],
) -> None:
    layout, plan, _ = two_shards
    for shard in plan.shards:
        manifest = manifest_of(layout, shard.shard)
        assert manifest.usage_source == "host"
        assert set(manifest.models) == {"writer", "critic"}
        for usage in manifest.models.values():
            assert usage.successful_requests is not None
            assert usage.successful_requests >= shard.records
            assert usage.input_tokens is not None
            assert usage.input_tokens > 0
            assert usage.output_tokens is not None
            assert usage.output_tokens > 0
        assert manifest.models["writer"].base_urls[1] == "http://127.0.0.1:9/v1"
        assert manifest.models["writer"].used_base_url == manifest.models["writer"].base_urls[0]
        assert manifest.timings.generation_s > 0
        assert manifest.timings.records_per_s > 0
        progress = read_record(layout.progress(shard.shard, 1), PROGRESS_SCHEMA)
        assert isinstance(progress, RecordOk)
        assert (progress.payload.state, progress.payload.records_done) == ("succeeded", shard.records)


def test_host_artifacts_and_home_stay_in_the_attempt_directory(
    two_shards: tuple[RunLayout, ExecutionPlan, list[ShardOutcome]],
) -> None:
    layout, _plan, _ = two_shards
    attempt_dir = layout.attempt_dir(0, 1)
    assert (attempt_dir / "home" / ".data-designer").is_dir()
    assert list((attempt_dir / "artifacts").iterdir())


def test_an_invalid_config_exits_2_with_one_line(servers: dict[str, Server], tmp_path: Path) -> None:
    config = json.loads(json.dumps(CONFIG))
    config["columns"][2]["prompt"] = "Ask about {{ no_such_column }}"
    plan = make_plan(config, records=4, shards=1)
    layout = prepare_run(tmp_path / "ws", plan, servers)
    [outcome] = run_workers(layout, plan, worker_env(tmp_path))
    assert outcome.returncode == 2, outcome.stderr[-3000:]
    last = outcome.stderr.strip().splitlines()[-1]
    assert last.startswith("ddslurm-worker: invalid_config: ")
    progress = read_record(layout.progress(0, 1), PROGRESS_SCHEMA)
    assert isinstance(progress, RecordOk)
    assert progress.payload.state == "failed"
    assert progress.payload.error is not None
    assert progress.payload.error.kind == "invalid_config"
    assert not layout.output_manifest(0, 1).exists()


def test_an_unset_api_key_variable_exits_2(servers: dict[str, Server], tmp_path: Path) -> None:
    plan = make_plan(CONFIG, records=4, shards=1)
    layout = prepare_run(tmp_path / "ws", plan, servers)
    env = {name: value for name, value in worker_env(tmp_path).items() if name != KEY_ENV}
    [outcome] = run_workers(layout, plan, env)
    assert outcome.returncode == 2, outcome.stderr[-3000:]
    assert outcome.stderr.strip().splitlines()[-1] == (
        f"ddslurm-worker: invalid_config: model alias 'critic' takes its API key from ${KEY_ENV}, which is unset or empty"
    )


SINGLE_ALIAS: dict[str, Any] = {"model_configs": CONFIG["model_configs"][:1], "columns": CONFIG["columns"][:3]}


def test_a_model_the_server_does_not_serve_reaches_the_status_message(
    servers: dict[str, Server], tmp_path: Path
) -> None:
    """A strict server serving another name: the host's model-not-found, recorded with its cause and fix."""
    other = start_server("another/name", "o0", dict(os.environ))
    try:
        plan = make_plan(SINGLE_ALIAS, records=4, shards=1, external=False)
        layout = prepare_run(tmp_path / "ws", plan, {**servers, "writer": other})
        [outcome] = run_workers(layout, plan, worker_env(tmp_path))
    finally:
        other.process.terminate()
        other.process.communicate(timeout=10)
    assert outcome.returncode == 3, outcome.stderr[-3000:]
    assert "No model configurations" not in outcome.stderr
    record = read_client_error(layout.client_error(0, 1))
    assert record is not None, outcome.stderr[-3000:]
    assert (record.kind, record.cause, record.exception, record.alias) == (
        "client_error",
        "model_not_found",
        "ModelNotFoundError",
        "writer",
    )
    assert record.message == "The specified model 'writer' could not be found while running health checks."
    assert record.message in outcome.stderr, "the host's own text"
    message = client_failure_message(outcome.returncode, record, ())
    assert message == (
        f"the client worker exited 3: ModelNotFoundError: {record.message[:-1]}; fix: set deployments.writer.model "
        "to the name the server serves (its /v1/models lists it)"
    )


def test_rewriting_the_only_model_config_does_not_warn(servers: dict[str, Server], tmp_path: Path) -> None:
    plan = make_plan(SINGLE_ALIAS, records=4, shards=1, external=False)
    layout = prepare_run(tmp_path / "ws", plan, servers)
    [outcome] = run_workers(layout, plan, worker_env(tmp_path))
    assert outcome.returncode == 0, outcome.stderr[-3000:]
    assert "model configuration" not in outcome.stderr, outcome.stderr[-3000:]
    assert not layout.client_error(0, 1).exists()


def test_tiktoken_never_downloads_in_the_worker(tmp_path: Path) -> None:
    script = (
        "import time, tiktoken\n"
        "from data_designer.slurm.runtime.worker import forbid_tiktoken_downloads\n"
        "forbid_tiktoken_downloads()\n"
        "started = time.perf_counter()\n"
        "try:\n"
        "    tiktoken.get_encoding('cl100k_base')\n"
        "except OSError as exc:\n"
        "    print('refused', round(time.perf_counter() - started, 3), exc)\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache")}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    words = done.stdout.split()
    assert words[0] == "refused", done.stdout + done.stderr
    assert float(words[1]) < 1.0
    assert "not downloading" in done.stdout


def wait_for_records(layout: RunLayout, shard: int, attempt: int, at_least: int, timeout_s: float = 120) -> None:
    path = layout.progress(shard, attempt)
    wait_for_record(path, PROGRESS_SCHEMA, timeout_s=timeout_s, accept=lambda p: p.records_done >= at_least)


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGTERM], ids=["SIGUSR1", "SIGTERM"])
def test_a_drained_attempt_publishes_its_complete_batches_and_the_next_fills_exactly_the_rest(
    servers: dict[str, Server], tmp_path: Path, signum: signal.Signals
) -> None:
    env = {**os.environ, KEY_ENV: "sekrit-critic-key"}
    slow = start_server("writer", "slow", env, "--latency-s", "0.15")
    try:
        records = 40
        plan = make_plan(CONFIG, records=records, shards=1, batch_size=5, concurrency=2, drain_grace_s=6)
        here = {**servers, "writer": slow}
        layout = prepare_run(tmp_path / "ws", plan, here)
        first = start_worker(layout, plan, 0, worker_env(tmp_path))
        wait_for_records(layout, 0, 1, at_least=5)
        first.send_signal(signum)
        _, stderr = first.communicate(timeout=120)
        assert first.returncode == 4, stderr[-3000:]

        partial = manifest_of(layout, 0, 1)
        produced = [(r.start, r.stop) for r in partial.ranges]
        assert 0 < partial.records < records
        assert not partial.complete
        assert partial.drained is not None
        assert partial.drained.signal == signum.name
        assert [(r.start, r.stop) for r in partial.assigned] == [(0, records)]
        first_rows = rows_of(layout, 0, 1)
        assert len(first_rows) == partial.records == sum(b - a for a, b in produced)
        assert sorted(row["_dd_index"] for row in first_rows) == [i for a, b in produced for i in range(a, b)]
        progress = read_record(layout.progress(0, 1), PROGRESS_SCHEMA)
        assert isinstance(progress, RecordOk)
        assert progress.payload.state == "partial"

        missing = list(missing_ranges((0, records), produced))
        prepare_attempt(layout, plan, here, shard=0, attempt=2, assigned=missing)
        second = start_worker(layout, plan, 0, worker_env(tmp_path), attempt=2)
        _, stderr = second.communicate(timeout=300)
        assert second.returncode == 0, stderr[-3000:]
        rest = manifest_of(layout, 0, 2)
        assert rest.complete
        assert [(r.start, r.stop) for r in rest.ranges] == missing
        indices = [row["_dd_index"] for row in first_rows + rows_of(layout, 0, 2)]
        assert sorted(indices) == list(range(records)), "no duplicate, no gap"
    finally:
        slow.process.terminate()
        slow.process.communicate(timeout=10)


def test_a_drain_before_any_batch_completes_publishes_an_empty_partial_manifest(
    servers: dict[str, Server], tmp_path: Path
) -> None:
    env = {**os.environ, KEY_ENV: "sekrit-critic-key"}
    slow = start_server("writer", "slower", env, "--latency-s", "1.0")
    try:
        plan = make_plan(CONFIG, records=20, shards=1, batch_size=10, concurrency=2, drain_grace_s=6)
        layout = prepare_run(tmp_path / "ws", plan, {**servers, "writer": slow})
        worker = start_worker(layout, plan, 0, worker_env(tmp_path))
        wait_for_record(layout.progress(0, 1), PROGRESS_SCHEMA, timeout_s=120, accept=lambda p: p.state == "generating")
        worker.send_signal(signal.SIGUSR1)
        _, stderr = worker.communicate(timeout=120)
        assert worker.returncode == 4, stderr[-3000:]
        manifest = manifest_of(layout, 0, 1)
        assert (manifest.records, manifest.parts, manifest.ranges, manifest.complete) == (0, (), (), False)
        assert manifest.drained is not None
        assert "published 0 of 20 records in 0 part(s)" in stderr
    finally:
        slow.process.terminate()
        slow.process.communicate(timeout=10)
