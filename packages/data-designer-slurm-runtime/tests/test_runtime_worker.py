"""The client worker's parts that need no host: argv, plan and endpoints checks, seed rewrite, Parquet parts, records.

The worker against the real host and real test servers is ``tests/test_host_worker.py``.
"""

from __future__ import annotations

import importlib
import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import faker
import numpy
import pyarrow as pa
import pytest

from data_designer.slurm.contracts import ClusterProfile, ExecutionPlan
from data_designer.slurm.contracts.records import (
    ENDPOINTS_SCHEMA,
    ENV_ATTEMPT_DIR,
    ENV_ENDPOINTS,
    PROGRESS_SCHEMA,
    PROVENANCE_COLUMNS,
    AliasEndpoints,
    AttemptRecord,
    EndpointsRecord,
    IndexRange,
    InputFile,
    InputsManifest,
    RecordSchema,
    SeedRewrite,
    SubmissionRecord,
    WorkerError,
)
from data_designer.slurm.planner import canonical_json, compile, load_run, resolve_config
from data_designer.slurm.runtime.store import (
    AttemptWriter,
    RecordOk,
    RunLayout,
    append_record,
    read_record,
    write_record_once,
)
from data_designer.slurm.runtime.testing import assign_attempt
from data_designer.slurm.runtime.worker._host import is_deterministic_failure, seed_generators
from data_designer.slurm.runtime.worker._inputs import (
    WorkerArgs,
    WorkerInputError,
    config_mapping,
    earlier_timings,
    load_inputs,
    parse_args,
)
from data_designer.slurm.runtime.worker._main import main
from data_designer.slurm.runtime.worker._output import (
    OutputConflict,
    ProgressWriter,
    Provenance,
    clashing_columns,
    consecutive,
    host_batch_files,
    output_schema,
    unified_schema,
    write_parts,
)

pq: Any = importlib.import_module("pyarrow.parquet")

RUN_ID = "toy-20260101T000000Z-0a1b2c"
CONFIG: dict[str, Any] = {
    "model_configs": [
        {"alias": "writer", "model": "m/writer", "provider": "p"},
        {"alias": "critic", "model": "m/critic", "provider": "p"},
    ],
    "columns": [
        {"name": "topic", "column_type": "sampler", "sampler_type": "category", "params": {"values": ["a", "b"]}},
        {"name": "q", "column_type": "llm-text", "prompt": "about {{ topic }}", "model_alias": "writer"},
        {"name": "r", "column_type": "llm-text", "prompt": "review {{ q }}", "model_alias": "critic"},
    ],
}


def make_plan(config: dict[str, Any] | None = None) -> ExecutionPlan:
    run = {
        "schema_version": 1,
        "name": "toy",
        "data_designer": {"inline": config or CONFIG},
        "records": 10,
        "sharding": {"shards": 2},
        "deployments": {
            "writer": {"engine": "command", "argv": ["serve", "{port}"], "model": "writer", "gpus_per_replica": 0}
        },
        "external": {"critic": {"endpoint": "https://api.example/v1", "api_key_env": "CRITIC_KEY"}},
        "client": {"concurrency": {"writer": 5}},
    }
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


ENDPOINTS = EndpointsRecord(
    aliases={
        "writer": AliasEndpoints(
            kind="deployed",
            base_urls=("http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"),
            model="writer",
            api_key_env=None,
        ),
        "critic": AliasEndpoints(
            kind="external", base_urls=("https://api.example/v1",), model="m/critic", api_key_env="CRITIC_KEY"
        ),
    }
)


def setup_run(tmp_path: Path, plan: ExecutionPlan | None = None, endpoints: EndpointsRecord = ENDPOINTS) -> RunLayout:
    layout = RunLayout.of(tmp_path / "ws", RUN_ID)
    layout.run_dir.mkdir(parents=True)
    layout.plan_record.write_bytes(canonical_json((plan or make_plan()).model_dump(mode="json")))
    AttemptWriter(layout, 1, 1).write_endpoints(endpoints)
    assign_attempt(layout, plan_digest=(plan or make_plan()).digest, shard=1, attempt=1, assigned=[(5, 10)])
    return layout


def args(layout: RunLayout, shard: int = 1, attempt: int = 1) -> WorkerArgs:
    return WorkerArgs(plan=layout.plan_record, shard=shard, attempt=attempt)


def test_argv_is_what_the_planner_builds() -> None:
    plan = make_plan()
    assert plan.allocation.client.argv[1:3] == ("-m", "data_designer.slurm.runtime.worker")
    bound = [part.replace("{shard}", "3").replace("{attempt}", "2") for part in plan.allocation.client.argv[3:]]
    assert parse_args(bound) == WorkerArgs(plan=Path("plan.json"), shard=3, attempt=2)


@pytest.mark.parametrize(
    "argv", [[], ["--plan", "p", "--shard", "x", "--attempt", "1"], ["--plan", "p", "--shard", "1"]]
)
def test_bad_argv_is_a_client_error(argv: list[str]) -> None:
    with pytest.raises(WorkerInputError, match="bad worker arguments"):
        parse_args(argv)


def test_inputs_bind_shard_range_endpoints_and_concurrency(tmp_path: Path) -> None:
    layout = setup_run(tmp_path)
    inputs = load_inputs(args(layout), {ENV_ATTEMPT_DIR: str(layout.attempt_dir(1, 1))})
    assert (inputs.shard.start, inputs.shard.stop) == (5, 10)
    assert [(r.start, r.stop) for r in inputs.ranges] == [(5, 10)]
    assert inputs.records == 5
    assert inputs.endpoints == ENDPOINTS.aliases
    assert inputs.concurrency == {"writer": 5, "critic": 32}
    assert inputs.writer == AttemptWriter(layout, 1, 1)


def test_a_plan_record_is_read_too(tmp_path: Path) -> None:
    layout = setup_run(tmp_path)
    plan = make_plan()
    layout.plan_record.unlink()
    write_record_once(layout.plan_record, RecordSchema("plan", 1, ExecutionPlan), plan)
    assert load_inputs(args(layout), {}).plan == plan


def test_an_edited_plan_is_refused(tmp_path: Path) -> None:
    layout = setup_run(tmp_path)
    data = json.loads(layout.plan_record.read_bytes())
    data["run"]["records"] = 11
    layout.plan_record.write_text(json.dumps(data))
    with pytest.raises(WorkerInputError, match="does not match its digest"):
        load_inputs(args(layout), {})


def test_a_plan_outside_a_run_directory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(canonical_json(make_plan().model_dump(mode="json")))
    with pytest.raises(WorkerInputError, match="not in a run directory"):
        load_inputs(WorkerArgs(plan=path, shard=0, attempt=1), {})


def test_an_unknown_shard_is_refused(tmp_path: Path) -> None:
    layout = setup_run(tmp_path)
    with pytest.raises(WorkerInputError, match="shard 7 is not in the plan"):
        load_inputs(args(layout, shard=7), {})


def test_another_attempt_directory_is_refused(tmp_path: Path) -> None:
    layout = setup_run(tmp_path)
    with pytest.raises(WorkerInputError, match=ENV_ATTEMPT_DIR):
        load_inputs(args(layout), {ENV_ATTEMPT_DIR: str(layout.attempt_dir(0, 1))})


def test_missing_or_mismatched_endpoints_are_refused(tmp_path: Path) -> None:
    layout = setup_run(tmp_path)
    with pytest.raises(WorkerInputError, match="no valid endpoints record"):
        load_inputs(args(layout), {ENV_ENDPOINTS: str(tmp_path / "none.json")})
    wrong = EndpointsRecord(aliases={**ENDPOINTS.aliases, "critic": ENDPOINTS.aliases["writer"]})
    write_record_once(tmp_path / "wrong.json", ENDPOINTS_SCHEMA, wrong)
    with pytest.raises(WorkerInputError, match="'critic' is external in the plan, deployed here"):
        load_inputs(args(layout), {ENV_ENDPOINTS: str(tmp_path / "wrong.json")})
    missing = EndpointsRecord(aliases={"writer": ENDPOINTS.aliases["writer"]})
    write_record_once(tmp_path / "missing.json", ENDPOINTS_SCHEMA, missing)
    with pytest.raises(WorkerInputError, match="no base URL for model alias 'critic'"):
        load_inputs(args(layout), {ENV_ENDPOINTS: str(tmp_path / "missing.json")})


def test_the_seed_dataset_is_read_from_the_snapshot(tmp_path: Path) -> None:
    config = {
        **CONFIG,
        "seed_config": {"source": {"seed_type": "local", "path": "/data/seed.parquet"}, "sampling_strategy": "shuffle"},
    }
    layout = setup_run(tmp_path, make_plan(config))
    seed = SeedRewrite(
        key_path="seed_config.source.path", original="/data/seed.parquet", snapshot="inputs/seed/seed.parquet"
    )
    file = InputFile(role="seed", source="/data/seed.parquet", path="inputs/seed/seed.parquet", sha256="0" * 64, size=1)
    write_record_once(
        layout.inputs_manifest, RecordSchema("inputs", 1, InputsManifest), InputsManifest(files=(file,), seed=seed)
    )
    inputs = load_inputs(args(layout), {})
    rewritten = config_mapping(inputs)
    assert rewritten["seed_config"]["source"]["path"] == str(layout.run_dir / "inputs/seed/seed.parquet")
    assert inputs.plan.run.data_designer.inline == config  # the plan's own mapping is untouched


def test_without_a_seed_rewrite_the_config_is_the_plan_s(tmp_path: Path) -> None:
    layout = setup_run(tmp_path)
    assert config_mapping(load_inputs(args(layout), {})) == CONFIG


def test_timings_come_from_the_attempt_and_submission_records(tmp_path: Path) -> None:
    layout = setup_run(tmp_path)
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    attempt = AttemptRecord(
        run_id=RUN_ID,
        plan_digest="d",
        shard=1,
        attempt=1,
        chunk=0,
        array_task=1,
        job_id="7",
        restart_count=0,
        hostname="n1",
        nodes=("n1",),
        node_addresses=("127.0.0.1",),
        supervisor_pid=1,
        supervisor_started_at=start,
        heartbeat_interval_s=5.0,
        servers_spawned_at=start + timedelta(seconds=1),
        servers_ready_at=start + timedelta(seconds=4.5),
        assigned=(IndexRange(start=5, stop=10),),
    )
    AttemptWriter(layout, 1, 1).write_attempt(attempt)
    schema = RecordSchema("submission", 1, SubmissionRecord)
    for minutes in (-10, -3, 5):
        record = SubmissionRecord(
            submitted_at=start + timedelta(minutes=minutes), jobs=(), submitted=1, recovered=0, sbatch_calls=1
        )
        append_record(layout.submissions_dir, schema, record)
    timings = earlier_timings(load_inputs(args(layout), {}))
    assert (timings.queue_wait_s, timings.server_start_s) == (180.0, 3.5)


def test_timings_are_unknown_without_records(tmp_path: Path) -> None:
    timings = earlier_timings(load_inputs(args(setup_run(tmp_path)), {}))
    assert (timings.queue_wait_s, timings.server_start_s) == (None, None)


def write_batches(directory: Path, tables: list[pa.Table]) -> list[Path]:
    directory.mkdir(parents=True)
    for number, table in enumerate(tables):
        pq.write_table(table, directory / f"batch_{number:05d}.parquet")
    (directory / ".batch_00099.parquet.tmp").write_text("ignored")
    return host_batch_files(directory)


def test_parts_carry_provenance_and_consecutive_global_indices(tmp_path: Path) -> None:
    layout = RunLayout.of(tmp_path, RUN_ID)
    files = write_batches(
        tmp_path / "host",
        [
            pa.table({"a": pa.array([1, 2], pa.int64()), "b": pa.array([None, None], pa.null())}),
            pa.table({"a": pa.array([3], pa.int64()), "b": pa.array(["x"], pa.string())}),
            pa.table({"a": pa.array([], pa.int64()), "b": pa.array([], pa.string())}),
            pa.table({"b": pa.array(["y"], pa.string()), "a": pa.array([4], pa.int64())}),
        ],
    )
    assert [path.name for path in files] == [f"batch_{n:05d}.parquet" for n in range(4)]
    schema = unified_schema(files)
    provenance = Provenance(run_id=RUN_ID, plan_digest="f" * 64, shard=1, attempt=2)
    parts = write_parts(layout, consecutive(files, 100), schema=schema, first_part=3, provenance=provenance)
    assert [(p.path, p.records, p.first_index) for p in parts] == [
        ("part-00003.parquet", 2, 100),
        ("part-00004.parquet", 1, 102),
        ("part-00005.parquet", 1, 103),
    ]
    rows = [row for part in parts for row in pq.read_table(layout.output_dir(1, 2) / part.path).to_pylist()]
    assert [(row["a"], row["b"], row["_dd_index"]) for row in rows] == [
        (1, None, 100),
        (2, None, 101),
        (3, "x", 102),
        (4, "y", 103),
    ]
    assert {(row["_dd_run_id"], row["_dd_plan_digest"], row["_dd_shard"], row["_dd_attempt"]) for row in rows} == {
        (RUN_ID, "f" * 64, 1, 2)
    }
    for part in parts:
        table = pq.read_table(layout.output_dir(1, 2) / part.path)
        assert table.schema == output_schema(schema)
        assert table.schema.names[-len(PROVENANCE_COLUMNS) :] == list(PROVENANCE_COLUMNS)
    with pytest.raises(OutputConflict):
        write_parts(layout, consecutive(files[:1], 100), schema=schema, first_part=3, provenance=provenance)


def test_provenance_names_are_reserved() -> None:
    assert clashing_columns(["a", "_dd_index", "_dd_shard"]) == ["_dd_index", "_dd_shard"]


def test_progress_is_replaced_as_the_worker_advances(tmp_path: Path) -> None:
    layout = RunLayout.of(tmp_path, RUN_ID)
    writer = ProgressWriter(layout, 1, 2, records_total=9)
    writer.publish("starting")
    writer.records_done = 4
    writer.publish("failed", WorkerError(kind="client_error", message="boom"))
    found = read_record(layout.progress(1, 2), PROGRESS_SCHEMA)
    assert isinstance(found, RecordOk)
    assert (found.payload.state, found.payload.records_done, found.payload.records_total) == ("failed", 4, 9)
    assert found.payload.error == WorkerError(kind="client_error", message="boom")


def test_seeding_makes_every_sampler_generator_repeat() -> None:
    def draw() -> tuple[list[float], float, str]:
        return list(numpy.random.random(3)), random.random(), faker.Faker().name()

    seed_generators(2**127 + 12345)
    first = draw()
    seed_generators(2**127 + 12345)
    assert draw() == first
    seed_generators(2**127 + 12346)
    assert draw() != first


def test_rejection_sampling_anywhere_in_the_chain_is_deterministic() -> None:
    class RejectionSamplingError(Exception):
        pass

    outer = RuntimeError("generation failed")
    outer.__cause__ = RuntimeError("wrapped")
    outer.__cause__.__context__ = RejectionSamplingError("too tight")
    assert is_deterministic_failure(outer)
    assert not is_deterministic_failure(RuntimeError("server died"))


def test_main_reports_bad_inputs_as_a_client_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = setup_run(tmp_path)
    code = main(["--plan", str(layout.plan_record), "--shard", "9", "--attempt", "1"])
    assert code == 3
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "ddslurm-worker: client_error: shard 9 is not in the plan (it has 2 shards)"
    )


def test_a_progress_write_failure_is_logged_not_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = RunLayout.of(tmp_path, RUN_ID)
    layout.attempt_dir(1, 2).parent.mkdir(parents=True)
    layout.attempt_dir(1, 2).write_text("a file where the attempt directory should be")
    assert not ProgressWriter(layout, 1, 2, records_total=1).publish("generating")
    assert "progress.json not written" in capsys.readouterr().err


def test_the_assigned_ranges_come_from_attempt_json(tmp_path: Path) -> None:
    layout = setup_run(tmp_path)
    assign_attempt(layout, plan_digest="d", shard=1, attempt=2, assigned=[(5, 6), (8, 10)])
    AttemptWriter(layout, 1, 2).write_endpoints(ENDPOINTS)
    inputs = load_inputs(args(layout, attempt=2), {})
    assert [(r.start, r.stop) for r in inputs.ranges] == [(5, 6), (8, 10)]
    assert inputs.records == 3


@pytest.mark.parametrize("assigned", [[], [(4, 6)], [(8, 10), (5, 6)], [(5, 11)]], ids=str)
def test_assigned_ranges_outside_the_shard_or_unsorted_are_refused(
    tmp_path: Path, assigned: list[tuple[int, int]]
) -> None:
    layout = setup_run(tmp_path)
    assign_attempt(layout, plan_digest="d", shard=1, attempt=2, assigned=assigned)
    AttemptWriter(layout, 1, 2).write_endpoints(ENDPOINTS)
    with pytest.raises(WorkerInputError, match="assigns"):
        load_inputs(args(layout, attempt=2), {})


def test_without_attempt_json_the_worker_does_not_guess_its_ranges(tmp_path: Path) -> None:
    layout = setup_run(tmp_path)
    AttemptWriter(layout, 1, 3).write_endpoints(ENDPOINTS)
    with pytest.raises(WorkerInputError, match="no valid attempt record"):
        load_inputs(args(layout, attempt=3), {})
