"""Realistic run directories written in seconds, for testing and benchmarking readers (``status``) without Slurm.

:func:`write_run_directory` compiles a real plan (:func:`writer_run`: alias ``writer`` on one test-server
replica) with the shard count asked for, and writes what ``execute`` writes (``inputs/``, ``plan.json``,
``run.json``, ``submissions/0001.json``), then for every shard the files its outcome leaves
(:data:`ShardOutcome`): a finished shard's claim, attempt, port, endpoints, heartbeat, progress, output part,
request evidence (``requests.json``: one request per record, latencies over three buckets) and manifest, status and
logs, a running shard's live records, a preflight failure's ``slurm-*.err``...
Every file is written by the store's verbs (``RunLayout``'s paths, the store's encoding), so every record is a real
one and ``read_record`` answers ``RecordOk``.

Speed over durability: the run-level records are written as ``execute`` writes them, but a shard's files by a
``AttemptWriter(durable=False)``: each created exclusively in place, without the temporary file, ``fsync`` and
``link(2)``. A test fixture needs the bytes, not crash safety, and the fsyncs would make 10,000 shards take
minutes instead of seconds; the exclusive create still refuses to overwrite anything.

:func:`register_run_jobs` puts the run's array jobs into a :class:`FakeCluster` (or :class:`FakeSlurm`) with
each task in the state its shard's outcome implies (:data:`OUTCOME_TASK_STATES`), so ``squeue`` and
``sacct`` answer for them. The part files are placeholders, not Parquet: their sha256 and size match the
manifest, but nothing can read them as a table.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import platform
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from data_designer.slurm.contracts import (
    ClusterFacts,
    ClusterProfile,
    ExecutionPlan,
    InternalError,
    ReplicaPlan,
    ShardPlan,
    SubmissionChunk,
)
from data_designer.slurm.contracts import __version__ as runtime_version
from data_designer.slurm.contracts.records import (
    ATTEMPT_COLUMN,
    EXIT_CODES,
    INDEX_COLUMN,
    PLAN_DIGEST_COLUMN,
    PROVENANCE_COLUMNS,
    RUN_ID_COLUMN,
    SHARD_COLUMN,
    AliasEndpoints,
    AliasRequests,
    AttemptRecord,
    ClaimOwner,
    ColumnType,
    Drained,
    EndpointsRecord,
    FinalStatus,
    HeartbeatRecord,
    Histogram,
    IndexRange,
    InputFile,
    InputsManifest,
    ModelUsage,
    OutputManifest,
    Phase,
    PortRecord,
    ReplicaRecord,
    ReplicaRequests,
    RequestEvidence,
    Routing,
    RunRecord,
    StatusRecord,
    SubmittedJob,
    Timings,
    WorkerProgress,
    WorkerState,
)
from data_designer.slurm.planner import bind_submission, compile, load_run, resolve_config
from data_designer.slurm.runtime.store import (
    PRIVATE_MODES,
    AttemptWriter,
    Clock,
    RunId,
    RunLayout,
    create_run_directory,
    format_timestamp,
    read_run_record,
    read_submissions,
    record_submission,
    submission_binding,
    system_clock,
    write_batch_log,
    write_input,
    write_inputs_manifest,
    write_plan,
    write_run_record,
)
from data_designer.slurm.runtime.supervisor import DEFAULT_HEARTBEAT_S, LOOPBACK, bind_host, log_step, step_name
from data_designer.slurm.runtime.testing._fake_state import Behaviour, FakeCluster, FakeJob, FakeTask
from data_designer.slurm.runtime.testing._plans import writer_run

if TYPE_CHECKING:  # pyarrow is imported by the functions that write real Parquet parts, not with this module
    import pyarrow as pa

ShardOutcome = Literal["succeeded", "running", "pending", "partial", "failed_server", "cancelled", "no_attempt"]
"""What a shard's first attempt left: ``succeeded`` (everything a finished shard leaves), ``running`` (live
heartbeat "now", progress partway, no manifest or status), ``pending`` (nothing), ``partial`` (drained on the
time-limit warning: a partial manifest of the first half, status ``time_limit``), ``failed_server`` (the
server exited before it was ready: status ``server_failed_to_start``), ``cancelled`` (the client was killed
by the cancel before it could drain: progress partway, status ``cancelled``, no manifest), ``no_attempt``
(the batch script's preflight import failed: nothing under ``shards/``, a ``slurm-<job>_<task>.err``)."""

SHARD_OUTCOMES: tuple[ShardOutcome, ...] = get_args(ShardOutcome)

OUTCOME_TASK_STATES: dict[ShardOutcome, tuple[str, int, int]] = {
    "succeeded": ("COMPLETED", 0, 0),
    "running": ("RUNNING", 0, 0),
    "pending": ("PENDING", 0, 0),
    "partial": ("FAILED", 13, 0),
    "failed_server": ("FAILED", 10, 0),
    "cancelled": ("CANCELLED by 0", 0, 15),
    "no_attempt": ("FAILED", 6, 0),
}
"""The Slurm task state, exit code and signal (``sacct`` ExitCode ``code:signal``) each outcome implies: the
supervisor's exit code for a classified ending, the preflight's 6 for ``no_attempt``, and ``scancel``'s
``CANCELLED by <uid>`` with signal 15 for a cancel."""

RUN_NAME = "status-bench"
PREFLIGHT_ERROR_TEXT = (
    "Traceback (most recent call last):\n"
    '  File "<string>", line 1, in <module>\n'
    "ModuleNotFoundError: No module named 'data_designer.slurm.runtime'\n"
)
"""What the batch script's preflight import leaves in ``slurm-<job>_<task>.err`` when the runtime is missing."""
SERVER_FAILURE_LINE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of "
    "79.25 GiB of which 1.02 GiB is free."
)
"""The last line of a ``failed_server`` shard's server log: the cause a reader should show."""
HOST_VERSION = "1.0.0rc1"
_DATA_COLUMNS = (ColumnType(name="a", type="string"),)
_PROVENANCE_TYPES = ("int64", "string", "string", "int32", "int32")
_SUBMIT_DELAY = timedelta(seconds=3)
_FIRST_START = timedelta(seconds=90)
_OPERATION = "testing.write_run_directory"


def write_run_directory(
    root: Path,
    *,
    shards: int,
    records_per_shard: int = 10,
    outcome: Callable[[int], ShardOutcome] | None = None,
    clock: Clock | None = None,
    job_id_start: int = 1000,
    job_ids: Sequence[str] | None = None,
    max_array_size: int = 1001,
    max_concurrent_shards: int | None = None,
    parquet_parts: bool = False,
    part_text_bytes: int = 0,
    part_write_options: Mapping[str, object] | None = None,
) -> RunLayout:
    """Write a run of ``shards`` shards under the workspace ``root`` (absolute) and return its layout.

    ``outcome(shard)`` says what each shard left (default: every shard succeeded). ``clock()`` is "now": the run
    was created about two hours before it, finished attempts ended before it, a running shard's heartbeat is
    exactly it. The plan is chunked by ``max_array_size`` (the cluster's ``MaxArraySize``, in the compile facts and
    the run record), each chunk's array throttled to ``max_concurrent_shards`` when given. With ``parquet_parts`` the
    output parts are real Parquet (column ``a`` = ``"r<index>"`` and the provenance columns), as ``merge`` reads them;
    otherwise they are placeholders with matching sizes and digests; ``part_text_bytes`` makes each value of ``a``
    about that much longer (:func:`parquet_part`), for parts of a realistic size, and ``part_write_options`` are
    passed to ``pyarrow.parquet.write_table`` (e.g. ``write_page_index=True``, small ``row_group_size`` and
    ``data_page_size``: parts with page indexes, several row groups and pages). Chunk ``c`` has job id ``job_ids[c]`` (one per chunk, e.g. real held jobs' ids), else
    ``job_id_start + c``. The run id is deterministic (``status-bench-<time>-<hex of the shard count>``): one run
    per root and shard count.
    """
    now = (clock or system_clock)()
    records = shards * records_per_shard
    created = (now - timedelta(hours=2) - _generation(records_per_shard)).replace(microsecond=0)
    layout = RunLayout(root, RunId(RUN_NAME, created, f"{shards % 0x1000000:06x}"))
    facts = ClusterFacts(gpus_per_node=2, max_array_size=max_array_size)
    plan, run_text = _compile(root, shards, records, facts, max_concurrent_shards)
    binding = submission_binding(layout)
    unit = bind_submission(plan, binding)
    create_run_directory(layout, PRIVATE_MODES)
    _write_inputs(layout, run_text, created)
    write_plan(layout, plan, operation=_OPERATION)
    record = RunRecord(
        run_id=str(layout.run_id),
        name=RUN_NAME,
        created_at=created,
        run_file=str(root / f"{RUN_NAME}.json"),
        profile_file=str(root / "profile.yaml"),
        cluster="local",
        facts=facts,
        plan_digest=plan.digest,
        config_digest=plan.config_digest,
        shards=len(plan.shards),
        records=records,
        binding=binding,
        unit=unit,
    )
    write_run_record(layout, record, clock=lambda: created, operation=_OPERATION)
    submitted = created + _SUBMIT_DELAY
    ids = [str(job_id_start + chunk.chunk) for chunk in unit.chunks] if job_ids is None else list(job_ids)
    if len(ids) != len(unit.chunks):
        raise InternalError(
            f"{len(ids)} job id(s) for {len(unit.chunks)} chunk(s) (MaxArraySize {max_array_size})",
            code="job_ids_mismatch",
        )
    jobs = tuple(_submitted_job(chunk, job_id) for chunk, job_id in zip(unit.chunks, ids, strict=True))
    record_submission(layout, jobs, sbatch_calls=len(jobs), clock=lambda: submitted, operation=_OPERATION)
    writer = _ShardWriter(
        layout,
        plan,
        now=now,
        submitted=submitted,
        parquet=parquet_parts,
        text_bytes=part_text_bytes,
        write_options=part_write_options,
    )
    shard_plans = {s.shard: s for s in plan.shards}
    pick = outcome or _all_succeeded
    for chunk, job in zip(unit.chunks, jobs, strict=True):
        for task in chunk.tasks:
            writer.write(shard_plans[task.shard], job, task.index, pick(task.shard))
    return layout


def outcome_cycle(outcomes: Sequence[ShardOutcome]) -> Callable[[int], ShardOutcome]:
    """An ``outcome`` for :func:`write_run_directory` that gives shard ``k`` ``outcomes[k % len(outcomes)]``."""
    chosen = tuple(outcomes)
    if not chosen:
        raise InternalError("outcome_cycle needs at least one outcome", code="no_outcomes")
    return lambda shard: chosen[shard % len(chosen)]


def write_shard_outcomes(
    layout: RunLayout, *, outcome: Callable[[int], ShardOutcome] | None = None, clock: Clock | None = None
) -> None:
    """Write what each shard's first attempt leaves (``outcome(shard)``, default succeeded) into a run that
    ``execute`` or ``benchmark run`` already wrote and submitted (its ``plan.json``, ``run.json`` and
    ``submissions/``, read back here), as :func:`write_run_directory` does for the runs it writes itself. The
    attempts start after the run's first submission; ``clock()`` ("now") times a ``running`` shard's heartbeat.
    The run must have no attempt yet: every file is created exclusively."""
    plan = ExecutionPlan.model_validate_json(layout.plan_record.read_bytes())
    run = read_run_record(layout, operation=_OPERATION)
    submissions = read_submissions(layout)
    if not submissions:
        raise InternalError(f"{str(layout.run_dir)!r} has no submission record", code="not_submitted")
    jobs = {job.job_name: job for submission in submissions for job in submission.jobs}
    now = (clock or system_clock)()
    writer = _ShardWriter(layout, plan, now=now, submitted=submissions[0].submitted_at)
    shard_plans = {s.shard: s for s in plan.shards}
    pick = outcome or _all_succeeded
    for chunk in run.unit.chunks:
        for task in chunk.tasks:
            writer.write(shard_plans[task.shard], jobs[chunk.job_name], task.index, pick(task.shard))


def register_run_jobs(
    cluster: FakeCluster, layout: RunLayout, *, outcome: Callable[[int], ShardOutcome] | None = None
) -> tuple[str, ...]:
    """Add the run's submitted jobs (read back from ``run.json`` and ``submissions/``) to ``cluster``, every task
    in the state ``outcome(shard)`` implies (:data:`OUTCOME_TASK_STATES`; pass the outcome the directory was
    written with). Tasks stay in those states until a test changes them: pending tasks never start and running
    ones end only at the plan's time limit. Returns the job ids; later ``sbatch`` ids follow them."""
    run = read_run_record(layout, operation=_OPERATION)
    job_ids = {job.job_name: job.job_id for submission in read_submissions(layout) for job in submission.jobs}
    allocation = ExecutionPlan.model_validate_json(layout.plan_record.read_bytes()).allocation
    pick = outcome or _all_succeeded
    submit = cluster.now - 3600.0  # long enough ago that accounting shows the jobs, not placeholders
    frozen = Behaviour(pending_s=float("inf"), run_s=float("inf"))
    limit = float(allocation.time_limit_s)
    for chunk in run.unit.chunks:
        job_id = int(job_ids[chunk.job_name])
        if job_id in cluster.jobs:
            raise InternalError(f"the fake cluster already has job {job_id}", code="fake_job_exists")
        tasks: dict[int | None, FakeTask] = {
            t.index: FakeTask(index=t.index, eligible=float("inf")) for t in chunk.tasks
        }
        throttle = _int(chunk.array_spec.partition("%")[2])
        script = run.unit.script
        job = FakeJob(job_id, chunk.job_name, script, frozen, submit, limit, allocation.requeue, throttle, tasks)
        cluster.jobs[job_id] = job
        for binding in chunk.tasks:
            _set_task(cluster, tasks[binding.index], OUTCOME_TASK_STATES[pick(binding.shard)], start=submit + 60.0)
    # Keep sbatch's deterministic ids clear of the registered ones.
    cluster._next_id = max(cluster._next_id, *(j + 1 for j in cluster.jobs))
    return tuple(job_ids[c.job_name] for c in run.unit.chunks)


# -- the run ----------------------------------------------------------------------------------------------------


def _compile(
    root: Path, shards: int, records: int, facts: ClusterFacts, throttle: int | None
) -> tuple[ExecutionPlan, str]:
    sections: dict[str, Any] = {} if throttle is None else {"submission": {"max_concurrent_shards": throttle}}
    document = writer_run(RUN_NAME, records=records, shards=shards, replicas=1, **sections)
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    profile = ClusterProfile.model_validate(
        {
            "workspace_root": str(root),
            "account": "ddtest",
            "partitions": {"gpu": "gpu", "cpu": "cpu"},
            "gpus_per_node": 2,
            "compute_python": {"interpreter": sys.executable},
            "default_time_limit": "01:00:00",
        }
    )
    spec = load_run(text, file=str(root / f"{RUN_NAME}.json"))
    plan = compile(spec, profile, cluster="local", config=resolve_config(spec), facts=facts)
    return plan, text


def _write_inputs(layout: RunLayout, run_text: str, when: datetime) -> None:
    data = run_text.encode("utf-8")
    name = f"{RUN_NAME}.json"
    write_input(layout, ("run", name), data, mode=PRIVATE_MODES.file, operation=_OPERATION)
    digest = hashlib.sha256(data).hexdigest()
    file = InputFile(
        role="run", source=str(layout.root / name), path=f"inputs/run/{name}", sha256=digest, size=len(data)
    )
    write_inputs_manifest(layout, InputsManifest(files=(file,)), clock=lambda: when, operation=_OPERATION)


def _submitted_job(chunk: SubmissionChunk, job_id: str) -> SubmittedJob:
    return SubmittedJob(
        chunk=chunk.chunk,
        generation=chunk.generation,
        index_offset=chunk.index_offset,
        job_name=chunk.job_name,
        job_id=job_id,
        array_spec=chunk.array_spec,
        recovered=False,
    )


# -- one shard ----------------------------------------------------------------------------------------------------


class _ShardWriter:
    """Writes the files one shard's first attempt leaves, for each outcome."""

    def __init__(
        self,
        layout: RunLayout,
        plan: ExecutionPlan,
        *,
        now: datetime,
        submitted: datetime,
        parquet: bool = False,
        text_bytes: int = 0,
        write_options: Mapping[str, object] | None = None,
    ) -> None:
        self.layout, self.plan, self.now, self.submitted = layout, plan, now, submitted
        self.parquet = parquet
        self.text_bytes = text_bytes
        self.write_options = write_options
        self.run_id = str(layout.run_id)
        self.replica: ReplicaPlan = plan.allocation.replicas[0]
        self.endpoint = next(e for e in plan.allocation.client.endpoints if e.alias == self.replica.alias)
        self.server_log = log_step(self.replica)
        self.columns = (
            *_DATA_COLUMNS,
            *(ColumnType(name=n, type=t) for n, t in zip(PROVENANCE_COLUMNS, _PROVENANCE_TYPES, strict=True)),
        )
        self.arrow_schema = "\n".join(f"{c.name}: {c.type}" for c in self.columns)

    def write(self, shard: ShardPlan, job: SubmittedJob, index: int, outcome: ShardOutcome) -> None:
        if outcome == "pending":
            return
        if outcome == "no_attempt":
            write_batch_log(self.layout, job.job_name, index, "out", b"")
            write_batch_log(self.layout, job.job_name, index, "err", PREFLIGHT_ERROR_TEXT.encode())
            return
        _Attempt(self, shard, job, index, outcome).write()


class _Attempt:
    """Attempt 1 of one shard: identities, timeline and records."""

    def __init__(
        self, writer: _ShardWriter, shard: ShardPlan, job: SubmittedJob, index: int, outcome: ShardOutcome
    ) -> None:
        self.w, self.shard, self.job, self.index, self.outcome = writer, shard, job, index, outcome
        k = shard.shard
        self.k = k
        self.node = f"gpu{k % 96 + 1:03d}"
        self.node_address = f"10.1.{k // 96 % 250}.{k % 96 + 1}"
        self.address = LOOPBACK if writer.replica.bind == "loopback" else self.node_address
        self.pid = 20_000 + k % 40_000
        self.port = 30_000 + k % 20_000
        self.base_url = f"http://{self.address}:{self.port}/v1"
        self.total = shard.records
        self.half = shard.records // 2
        self.gen_s = _generation(shard.records).total_seconds()
        if outcome == "running":
            self.start = writer.now - timedelta(seconds=600 + k % 60)
        else:  # staggered over ten minutes after the submission
            self.start = writer.submitted + _FIRST_START + timedelta(seconds=k % 600)
        self.files = AttemptWriter(writer.layout, k, 1, durable=False)

    def at(self, seconds: float) -> datetime:
        """The time ``seconds`` after the supervisor started."""
        return self.start + timedelta(seconds=seconds)

    def write(self) -> None:
        outcome = self.outcome
        self._claim()
        client = outcome != "failed_server"
        self._attempt(ready=client)
        self._port()
        if client:
            self.files.at(self.at(34.51)).write_endpoints(self._endpoints())
        {
            "succeeded": self._succeeded,
            "running": self._running,
            "partial": self._partial,
            "failed_server": self._failed_server,
            "cancelled": self._cancelled,
        }[outcome]()

    # -- the outcomes

    def _succeeded(self) -> None:
        finished = self._worker_started + self._worker_s(self.gen_s)
        self._progress("succeeded", self.total, finished)
        self._output((IndexRange(self.shard.start, self.shard.stop),), self.gen_s, finished, None)
        self._status("succeeded", "the client worker finished and wrote its manifest", finished, records=self.total)
        self._logs(finished, "succeeded: the client worker finished and wrote its manifest", client=True, done=True)

    def _running(self) -> None:
        self._heartbeat("client_running", self.w.now)
        self._progress("generating", self.half, self.w.now - timedelta(seconds=2))
        self._logs(None, None, client=True, done=False)

    def _partial(self) -> None:
        warned = self._worker_started + timedelta(seconds=8.0 + 0.6 * self.gen_s)
        published = warned + timedelta(seconds=2.1)
        drained = Drained(
            signal="SIGUSR1",
            requested_at=warned,
            published_at=published,
            settled=True,
            message="stopped on the time-limit warning (SIGUSR1): new requests were held and every in-flight "
            "request finished; the missing indices are left for the next attempt",
        )
        produced = (IndexRange(self.shard.start, self.shard.start + self.half),) if self.half else ()
        self._progress("partial", self.half, published)
        self._output(produced, 0.6 * self.gen_s, published, drained)
        message = (
            f"the time-limit warning (SIGUSR1) arrived; drained in 2.6s: {self.half} of {self.total} records "
            "published, the rest is left for the next attempt"
        )
        self._status("time_limit", message, published, records=self.half, signal="SIGUSR1", drain_s=2.6)
        self._logs(published, f"time_limit: {message}", client=True, done=False)

    def _failed_server(self) -> None:
        exited = self.at(14.3)
        lines = self._server_lines(failed=True)
        message = f"server {step_name(self.w.replica)} exited 1 before it was ready (13.1s after it was started)"
        self._status("server_failed_to_start", message, exited, step=self.w.server_log, tail=lines)
        self._logs(exited, f"server_failed_to_start: {message}", client=False, done=False)

    def _cancelled(self) -> None:
        cancelled = self._worker_started + timedelta(seconds=8.0 + 0.3 * self.gen_s)
        self._progress("generating", self.half, cancelled - timedelta(seconds=1))
        message = (
            "the job was cancelled (JobState=CANCELLED, Reason=None); the client worker was ended by signal 15 "
            "before it could drain, nothing published"
        )
        tail = self._client_lines(done=False)
        self._status(
            "cancelled", message, cancelled, step="client", tail=tail, records=0, signal="SIGTERM", drain_s=0.8
        )
        self._logs(cancelled, f"cancelled: {message}", client=True, done=False)

    # -- records

    @property
    def _worker_started(self) -> datetime:
        return self.at(35.0)

    @staticmethod
    def _worker_s(generation_s: float) -> timedelta:
        return timedelta(seconds=6.2 + 1.8 + generation_s + 0.4)

    def _claim(self) -> None:
        owner = ClaimOwner(
            host=self.node,
            pid=self.pid,
            job_id=self.job.job_id,
            array_task=self.index,
            attempt=1,
            restart_count=0,
            time=self.start,
        )
        self.files.claim(owner)

    def _port_record(self) -> PortRecord:
        return PortRecord(
            alias=self.w.replica.alias,
            replica=self.w.replica.replica,
            task=0,
            bind_host=bind_host(self.w.replica),
            port=self.port,
            hostname=self.node,
            node=self.node,
            step_gpus="0",
            cuda_visible_devices="0",
            pid=self.pid + 7,
            probed_at=self.at(2.0),
        )

    def _port(self) -> None:
        record = self._port_record()
        self.files.at(record.probed_at).write_port(record)

    def _attempt(self, *, ready: bool) -> None:
        replica = ReplicaRecord(
            alias=self.w.replica.alias,
            replica=self.w.replica.replica,
            step=step_name(self.w.replica),
            log=f"logs/{self.w.server_log}.log",
            nodes=(self.node,),
            address=self.address,
            port=self.port if ready else None,
            ports=(self._port_record(),) if ready else (),
            base_url=self.base_url if ready else None,
            spawned_at=self.at(1.2),
            ready_at=self.at(34.5) if ready else None,
            startup_s=33.3 if ready else None,
            readiness_lag_s=0.004 if ready else None,
        )
        record = AttemptRecord(
            run_id=self.w.run_id,
            plan_digest=self.w.plan.digest,
            shard=self.k,
            attempt=1,
            chunk=self.job.chunk,
            array_task=self.index,
            job_id=self.job.job_id,
            restart_count=0,
            hostname=self.node,
            nodes=(self.node,),
            node_addresses=(self.node_address,),
            supervisor_pid=self.pid,
            supervisor_started_at=self.start,
            heartbeat_interval_s=DEFAULT_HEARTBEAT_S,
            servers_spawned_at=self.at(1.2),
            servers_ready_at=self.at(34.5) if ready else None,
            client_started_at=self.at(34.6) if ready else None,
            assigned=(self.shard.range,),
            replicas=(replica,),
        )
        self.files.at(self.at(34.6) if ready else self.at(1.2)).write_attempt(record)

    def _endpoints(self) -> EndpointsRecord:
        alias = AliasEndpoints(
            kind="deployed", base_urls=(self.base_url,), model=self.w.endpoint.model, api_key_env=None
        )
        return EndpointsRecord(aliases={self.w.endpoint.alias: alias})

    def _heartbeat(self, phase: Phase, when: datetime) -> None:
        beat = int((when - self.start).total_seconds() // DEFAULT_HEARTBEAT_S)
        record = HeartbeatRecord(pid=self.pid, hostname=self.node, phase=phase, beat=beat, time=when)
        self.files.at(when).write_heartbeat(record)

    def _progress(self, state: WorkerState, done: int, when: datetime) -> None:
        record = WorkerProgress(shard=self.k, attempt=1, state=state, records_total=self.total, records_done=done)
        self.files.at(when).write_progress(record)

    def _output(
        self, produced: tuple[IndexRange, ...], generation_s: float, finished: datetime, drained: Drained | None
    ) -> None:
        parts = []
        for number, item in enumerate(produced):
            data = (
                parquet_part(
                    self.w.run_id,
                    self.w.plan.digest,
                    self.k,
                    1,
                    item,
                    text_bytes=self.w.text_bytes,
                    write_options=self.w.write_options,
                )
                if self.w.parquet
                else b"PAR1\n# placeholder part written by data_designer.slurm.runtime.testing.write_run_directory; "
                + f"not Parquet: run {self.w.run_id} shard {self.k} attempt 1 rows [{item.start}, {item.stop})\n".encode()
                + b"PAR1"
            )
            part = self.files.publish_part(number, data, records=item.records, first_index=item.start)
            assert part is not None  # durable=False raises FileExistsError instead
            parts.append(part)
        records = sum(item.records for item in produced)
        started = self._worker_started
        manifest = OutputManifest(
            run_id=self.w.run_id,
            plan_digest=self.w.plan.digest,
            config_digest=self.w.plan.config_digest,
            shard=self.k,
            attempt=1,
            seed=self.shard.seed,
            assigned=(self.shard.range,),
            ranges=produced,
            complete=drained is None,
            drained=drained,
            records=records,
            columns=self.w.columns,
            arrow_schema=self.w.arrow_schema,
            parts=tuple(parts),
            usage_source="host",
            models={self.w.endpoint.alias: self._usage(records)},
            timings=Timings(
                worker_started_at=started,
                worker_finished_at=finished,
                queue_wait_s=round((self.start - self.w.submitted).total_seconds(), 6),
                server_start_s=33.3,
                host_import_s=6.2,
                setup_s=1.8,
                generation_s=round(generation_s, 6),
                write_s=0.4,
                records_per_s=round(records / generation_s, 6) if generation_s > 0 else 0.0,
            ),
            host_version=HOST_VERSION,
            runtime_version=runtime_version,
            python=platform.python_version(),
        )
        self.files.at(finished).write_requests(self._requests(records))
        self.files.at(finished).publish_manifest(manifest)

    def _requests(self, records: int) -> RequestEvidence:
        """One successful request per record: latencies of 1, 1.15 and 1.3 s (buckets 40, 41, 42), output tokens as
        the manifest's usage counts them."""
        per = records // 3
        filled = [(40 + i, n) for i, n in enumerate((per, per, records - 2 * per)) if n > 0]
        values = [1_000_000 + 150_000 * (index - 40) for index, _ in filled]
        latency = Histogram(
            count=records,
            sum=sum(value * n for value, (_, n) in zip(values, filled, strict=True)),
            min=values[0] if values else None,
            max=values[-1] if values else None,
            buckets=tuple(filled),
        )
        tokens = 400 + self.k % 29
        alias = AliasRequests(
            sent=records,
            succeeded=records,
            failed_timeout=0,
            failed_connection=0,
            retried=0,
            latency_us=latency,
            output_tokens=Histogram(
                count=records,
                sum=records * tokens,
                min=tokens if records else None,
                max=tokens if records else None,
            ),
        )
        return RequestEvidence(shard=self.k, attempt=1, final=True, aliases={self.w.endpoint.alias: alias})

    def _usage(self, records: int) -> ModelUsage:
        routing = Routing(
            router_url=f"http://127.0.0.1:{40_000 + self.k % 20_000}",
            replicas=(ReplicaRequests(base_url=self.base_url, requests=records, failures=0),),
            failovers=0,
            unrouted=0,
        )
        return ModelUsage(
            kind="deployed",
            model=self.w.endpoint.model,
            base_urls=(self.base_url,),
            used_base_url=self.base_url,
            successful_requests=records,
            failed_requests=0,
            input_tokens=records * (180 + self.k % 17),
            output_tokens=records * (400 + self.k % 29),
            routing=routing,
        )

    def _status(
        self,
        status: FinalStatus,
        message: str,
        ended: datetime,
        *,
        records: int | None = None,
        step: str | None = None,
        tail: tuple[str, ...] = (),
        signal: str | None = None,
        drain_s: float | None = None,
    ) -> None:
        finished = ended + timedelta(seconds=0.6)
        record = StatusRecord(
            status=status,
            exit_code=EXIT_CODES[status],
            message=message,
            step=step,
            log_tail=tail,
            signal=signal,
            records=records,
            records_assigned=self.total,
            drain_s=drain_s,
            started_at=self.start,
            finished_at=finished,
        )
        self.files.at(finished).write_status(record)
        self._heartbeat("stopping", finished + timedelta(seconds=0.01))

    # -- logs

    def _logs(self, ended: datetime | None, last: str | None, *, client: bool, done: bool) -> None:
        """The supervisor's, the server's and (once started) the client's log; ``done``: the client finished."""
        replica = step_name(self.w.replica)
        lines = [
            (self.start, f"run {self.w.run_id} shard {self.k} attempt 1 (pid {self.pid})"),
            (self.at(1.2), f"started {replica} on {self.node}: srun --overlap --nodes=1 --ntasks=1 ..."),
        ]
        if client:
            lines.append((self.at(34.5), f"{replica} ready at {self.base_url} after 33.30s"))
            lines.append((self.at(34.6), f"client worker started: {' '.join(self.w.plan.allocation.client.argv)}"))
        if ended is not None and last is not None:
            lines.append((ended + timedelta(seconds=0.6), last))
        self.files.append_log(
            "supervisor", "".join(f"{format_timestamp(when)} supervisor: {line}\n" for when, line in lines)
        )
        self.files.append_log(self.w.server_log, "".join(line + "\n" for line in self._server_lines(failed=not client)))
        if client:
            self.files.append_log("client", "".join(line + "\n" for line in self._client_lines(done=done)))

    def _server_lines(self, *, failed: bool) -> tuple[str, ...]:
        head = (
            f"launcher: {self.w.replica.alias}-{self.w.replica.replica}.0 bound {bind_host(self.w.replica)}:{self.port} "
            f"on {self.node}",
            f"INFO:     Started server process [{self.pid + 7}]",
            "INFO:     Waiting for application startup.",
        )
        if failed:
            return (
                *head,
                "Traceback (most recent call last):",
                '  File "server.py", line 88, in load',
                SERVER_FAILURE_LINE,
            )
        return (*head, f"INFO:     Uvicorn running on http://{self.address}:{self.port}", "INFO:     GET /health 200")

    def _client_lines(self, *, done: bool) -> tuple[str, ...]:
        lines = [
            f"ddslurm-worker: shard {self.k} attempt 1: generating {self.total} records in [{self.shard.start}, "
            f"{self.shard.stop})",
            f"[data_designer] Preparing samplers to generate {self.total} records across 1 columns",
        ]
        if done:
            rate = self.total / self.gen_s
            lines.append(
                f"ddslurm-worker: shard {self.k} attempt 1: {self.total} records in 1 part(s), {rate:.1f} records/s"
            )
        return tuple(lines)


# -- helpers ----------------------------------------------------------------------------------------------------


def parquet_part(
    run_id: str,
    plan_digest: str,
    shard: int,
    attempt: int,
    rows: IndexRange,
    *,
    text_bytes: int = 0,
    write_options: Mapping[str, object] | None = None,
) -> bytes:
    """The bytes of a real output part: column ``a`` (``"r<global index>"``) and the provenance columns, as the
    client worker writes them (``worker._output.with_provenance``, Parquet's default codec).

    With ``text_bytes`` each value is ``"r<global index> "`` followed by about that many bytes of words drawn from
    :data:`TEXT_WORDS` by frequency (rank ``r`` weighs ``1/r``, as in prose), seeded by ``rows.start``: the same
    range gives the same bytes, and the text compresses about as generated prose does. ``write_options`` go to
    ``pyarrow.parquet.write_table`` as they are (default: none, the worker's own call)."""
    import pyarrow as pa

    pq: Any = importlib.import_module("pyarrow.parquet")  # untyped
    count = rows.records
    labels = pa.array([f"r{index}" for index in range(rows.start, rows.stop)], type=pa.string())
    table = pa.table(
        {
            "a": labels if text_bytes <= 0 else _with_text(labels, rows.start, text_bytes),
            INDEX_COLUMN: pa.array(range(rows.start, rows.stop), type=pa.int64()),
            RUN_ID_COLUMN: pa.array([run_id] * count, type=pa.string()),
            PLAN_DIGEST_COLUMN: pa.array([plan_digest] * count, type=pa.string()),
            SHARD_COLUMN: pa.array([shard] * count, type=pa.int32()),
            ATTEMPT_COLUMN: pa.array([attempt] * count, type=pa.int32()),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **dict(write_options or {}))
    data: bytes = sink.getvalue().to_pybytes()
    return data


TEXT_WORDS: tuple[str, ...] = tuple(
    (  # noqa: SIM905 (one line of prose reads better than 180 quoted words)
        "the of and to in a is that for it as was with be by on not he this are or his from at which but have an they "
        "you were her she there one all we their been has would when if will who more no so said what up its about "
        "into than them can only other time new some could these two may first then do any like my now over such our "
        "man me even most made after also did many before must through back years where much your way well down should "
        "because each just those people how too little state good very make world still own see men work long get here "
        "between both life being under never day same another know while last might us great old year off come since "
        "against go came right used take three model data record shard merge output column value dataset generated text "
        "language prompt answer question reason example sample batch token request server client worker result"
    ).split()
)
"""The vocabulary of :func:`parquet_part`'s text, most frequent first."""


def _with_text(labels: pa.Array, seed: int, text_bytes: int) -> pa.Array:
    """``"<label> <words>"`` for each label, about ``text_bytes`` bytes of words each, reproducible from ``seed``."""
    import pyarrow as pa

    pc: Any = importlib.import_module("pyarrow.compute")  # untyped
    numpy = importlib.import_module("numpy")
    words = max(1, text_bytes // 5)  # the words average about 4 letters and a space
    weights = 1.0 / numpy.arange(1, len(TEXT_WORDS) + 1)
    picks = numpy.random.default_rng(seed).choice(len(TEXT_WORDS), size=(len(labels), words), p=weights / weights.sum())
    vocabulary = pa.array(TEXT_WORDS, type=pa.string())
    flat = vocabulary.take(pa.array(picks.ravel()))
    offsets = pa.array(numpy.arange(0, len(flat) + 1, words, dtype=numpy.int32))
    text = pc.binary_join(pa.ListArray.from_arrays(offsets, flat), " ")
    joined: pa.Array = pc.binary_join_element_wise(labels, text, " ")
    return joined


def _all_succeeded(_shard: int) -> ShardOutcome:
    return "succeeded"


def _generation(records: int) -> timedelta:
    """How long a shard's generation takes in the fake timeline."""
    return timedelta(seconds=8.0 + 0.5 * records)


def _int(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def _set_task(cluster: FakeCluster, task: FakeTask, state: tuple[str, int, int], *, start: float) -> None:
    name, exit_code, signal = state
    if name == "PENDING":
        task.reason = "Priority"
    elif name == "RUNNING":
        task.state, task.start, task.node = "RUNNING", start, cluster.nodes[(task.index or 0) % len(cluster.nodes)]
    else:
        task.start, task.node = start, cluster.nodes[(task.index or 0) % len(cluster.nodes)]
        cluster.finish(task, name, exit_code, signal)
