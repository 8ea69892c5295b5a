"""Where one shard's time goes on the local Slurm cluster, per shard of a real run.

A run is submitted with the real ``data-designer slurm execute`` (quick: 2 shards of 8 records; full: 4
shards of 100), with one in-tree test server (zero latency) as a ``command`` deployment and the real Data
Designer client worker, then polled until every shard ended. For each shard, from what the attempt
recorded (``attempt.json``, the result manifest, the servers' request logs and the scheduler's task times):

* queue wait: the run's submission to the supervisor's start (the manifest's ``queue_wait_s``);
* supervisor start: Slurm's start time of the task to the supervisor's own start (interpreter and imports;
  Slurm prints whole seconds, so this is rounded up to 1 s at worst);
* supervisor overhead: the supervisor's start to its servers being spawned (target: under 0.5 s);
* server spawn: spawn to ready, slowest replica (the test server's Python start);
* readiness lag: the supervisor seeing the server ready minus the server's own ready time (target: at most
  the supervisor's poll interval + 0.1 s);
* host import: the worker importing the ``data-designer`` host;
* time to first request: the client worker's start to the first completion request the servers logged;
* generation throughput: records over the host's generation time.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks._cluster_run import execute, slurm_env, writer_run
from benchmarks._harness import SLURM_CLUSTER, Benchmark, Figure, RunContext, Target
from data_designer.slurm.contracts import TERMINAL_TASK_STATES, ExecuteResult
from data_designer.slurm.contracts.records import (
    ATTEMPT_SCHEMA,
    MANIFEST_SCHEMA,
    STATUS_SCHEMA,
    AttemptRecord,
    OutputManifest,
    StatusRecord,
)
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.supervisor import DEFAULT_POLL_S

POLL_TIMEOUT_S = 300.0
SUPERVISOR_OVERHEAD = Target.at_most(0.5)
READINESS_LAG = Target.at_most(DEFAULT_POLL_S + 0.1)


def execute_run(scratch: Path, shards: int, records: int) -> ExecuteResult:
    requests = scratch / "requests"
    requests.mkdir(parents=True)
    document = writer_run(
        name="bench-shard",
        records=records,
        shards=shards,
        model="bench",
        server_flags=("--request-log", f"{requests}/requests-{{port}}.jsonl"),
        client={"batch_size": 50},
    )
    return execute(scratch, document)


def wait(layout: RunLayout, shards: int, scheduler: SlurmScheduler, job_ids: list[str]) -> dict[int, str]:
    """Every shard's status (all must succeed); returns each shard's Slurm start time (array index = shard)."""
    deadline = time.monotonic() + POLL_TIMEOUT_S
    all_terminal_at: float | None = None
    while True:
        statuses: dict[int, StatusRecord] = {}
        for shard in range(shards):
            found = read_record(layout.status(shard, 1), STATUS_SCHEMA)
            if isinstance(found, RecordOk):
                statuses[shard] = found.payload
        tasks = scheduler.observe(job_ids).tasks
        if tasks and all(t.state in TERMINAL_TASK_STATES for t in tasks):
            all_terminal_at = all_terminal_at or time.monotonic()
        if len(statuses) == shards or (all_terminal_at is not None and time.monotonic() - all_terminal_at > 5):
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the run did not end within {POLL_TIMEOUT_S}s: {layout.run_dir}")
        time.sleep(1)
    failed = {s: f"{r.status}: {r.message}" for s, r in statuses.items() if r.status != "succeeded"}
    if failed or len(statuses) != shards:
        raise RuntimeError(f"shards did not all succeed: {failed or statuses}; see {layout.run_dir}")
    return {(t.array_index or 0): t.start_time or "" for t in tasks}


def read_payload(path: Path, schema: Any) -> Any:
    found = read_record(path, schema)
    if not isinstance(found, RecordOk):
        raise RuntimeError(f"unreadable record {path}: {found}")
    return found.payload


def first_request(request_log_dir: Path, ports: set[int]) -> float | None:
    """The earliest completion request (Unix time) any of ``ports`` logged."""
    times: list[float] = []
    for port in ports:
        path = request_log_dir / f"requests-{port}.jsonl"
        if path.is_file():
            entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            times += [float(e["time"]) for e in entries if str(e["path"]).endswith("/completions")]
    return min(times, default=None)


def shard_figures(
    shard: int, attempt: AttemptRecord, manifest: OutputManifest, slurm_start: str, log_dir: Path
) -> list[Figure]:
    label = f"shard {shard}"
    timings = manifest.timings
    figures = [Figure(f"{label}: queue wait", timings.queue_wait_s or 0.0, "s", note="submission to supervisor start")]
    if slurm_start:
        started = datetime.fromisoformat(slurm_start).astimezone(attempt.supervisor_started_at.tzinfo)
        supervisor_start = (attempt.supervisor_started_at - started).total_seconds()
        figures.append(
            Figure(f"{label}: supervisor start", supervisor_start, "s", note="Slurm start (whole s) to supervisor")
        )
    if attempt.servers_spawned_at is not None:
        overhead = (attempt.servers_spawned_at - attempt.supervisor_started_at).total_seconds()
        figures.append(Figure(f"{label}: supervisor overhead before spawning", overhead, "s", SUPERVISOR_OVERHEAD))
    startups = [r.startup_s for r in attempt.replicas if r.startup_s is not None]
    if startups:
        figures.append(Figure(f"{label}: server spawn to ready", max(startups), "s", note="slowest replica"))
    lags = [r.readiness_lag_s for r in attempt.replicas if r.readiness_lag_s is not None]
    if lags:
        note = f"poll interval {DEFAULT_POLL_S}s"
        figures.append(Figure(f"{label}: readiness lag", max(lags), "s", READINESS_LAG, note=note))
    figures.append(Figure(f"{label}: host import", timings.host_import_s, "s"))
    first = first_request(log_dir, {r.port for r in attempt.replicas if r.port is not None})
    if first is not None and attempt.client_started_at is not None:
        figures.append(
            Figure(
                f"{label}: time to first request",
                first - attempt.client_started_at.timestamp(),
                "s",
                note="client start to first completion",
            )
        )
    note = f"{manifest.records} records in {timings.generation_s:.2f}s, zero-latency test server"
    figures.append(Figure(f"{label}: generation throughput", timings.records_per_s, "records/s", note=note))
    return figures


def run(ctx: RunContext) -> list[Figure]:
    shards, records = (2, 16) if ctx.quick else (4, 400)
    result = execute_run(ctx.scratch, shards, records)
    layout = RunLayout.of(Path(result.run_dir).parent.parent, result.run_id)
    scheduler = SlurmScheduler(SubprocessRunner(overrides=slurm_env()))
    job_ids = [job.job_id for job in result.jobs]
    try:
        slurm_starts = wait(layout, shards, scheduler, job_ids)
    finally:
        scheduler.cancel(job_ids, confirm_timeout_s=60)
    figures: list[Figure] = []
    for shard in range(shards):
        attempt = read_payload(layout.attempt_record(shard, 1), ATTEMPT_SCHEMA)
        manifest = read_payload(layout.output_manifest(shard, 1), MANIFEST_SCHEMA)
        figures += shard_figures(shard, attempt, manifest, slurm_starts.get(shard, ""), ctx.scratch / "requests")
    return figures


BENCHMARK = Benchmark(
    summary="per-shard breakdown of a real run on the local Slurm cluster (queue, supervisor, servers, client)",
    run=run,
    requires=(SLURM_CLUSTER,),
)
