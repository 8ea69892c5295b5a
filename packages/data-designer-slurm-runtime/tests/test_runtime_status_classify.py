"""The status rules (``docs/architecture/status.md``), one named test per table row, on hand-built snapshots.

Pure: every test builds ``RunSnapshot``/``ShardSnapshot``/``AttemptSnapshot`` and ``Observation`` values directly
(no files, no Slurm) and calls ``classify``. The plan is compiled once (22 shards of 10 records, ``MaxArraySize``
11, so chunk 1's array indices 0-10 run shards 11-21).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_designer.slurm.contracts import (
    SHARD_STATES,
    ClusterFacts,
    ClusterProfile,
    ExecutionPlan,
    Observation,
    PartDamage,
    RunStatus,
    SchedulerEvidence,
    ShardPlan,
    ShardStatus,
    SourceReport,
    SourceStatus,
    SubmissionBinding,
    TaskEvidence,
    TaskState,
)
from data_designer.slurm.contracts import __version__ as runtime_version
from data_designer.slurm.contracts.records import (
    EXIT_CODES,
    EXIT_NOT_OURS,
    AttemptRecord,
    CancellationRecord,
    ClaimOwner,
    FinalStatus,
    HeartbeatRecord,
    IndexRange,
    OutputManifest,
    Phase,
    Requester,
    RetryIntent,
    RetryShard,
    RunRecord,
    SetAsidePart,
    StatusRecord,
    SubmissionRecord,
    SubmittedJob,
    Timings,
    WorkerProgress,
)
from data_designer.slurm.planner import bind_retry, bind_submission, compile, load_run, resolve_config
from data_designer.slurm.runtime.status import DEFAULT_GRACE_S, DEFAULT_STALE_BEATS, Rules, classify
from data_designer.slurm.runtime.store import (
    AttemptSnapshot,
    BatchError,
    CancellationSnapshot,
    RetrySnapshot,
    RunId,
    RunLayout,
    RunSnapshot,
    ShardSnapshot,
    TaskRef,
    coverage_from,
    shard_snapshot,
)
from data_designer.slurm.runtime.store._reader import _tasks_by_shard
from data_designer.slurm.runtime.testing import writer_run

SHARDS = 22
RECORDS_PER_SHARD = 10
MAX_ARRAY = 11
CREATED = datetime(2025, 6, 1, 10, 0, 0, tzinfo=UTC)
SUBMITTED = CREATED + timedelta(seconds=3)
STARTED = SUBMITTED + timedelta(seconds=90)
NOW = CREATED + timedelta(hours=2)
BEAT_S = 5.0
JOB = {0: "1000", 1: "1001"}
"""The job id of each chunk of the run's own submission."""
RETRY_JOB = "1002"
PREFLIGHT_LINES = (
    "Traceback (most recent call last):",
    '  File "<string>", line 1, in <module>',
    "ModuleNotFoundError: No module named 'data_designer.slurm.runtime'",
)


# -- the plan and the run -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Compiled:
    plan: ExecutionPlan
    run: RunRecord
    layout: RunLayout


@functools.cache
def compiled() -> Compiled:
    root = Path("/workspace")
    document = writer_run("status-test", records=SHARDS * RECORDS_PER_SHARD, shards=SHARDS, replicas=1)
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
    spec = load_run(json.dumps(document), file=str(root / "status-test.json"))
    facts = ClusterFacts(gpus_per_node=2, max_array_size=MAX_ARRAY)
    plan = compile(spec, profile, cluster="local", config=resolve_config(spec), facts=facts)
    layout = RunLayout(root, RunId("status-test", CREATED, "00c0de"))
    binding = SubmissionBinding(run_id=str(layout.run_id), run_dir=str(layout.run_dir), job_name_prefix="dd-t")
    run = RunRecord(
        run_id=str(layout.run_id),
        name="status-test",
        created_at=CREATED,
        run_file=str(root / "status-test.json"),
        profile_file=str(root / "profile.yaml"),
        cluster="local",
        facts=facts,
        plan_digest=plan.digest,
        config_digest=plan.config_digest,
        shards=len(plan.shards),
        records=SHARDS * RECORDS_PER_SHARD,
        binding=binding,
        unit=bind_submission(plan, binding),
    )
    return Compiled(plan, run, layout)


def shard_plan(k: int) -> ShardPlan:
    return compiled().plan.shards[k]


def binding_of(k: int) -> tuple[int, int]:
    """(chunk, array index) of shard ``k`` in the plan."""
    for chunk in compiled().plan.submission.chunks:
        for task in chunk.tasks:
            if task.shard == k:
                return chunk.chunk, task.index
    raise AssertionError(f"shard {k} is in no chunk")


def first_submission() -> SubmissionRecord:
    jobs = tuple(
        SubmittedJob(
            chunk=c.chunk,
            generation=0,
            index_offset=c.index_offset,
            job_name=f"dd-t-c{c.chunk}",
            job_id=JOB[c.chunk],
            array_spec=c.array_spec,
            recovered=False,
        )
        for c in compiled().plan.submission.chunks
    )
    return SubmissionRecord(submitted_at=SUBMITTED, jobs=jobs, submitted=len(jobs), recovered=0, sbatch_calls=2)


# -- the builder ----------------------------------------------------------------------------------------------


def iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def task(k: int, *, job: str | None = None, generation: int = 0, submitted: datetime = SUBMITTED) -> TaskRef:
    """The array task that runs shard ``k`` (the run's own job of its chunk unless ``job`` is given)."""
    chunk, index = binding_of(k)
    return TaskRef(
        job_id=job or JOB[chunk],
        job_name=f"dd-t-c{chunk}" + (f"-r{generation}" if generation else ""),
        array_task=index,
        chunk=chunk,
        generation=generation,
        submitted_at=submitted,
    )


def manifest(k: int, number: int, ranges: Sequence[tuple[int, int]], *, complete: bool) -> OutputManifest:
    plan = shard_plan(k)
    produced = tuple(IndexRange(plan.start + a, plan.start + b) for a, b in ranges)
    finished = NOW - timedelta(minutes=5)
    return OutputManifest(
        run_id=compiled().run.run_id,
        plan_digest=compiled().plan.digest,
        config_digest=compiled().plan.config_digest,
        shard=k,
        attempt=number,
        seed=plan.seed,
        assigned=(plan.range,),
        ranges=produced,
        complete=complete,
        records=sum(item.records for item in produced),
        columns=(),
        arrow_schema="",
        parts=(),
        usage_source="unavailable",
        models={},
        timings=Timings(
            worker_started_at=STARTED,
            worker_finished_at=finished,
            host_import_s=1.0,
            setup_s=1.0,
            generation_s=1.0,
            write_s=0.1,
            records_per_s=1.0,
        ),
        host_version="1.0.0",
        runtime_version=runtime_version,
        python="3.12",
    )


def ended(status: FinalStatus, message: str = "it ended", *, tail: tuple[str, ...] = ()) -> StatusRecord:
    return StatusRecord(
        status=status,
        exit_code=EXIT_CODES[status],
        message=message,
        log_tail=tail,
        started_at=STARTED,
        finished_at=NOW - timedelta(minutes=5),
    )


def attempt(
    k: int,
    number: int = 1,
    *,
    by: TaskRef | None = None,
    claimed: bool = True,
    restarts: int = 0,
    record: bool = True,
    client_started: datetime | None = None,
    beat_at: datetime | None = None,
    phase: Phase = "client_running",
    done: int | None = None,
    done_at: datetime | None = None,
    status: StatusRecord | None = None,
    published: Sequence[tuple[int, int]] | None = None,
    complete: bool | None = None,
    last_line: str | None = None,
    problems: tuple[str, ...] = (),
) -> AttemptSnapshot:
    """Attempt ``number`` of shard ``k`` as the reader would return it; ``published``: shard-relative ranges of a
    valid manifest (``complete`` unless given: whether they cover the shard); ``claimed=False``: its claim proved nothing."""
    ref = by or task(k)
    claim = ClaimOwner(
        host="node1",
        pid=4242,
        job_id=ref.job_id,
        array_task=ref.array_task,
        attempt=number,
        restart_count=restarts,
        time=STARTED,
    )
    started = STARTED + timedelta(seconds=1)
    attempt_record = AttemptRecord(
        run_id=compiled().run.run_id,
        plan_digest=compiled().plan.digest,
        shard=k,
        attempt=number,
        chunk=ref.chunk,
        array_task=ref.array_task,
        job_id=ref.job_id,
        restart_count=restarts,
        hostname="node1",
        nodes=("node1",),
        node_addresses=("10.0.0.1",),
        supervisor_pid=4242,
        supervisor_started_at=started,
        heartbeat_interval_s=BEAT_S,
        client_started_at=client_started,
        assigned=(shard_plan(k).range,),
    )
    if complete is None:
        complete = published is not None and sum(b - a for a, b in published) == RECORDS_PER_SHARD
    return AttemptSnapshot(
        number=number,
        claim=claim if claimed else None,
        record=attempt_record if record else None,
        heartbeat=HeartbeatRecord(pid=4242, hostname="node1", phase=phase, beat=3, time=beat_at) if beat_at else None,
        heartbeat_written_at=beat_at,
        progress=(
            WorkerProgress(
                shard=k, attempt=number, state="generating", records_total=RECORDS_PER_SHARD, records_done=done
            )
            if done is not None
            else None
        ),
        progress_written_at=done_at if done is not None else None,
        manifest=manifest(k, number, published, complete=complete) if published is not None else None,
        status=status,
        last_log_line=last_line,
        problems=problems if claimed else (*problems, "claim is corrupt"),
    )


def shard(
    k: int,
    *attempts: AttemptSnapshot,
    tasks: Sequence[TaskRef] | None = None,
    batch_errors: tuple[BatchError, ...] = (),
) -> ShardSnapshot:
    """Shard ``k`` with ``attempts`` (default task: the run's own), coverage as the reader computes it."""
    coverage = coverage_from(shard_plan(k), {a.number: a.manifest for a in attempts if a.manifest is not None})
    return ShardSnapshot(
        plan=shard_plan(k),
        attempts=tuple(attempts),
        tasks=tuple(tasks) if tasks is not None else (task(k),),
        kept=coverage.kept,
        overlap=coverage.overlap,
        missing=coverage.missing,
        batch_errors=batch_errors,
    )


def snapshot(*shards: ShardSnapshot, submissions: tuple[SubmissionRecord, ...] | None = None) -> RunSnapshot:
    built = compiled()
    return RunSnapshot(
        layout=built.layout,
        run=built.run,
        plan=built.plan,
        submissions=(first_submission(),) if submissions is None else submissions,
        shards=shards,
        read_at=NOW,
    )


def evidence(
    ref: TaskRef,
    state: TaskState,
    *,
    raw: str | None = None,
    exit_code: int | None = None,
    start: datetime | None = STARTED,
    end: datetime | None = None,
    restarts: int = 0,
    reason: str | None = None,
) -> TaskEvidence:
    """What Slurm says about ``ref``'s task: from sacct when it has an end time or exit code, else squeue."""
    return TaskEvidence(
        job_id=ref.job_id,
        array_index=ref.array_task,
        state=state,
        raw_state=raw or state.upper(),
        exit_code=exit_code,
        reason=reason,
        submit_time=iso(ref.submitted_at),
        start_time=iso(start) if start is not None else None,
        end_time=iso(end) if end is not None else None,
        restarts=restarts,
        source="sacct" if end is not None or exit_code is not None else "squeue",
        observed_at=iso(NOW),
    )


def observed(
    *tasks: TaskEvidence, squeue: SourceStatus = "ok", sacct: SourceStatus = "ok", lag: bool = False
) -> Observation:
    return Observation(
        observed_at=iso(NOW),
        tasks=tasks,
        squeue=SourceReport(source="squeue", status=squeue),
        sacct=SourceReport(source="sacct", status=sacct),
        accounting_lag=lag,
        calls=2,
    )


def status_of(
    run: RunSnapshot,
    observation: Observation | None,
    *,
    now: datetime = NOW,
    evidence_kind: SchedulerEvidence = "live",
    rules: Rules | None = None,
    asked: bool = True,
) -> RunStatus:
    return classify(
        run, observation, now, evidence=evidence_kind, rules=rules or Rules(), scheduler_calls=2, asked=asked
    )


def one(
    s: ShardSnapshot, observation: Observation | None, *, now: datetime = NOW, rules: Rules | None = None
) -> ShardStatus:
    """The status of a run holding only shard ``s``."""
    (result,) = status_of(snapshot(s), observation, now=now, rules=rules).shards
    return result


HALF = ((0, RECORDS_PER_SHARD // 2),)
"""A manifest of the shard's first half (shard-relative)."""
FULL = ((0, RECORDS_PER_SHARD),)


# -- S: the shard rules, in evaluation order --------------------------------------------------------------------


def test_s1_complete_manifests_are_succeeded() -> None:
    done = shard(0, attempt(0, status=ended("succeeded"), published=FULL))
    result = one(done, observed(evidence(task(0), "completed", exit_code=0, end=NOW - timedelta(minutes=4))))
    assert (result.state, result.reason, result.missing, result.anomalies) == ("succeeded", None, (), ())
    assert result.records_done == result.records_total == RECORDS_PER_SHARD


def test_s1_sacct_failed_with_complete_manifest_is_succeeded_with_an_anomaly() -> None:
    # the supervisor published everything, then the job's epilog (or a late signal) failed it
    done = shard(0, attempt(0, status=ended("succeeded"), published=FULL))
    failed = evidence(task(0), "failed", raw="FAILED", exit_code=1, end=NOW - timedelta(minutes=4))
    result = one(done, observed(failed))
    assert result.state == "succeeded"
    assert result.anomalies == ("Slurm reports FAILED (exit 1) but the manifests are complete",)


def test_s1_a1_manifests_of_two_attempts_together_complete_the_shard() -> None:
    first = attempt(0, 1, status=ended("time_limit"), published=HALF)
    second = attempt(0, 2, status=ended("succeeded"), published=((5, 10),), complete=True, restarts=1)
    result = one(shard(0, first, second), None)
    assert (result.state, result.records_done) == ("succeeded", RECORDS_PER_SHARD)
    assert [a.state for a in result.attempts] == ["partial", "succeeded"]


def _intent(generation: int, *shards: int, at: datetime) -> RetrySnapshot:
    built = compiled()
    unit = bind_retry(built.plan, built.run.binding, shards=shards, generation=generation)
    who = Requester(user="ana", host="login1", pid=4242, time=at)
    intent = RetryIntent(
        generation=generation,
        requested_by=who,
        shards=tuple(
            RetryShard(shard=k, state="failed", ranges=(IndexRange(shard_plan(k).start, shard_plan(k).stop),))
            for k in shards
        ),
        unit=unit,
    )
    return RetrySnapshot(intent=intent, written_at=at)


def test_s0_a_retry_intent_without_submission_holds_its_shards_pending_then_missing() -> None:
    failed = attempt(0, status=ended("server_failed_to_start"))
    ended_task = evidence(task(0), "failed", exit_code=10, end=NOW - timedelta(minutes=5))
    held = replace(
        snapshot(shard(0, failed), shard(1, attempt(1, status=ended("server_failed_to_start")))),
        retries=(_intent(1, 0, at=NOW - timedelta(seconds=30)),),
    )
    result = status_of(held, observed(ended_task))
    assert (result.shards[0].state, result.shards[0].reason) == ("pending", "retry_submitting")
    assert "retry generation 1 is being submitted by ana@login1 (pid 4242)" in (result.shards[0].message or "")
    assert result.shards[1].state == "failed"  # not in the intent: its own ending stands

    orphaned = replace(held, retries=(_intent(1, 0, at=NOW - timedelta(minutes=10)),))
    late = status_of(orphaned, observed(ended_task)).shards[0]
    assert (late.state, late.reason) == ("missing", "retry_unsubmitted")
    assert "retry RUN' again" in (late.message or "")

    # once a task of that generation is known, the task's evidence decides as for any task
    retry_task = task(0, job=RETRY_JOB, generation=1, submitted=NOW - timedelta(seconds=20))
    submitted = replace(orphaned, shards=(shard(0, failed, tasks=(task(0), retry_task)),))
    seen = status_of(submitted, observed(ended_task, evidence(retry_task, "pending", start=None))).shards[0]
    assert (seen.state, seen.job_id) == ("pending", RETRY_JOB)


def test_c2_a_cancel_record_makes_a_cancelled_shard_cancelled_by_user() -> None:
    cancelled = evidence(task(0), "cancelled", raw="CANCELLED by 1000", exit_code=0, end=NOW - timedelta(seconds=5))
    who = Requester(user="ana", host="login1", pid=4242, time=NOW - timedelta(seconds=6))
    record = CancellationRecord(
        requested_by=who, whole_run=False, shards=(0,), targets=("1000_0",), generations=(0,), confirmed=True
    )
    run = replace(
        snapshot(shard(0, attempt(0)), shard(1, attempt(1))),
        cancellations=(CancellationSnapshot(record, NOW - timedelta(seconds=4)),),
    )
    result = status_of(
        run, observed(cancelled, evidence(task(1), "cancelled", raw="CANCELLED by 0", exit_code=0, end=NOW))
    )
    assert (result.shards[0].state, result.shards[0].reason) == ("cancelled", "cancelled_by_user")
    assert "cancelled by ana@login1" in (result.shards[0].message or "")
    assert (result.shards[1].state, result.shards[1].reason) == ("cancelled", "cancelled")  # not named: Slurm's reason

    # a cancellation older than the shard's task speaks for an earlier task, not for this one
    older = replace(run, cancellations=(CancellationSnapshot(record, SUBMITTED - timedelta(seconds=1)),))
    assert status_of(older, observed(cancelled)).shards[0].reason == "cancelled"


def test_s2_rejected_first_sbatch_is_not_submitted_with_the_message() -> None:
    error = "sbatch: error: Batch job submission failed: Invalid account or account/partition combination"
    refused = SubmissionRecord(submitted_at=SUBMITTED, jobs=(), submitted=0, recovered=0, sbatch_calls=1, error=error)
    run = snapshot(shard(0, tasks=()), shard(1, tasks=()), submissions=(refused,))
    result = status_of(run, None, evidence_kind="none")
    assert result.state == "not_submitted"
    assert result.submission_error == error
    assert [(s.state, s.reason, s.message) for s in result.shards] == [("not_submitted", "not_submitted", error)] * 2


def test_s2_no_submission_record_at_all_is_not_submitted() -> None:
    result = status_of(snapshot(shard(0, tasks=()), submissions=()), None, evidence_kind="none")
    assert (result.state, result.shards[0].state, result.shards[0].message) == ("not_submitted", "not_submitted", None)


def test_s2a_attempt_evidence_without_a_submission_record_is_never_not_submitted() -> None:
    live = shard(0, attempt(0, beat_at=NOW), tasks=())  # an allocation claimed it; no submission record names its task
    gone = shard(1, attempt(1, status=ended("server_failed_to_start", "writer-0 exited")), tasks=())
    refused = SubmissionRecord(submitted_at=SUBMITTED, jobs=(), submitted=0, recovered=0, sbatch_calls=1, error="no")
    for submissions in ((), (refused,)):
        result = status_of(snapshot(live, gone, submissions=submissions), None, evidence_kind="none")
        running, failed = result.shards
        assert (running.state, running.reason, running.phase) == (
            "unknown",
            "submission_record_missing",
            "client_running",
        )
        assert "claimed by job 1000_0 on node1" in (running.message or "")
        assert "--run-id" in (running.message or "")
        assert (failed.state, failed.reason, failed.message) == ("failed", "server_failed_to_start", "writer-0 exited")
        assert result.state == "unknown"


def test_s3_shard_no_submitted_job_holds_is_missing() -> None:
    result = one(shard(0, tasks=()), observed())
    assert (result.state, result.reason) == ("missing", "no_submission")


def test_s4_pending_task_is_pending_with_the_squeue_reason() -> None:
    result = one(shard(0), observed(evidence(task(0), "pending", start=None, reason="Priority")))
    assert (result.state, result.reason, result.job_id, result.array_task) == ("pending", "Priority", "1000", 0)
    assert result.attempts == ()


def test_s4_requeued_task_is_one_pending_shard_with_its_attempts() -> None:
    first = attempt(0, status=ended("preempted"), published=HALF)
    requeued = evidence(task(0), "requeued", raw="PENDING", start=None, restarts=1, reason="BeginTime")
    result = status_of(snapshot(shard(0, first)), observed(requeued))
    assert result.shards_total == 1
    (only,) = result.shards
    assert (only.state, only.reason, only.records_done) == ("pending", "BeginTime", 5)
    assert [(a.attempt, a.state, a.final_status) for a in only.attempts] == [(1, "partial", "preempted")]


def test_s5_failed_attempt_is_failed_with_its_ending_message_and_last_log_line() -> None:
    cause = "torch.OutOfMemoryError: CUDA out of memory."
    failure = ended("server_failed_to_start", "writer-0 exited before it was ready", tail=("loading", cause))
    gone = evidence(task(0), "failed", exit_code=10, end=NOW - timedelta(minutes=4))
    result = one(shard(0, attempt(0, status=failure)), observed(gone))
    assert (result.state, result.reason, result.message, result.last_log_line) == (
        "failed",
        "server_failed_to_start",
        "writer-0 exited before it was ready",
        cause,
    )
    assert [(a.state, a.exit_code) for a in result.attempts] == [("failed", 10)]


def test_s5_status_record_wins_while_slurm_is_down() -> None:
    result = one(shard(0, attempt(0, status=ended("client_error"))), None)
    assert (result.state, result.reason) == ("failed", "client_error")


def test_s5_an_attempt_that_wrote_its_status_is_ended_while_slurm_still_completes() -> None:
    # status.json is final: COMPLETING (running to Slurm) neither hides it nor adds its progress again
    drained = attempt(0, status=ended("time_limit"), published=HALF, beat_at=NOW, phase="stopping", done=5, done_at=NOW)
    result = one(shard(0, drained), observed(evidence(task(0), "running", raw="COMPLETING")))
    assert (result.state, result.reason, result.records_done) == ("partial", "time_limit", 5)


def test_s5_a_cached_observation_that_saw_it_running_does_not_hide_a_later_status() -> None:
    # status --no-refresh after the job ended: the last observation saw it running, status.json says how it ended
    later = NOW + timedelta(minutes=10)
    failed = shard(0, attempt(0, status=ended("server_died")))
    result = status_of(snapshot(failed), observed(evidence(task(0), "running")), now=later, evidence_kind="cached")
    assert (result.shards[0].state, result.shards[0].reason) == ("failed", "server_died")


def test_s6_running_without_a_heartbeat_for_stale_beats_intervals_is_stale() -> None:
    allowed = DEFAULT_STALE_BEATS * BEAT_S
    late = shard(0, attempt(0, beat_at=NOW - timedelta(seconds=allowed + 1), last_line="generating"))
    result = one(late, observed(evidence(task(0), "running")))
    assert (result.state, result.reason, result.phase, result.last_log_line) == (
        "stale",
        "no_heartbeat",
        "client_running",
        "generating",
    )
    fresh = shard(0, attempt(0, beat_at=NOW - timedelta(seconds=allowed - 1)))
    assert one(fresh, observed(evidence(task(0), "running"))).state == "running"


def test_s6_stale_is_measured_from_the_task_start_before_the_first_heartbeat() -> None:
    # attempt.json says beat every 5 s, no heartbeat yet: the clock runs from the task's start
    allowed = DEFAULT_STALE_BEATS * BEAT_S
    waiting = shard(0, attempt(0))
    just_started = evidence(task(0), "running", start=NOW - timedelta(seconds=allowed - 1))
    assert one(waiting, observed(just_started)).state == "running"
    started_long_ago = evidence(task(0), "running", start=NOW - timedelta(seconds=allowed + 1))
    assert one(waiting, observed(started_long_ago)).state == "stale"


def test_s6_a_heartbeat_older_than_the_task_start_counts_from_the_start() -> None:
    # max(task start, last heartbeat): an old beat of this attempt does not make a task that just (re)started stale
    old_beat = shard(0, attempt(0, beat_at=NOW - timedelta(hours=1)))
    restarted = evidence(task(0), "running", start=NOW - timedelta(seconds=3))
    assert one(old_beat, observed(restarted)).state == "running"


def test_s6_before_any_attempt_record_the_grace_applies_preflight_has_no_heartbeat() -> None:
    # the batch script's preflight import runs before the supervisor claims or beats
    within = evidence(task(0), "running", start=NOW - timedelta(seconds=DEFAULT_GRACE_S - 5))
    result = one(shard(0), observed(within))
    assert (result.state, result.phase) == ("running", "starting")
    beyond = evidence(task(0), "running", start=NOW - timedelta(seconds=DEFAULT_GRACE_S + 5))
    assert one(shard(0), observed(beyond)).state == "stale"
    # a claim without attempt.json yet: still the grace, not stale_beats x an unknown interval
    claimed = shard(0, attempt(0, record=False))
    assert one(claimed, observed(within)).state == "running"
    assert one(claimed, observed(beyond)).state == "stale"


def test_s7_running_shows_the_heartbeat_phase_and_progress() -> None:
    live = attempt(0, beat_at=NOW - timedelta(seconds=2), phase="draining", done=4, done_at=NOW)
    result = one(shard(0, live), observed(evidence(task(0), "running")))
    assert (result.state, result.phase, result.records_done, result.reason) == ("running", "draining", 4, None)
    assert [(a.state, a.records_done) for a in result.attempts] == [("running", 4)]


def test_s7_progress_adds_to_published_records_but_never_past_the_range() -> None:
    first = attempt(0, 1, status=ended("time_limit"), published=HALF)
    second = attempt(0, 2, restarts=1, beat_at=NOW, done=RECORDS_PER_SHARD, done_at=NOW)
    result = one(shard(0, first, second), observed(evidence(task(0), "running", restarts=1)))
    assert (result.state, result.records_done) == ("running", RECORDS_PER_SHARD)
    assert result.missing == ((5, 10),)


def test_s7_progress_that_says_done_without_a_manifest_is_not_succeeded() -> None:
    claims_all = attempt(0, beat_at=NOW, done=RECORDS_PER_SHARD, done_at=NOW)
    result = one(shard(0, claims_all), observed(evidence(task(0), "running")))
    assert result.state == "running"
    assert result.missing == (shard_plan(0).range,)


def test_s7_requeued_task_before_its_new_claim_shows_no_old_phase_or_progress() -> None:
    # incarnation 0 claimed attempt 1, was preempted and published half; incarnation 1 runs its preflight
    old = NOW - timedelta(minutes=6)
    first = attempt(0, status=ended("preempted"), published=HALF, beat_at=old, phase="stopping", done=5, done_at=old)
    again = evidence(task(0), "running", start=NOW - timedelta(seconds=10), restarts=1)
    result = one(shard(0, first), observed(again))
    assert (result.state, result.phase, result.records_done) == ("running", "starting", 5)


def test_s7_requeued_task_seen_only_by_squeue_matches_its_newest_claim() -> None:
    # sacct down: squeue cannot count restarts (0), the claims say incarnation 1 holds attempt 2
    first = attempt(0, 1, status=ended("preempted"), published=HALF)
    second = attempt(0, 2, restarts=1, beat_at=NOW - timedelta(seconds=1), phase="client_running", done=2, done_at=NOW)
    result = one(shard(0, first, second), observed(evidence(task(0), "running"), sacct="timed_out"))
    assert (result.state, result.phase, result.records_done) == ("running", "client_running", 7)
    assert [a.state for a in result.attempts] == ["partial", "running"]


def test_s8_unseen_task_whose_newest_attempt_ended_is_that_ending() -> None:
    # the claim is corrupt (it proves nothing about which task ran it), status.json still tells the ending
    result = one(shard(0, attempt(0, claimed=False, status=ended("server_died"))), None)
    assert (result.state, result.reason) == ("failed", "server_died")


def test_s8_an_earlier_tasks_ending_does_not_speak_for_an_unseen_retry() -> None:
    # attempt 1 (the run's own task) failed; the retry's task is gone from squeue and sacct is down: unknown
    retry = task(0, job=RETRY_JOB, generation=1, submitted=NOW - timedelta(minutes=30))
    first = attempt(0, status=ended("server_died"))
    result = one(shard(0, first, tasks=(task(0), retry)), observed(sacct="failed"))
    assert (result.state, result.reason, result.job_id) == ("unknown", "scheduler_unavailable", RETRY_JOB)


def test_s8_an_ended_attempt_with_an_unreadable_claim_is_no_missing_status_record() -> None:
    # Slurm shows the end and status.json exists: not "the attempt wrote no status.json" because the claim is corrupt
    gone = evidence(task(0), "failed", exit_code=11, end=NOW - timedelta(minutes=5))
    result = one(shard(0, attempt(0, claimed=False, status=ended("server_died"))), observed(gone))
    assert (result.state, result.reason) == ("failed", "server_died")


def test_s9_preflight_exit_6_without_attempt_is_environment_mismatch_with_the_import_error() -> None:
    err = BatchError(job_name="dd-t-c0", array_task=0, path="/workspace/slurm-dd-t-c0_0.err", lines=PREFLIGHT_LINES)
    failed = evidence(task(0), "failed", exit_code=6, end=NOW - timedelta(seconds=5))
    result = one(shard(0, batch_errors=(err,)), observed(failed))
    assert (result.state, result.reason, result.message) == ("failed", "environment_mismatch", PREFLIGHT_LINES[-1])
    assert result.attempts == ()


def test_s9_seen_only_by_squeue_the_preflight_is_told_by_slurms_stderr() -> None:
    # squeue prints no exit code (sacct is down): the task's own .err holds the import check's failure
    err = BatchError(job_name="dd-t-c0", array_task=0, path="/workspace/slurm-dd-t-c0_0.err", lines=PREFLIGHT_LINES)
    failed = evidence(task(0), "failed", raw="FAILED")
    result = one(shard(0, batch_errors=(err,)), observed(failed, sacct="failed"))
    assert (result.state, result.reason) == ("failed", "environment_mismatch")


def test_s9_preflight_exit_6_without_stderr_still_says_environment_mismatch() -> None:
    failed = evidence(task(0), "failed", exit_code=6, end=NOW - timedelta(seconds=5))
    result = one(shard(0), observed(failed))
    assert (result.state, result.reason) == ("failed", "environment_mismatch")
    assert "exit 6" in (result.message or "")


def test_s9_a_requeued_incarnation_failing_its_preflight_is_environment_mismatch() -> None:
    # incarnation 0 ran attempt 1 and was preempted; incarnation 1 (restart 1) exited 6 before claiming anything
    first = attempt(0, status=ended("preempted"), published=HALF)
    failed = evidence(task(0), "failed", exit_code=6, end=NOW - timedelta(seconds=5), restarts=1)
    result = one(shard(0, first), observed(failed))
    assert (result.state, result.reason, result.records_done) == ("failed", "environment_mismatch", 5)


def test_s10_cancelled_task_without_status_is_cancelled() -> None:
    cancelled = evidence(task(0), "cancelled", raw="CANCELLED by 0", exit_code=0, end=NOW - timedelta(seconds=1))
    result = one(shard(0, attempt(0)), observed(cancelled))
    assert (result.state, result.reason, result.message) == ("cancelled", "cancelled", "Slurm: CANCELLED by 0")


def test_s11_terminal_without_status_within_grace_is_running() -> None:
    # the shared filesystem may show status.json seconds after Slurm shows the end
    just = evidence(task(0), "completed", exit_code=0, end=NOW - timedelta(seconds=DEFAULT_GRACE_S - 1))
    result = one(shard(0, attempt(0, beat_at=NOW - timedelta(seconds=70))), observed(just))
    assert (result.state, result.phase) == ("running", "stopping")


def test_s11_terminal_in_squeue_without_end_time_is_within_grace() -> None:
    # sacct lags: squeue shows COMPLETED (it prints no end time), the grace cannot have been proven to pass
    seen = evidence(task(0), "completed", raw="COMPLETED")
    result = one(shard(0, attempt(0, beat_at=NOW - timedelta(seconds=2))), observed(seen))
    assert (result.state, result.phase) == ("running", "stopping")


def test_s12_terminal_without_status_after_grace_is_scheduler_inconsistent() -> None:
    late = evidence(task(0), "completed", exit_code=0, end=NOW - timedelta(seconds=DEFAULT_GRACE_S + 1))
    result = one(shard(0, attempt(0, last_line="client worker started")), observed(late))
    assert (result.state, result.reason, result.last_log_line) == (
        "scheduler_inconsistent",
        "no_status_record",
        "client worker started",
    )


def test_s12_the_grace_is_configurable() -> None:
    late = evidence(task(0), "failed", exit_code=1, end=NOW - timedelta(seconds=DEFAULT_GRACE_S + 1))
    rules = Rules(grace_s=DEFAULT_GRACE_S * 3)
    assert one(shard(0, attempt(0)), observed(late), rules=rules).state == "running"
    assert one(shard(0, attempt(0)), observed(late), rules=Rules(grace_s=0)).state == "scheduler_inconsistent"


def test_s13_gone_from_squeue_while_sacct_is_down_is_unknown_never_succeeded_nor_failed() -> None:
    # MinJobAge dropped the task from squeue, slurmdbd is down, no status.json: nothing proves an ending
    running_once = attempt(0, beat_at=NOW - timedelta(hours=1), done=9, done_at=NOW - timedelta(hours=1))
    for health in ("failed", "timed_out", "disabled"):
        result = one(shard(0, running_once), observed(sacct=health))
        assert (result.state, result.reason) == ("unknown", "scheduler_unavailable"), health
        assert [a.state for a in result.attempts] == ["unknown"]


def test_s13_no_observation_at_all_is_unknown() -> None:
    result = status_of(snapshot(shard(0, attempt(0, published=HALF))), None, evidence_kind="none")
    assert (result.state, result.shards[0].state, result.shards[0].records_done) == ("unknown", "unknown", 5)


def test_s14_unseen_just_after_submission_or_while_accounting_lags_is_pending() -> None:
    fresh = shard(0, tasks=(task(0, submitted=NOW - timedelta(seconds=10)),))
    assert (one(fresh, observed()).state, one(fresh, observed()).reason) == ("pending", "accounting_lag")
    assert one(shard(0), observed(lag=True)).reason == "accounting_lag"


def test_s15_unseen_by_both_sources_is_missing() -> None:
    result = one(shard(0), observed())
    assert (result.state, result.reason) == ("missing", "no_evidence")


def test_c1_cached_evidence_leaves_what_only_the_scheduler_can_tell_unknown() -> None:
    # Slurm cannot be asked now: the last recorded observation is shown as "last known", never as the state
    later = NOW + timedelta(seconds=90)
    running = shard(0, attempt(0, beat_at=later - timedelta(seconds=1), done=3, done_at=later))
    failed = shard(1, attempt(1, status=ended("server_died")))
    done = shard(2, attempt(2, status=ended("succeeded"), published=FULL))
    last = observed(evidence(task(0), "running"), evidence(task(1), "failed", exit_code=11, end=NOW))
    result = status_of(snapshot(running, failed, done), last, now=later, evidence_kind="cached")
    assert [(s.state, s.reason) for s in result.shards] == [
        ("unknown", "scheduler_unavailable"),
        ("failed", "server_died"),
        ("succeeded", None),
    ]
    assert result.shards[0].message == "the scheduler could not be asked; last known: running (90s ago)"
    assert result.shards[0].records_done == 3


def test_c1_not_asked_the_last_observation_stands_as_it_was() -> None:
    # status --no-refresh: nobody tried to reach Slurm, so its last answer is shown with its age, not unknown
    later = NOW + timedelta(seconds=20)
    running = shard(0, attempt(0, beat_at=later - timedelta(seconds=1), done=3, done_at=later))
    last = observed(evidence(task(0), "running"))
    result = status_of(snapshot(running), last, now=later, evidence_kind="cached", asked=False)
    assert (result.shards[0].state, result.evidence, result.evidence_age_s) == ("running", "cached", 20.0)


def test_c1_a_missing_shard_that_the_records_decide_stays_missing() -> None:
    # no submission holds the shard (S3): the records say so, whether or not Slurm answers
    other = shard(1, tasks=())
    result = status_of(snapshot(shard(0), other), observed(), evidence_kind="cached")
    assert (result.shards[1].state, result.shards[1].reason) == ("missing", "no_submission")


def test_s16_a_slurm_state_this_code_does_not_know_is_unknown() -> None:
    odd = evidence(task(0), "unknown", raw="SPECIAL_EXIT")
    result = one(shard(0, attempt(0)), observed(odd))
    assert (result.state, result.reason) == ("unknown", "unknown_task_state")
    assert "SPECIAL_EXIT" in (result.message or "")


def test_s12_a_task_that_ended_before_claiming_shows_slurms_stderr() -> None:
    late = evidence(task(0), "failed", exit_code=2, end=NOW - timedelta(seconds=DEFAULT_GRACE_S + 1))
    errors = (BatchError(job_name="dd-t-c0", array_task=0, path="/x.err", lines=("srun: error: bad option",)),)
    result = one(shard(0, batch_errors=errors), observed(late))
    assert (result.state, result.last_log_line) == ("scheduler_inconsistent", "srun: error: bad option")
    assert "before it claimed an attempt" in (result.message or "")


# -- E: how a status.json ending maps to a shard state --------------------------------------------------------


def test_e1_status_succeeded_without_a_valid_manifest_is_never_succeeded() -> None:
    # manifest.json corrupt or of another run: the reader drops it, status.json alone proves nothing
    corrupt = attempt(0, status=ended("succeeded"), problems=("output/manifest.json is corrupt",))
    result = one(shard(0, corrupt), observed(evidence(task(0), "completed", exit_code=0, end=NOW)))
    assert (result.state, result.reason) == ("missing", "manifest_invalid")
    assert result.anomalies == ("attempt 1: output/manifest.json is corrupt",)
    earlier = attempt(0, 1, status=ended("time_limit"), published=HALF)
    claims = attempt(0, 2, restarts=1, status=ended("succeeded"), problems=("output/manifest.json is wrong schema",))
    result = one(shard(0, earlier, claims), None)
    assert (result.state, result.reason, result.records_done) == ("partial", "manifest_invalid", 5)


def test_e2_cancelled_ending_is_cancelled_even_with_records() -> None:
    result = one(shard(0, attempt(0, status=ended("cancelled", "scancel"), published=HALF)), None)
    assert (result.state, result.reason, result.message, result.records_done) == (
        "cancelled",
        "cancelled",
        "scancel",
        5,
    )


def test_e3_time_limit_with_some_records_is_partial_with_why() -> None:
    result = one(shard(0, attempt(0, status=ended("time_limit", "drained on SIGUSR1"), published=HALF)), None)
    assert (result.state, result.reason, result.message, result.missing) == (
        "partial",
        "time_limit",
        "drained on SIGUSR1",
        ((5, 10),),
    )


def test_e4_time_limit_without_records_is_failed() -> None:
    result = one(shard(0, attempt(0, status=ended("time_limit"))), None)
    assert (result.state, result.reason) == ("failed", "time_limit")


def test_e4_the_last_log_line_is_the_steps_own_not_sruns_trailer() -> None:
    tail = ("writer: CUDA out of memory", "srun: error: node2: task 0: Exited with exit code 7", "srun: Terminating")
    result = one(shard(0, attempt(0, status=ended("server_failed_to_start", tail=tail))), None)
    assert result.last_log_line == "writer: CUDA out of memory"


# -- M: matching evidence to attempts, array indices to shards ------------------------------------------------


def test_m1_array_index_is_not_a_shard_chunk_bindings_map_it() -> None:
    # chunk 1's array index 0 runs shard 11; evidence for job 1000 index 0 (shard 0) says nothing about it
    assert binding_of(11) == (1, 0)
    s11 = shard(11, attempt(11, beat_at=NOW, done=3, done_at=NOW))
    s0 = shard(0, attempt(0, status=ended("server_died")))
    observation = observed(
        evidence(task(0), "failed", exit_code=11, end=NOW - timedelta(minutes=3)),
        evidence(task(11), "running"),
    )
    result = status_of(snapshot(s0, s11), observation)
    assert [(s.shard, s.state, s.job_id, s.array_task) for s in result.shards] == [
        (0, "failed", "1000", 0),
        (11, "running", "1001", 0),
    ]


def test_m2_reader_maps_chunk_and_index_through_the_plan_and_a_retry_keeps_the_plans_indices() -> None:
    built = compiled()
    retry_job = SubmittedJob(
        chunk=1, generation=1, index_offset=11, job_name="dd-t-c1-r1", job_id=RETRY_JOB, array_spec="3", recovered=False
    )
    retry = SubmissionRecord(
        submitted_at=SUBMITTED + timedelta(hours=1), jobs=(retry_job,), submitted=1, recovered=0, sbatch_calls=1
    )
    chunks = {c.chunk: c for c in built.plan.submission.chunks}
    by_shard = _tasks_by_shard(built.run, [(retry, None), (first_submission(), None)], plan_chunks=chunks)
    assert sorted(by_shard) == list(range(SHARDS))
    assert [(t.job_id, t.array_task, t.chunk) for t in by_shard[0]] == [("1000", 0, 0)]
    assert [(t.job_id, t.array_task, t.chunk, t.generation) for t in by_shard[14]] == [
        ("1001", 3, 1, 0),
        (RETRY_JOB, 3, 1, 1),
    ]
    assert all(len(by_shard[k]) == 1 for k in range(SHARDS) if k != 14)


def test_m3_evidence_matches_the_attempt_by_job_task_and_restart_count() -> None:
    # two incarnations of the same task: the evidence's restart count picks incarnation 1's attempt
    first = attempt(0, 1, restarts=0, status=ended("preempted"))
    second = attempt(0, 2, restarts=1, status=ended("client_error", "bad column"))
    gone = evidence(task(0), "failed", exit_code=3, end=NOW - timedelta(minutes=3), restarts=1)
    result = one(shard(0, first, second), observed(gone))
    assert (result.state, result.reason, result.message) == ("failed", "client_error", "bad column")


def test_m4_a_late_task_that_lost_its_claim_is_superseded_not_failed() -> None:
    # the run's own task started late, found attempt 1 claimed by the retry and exited 4
    retry = task(0, job=RETRY_JOB, generation=1, submitted=SUBMITTED + timedelta(hours=1))
    mine = attempt(0, by=retry, beat_at=NOW - timedelta(seconds=1), done=6, done_at=NOW)
    lost = evidence(task(0), "failed", exit_code=EXIT_NOT_OURS, end=NOW - timedelta(minutes=1))
    result = one(shard(0, mine, tasks=(task(0), retry)), observed(lost, evidence(retry, "running")))
    assert (result.state, result.job_id, result.records_done) == ("running", RETRY_JOB, 6)
    assert result.anomalies == ("task 1000_0 was superseded (exit 4: its attempt was taken)",)
    done = attempt(0, by=retry, status=ended("succeeded"), published=FULL)
    finished = evidence(retry, "completed", exit_code=0, end=NOW - timedelta(minutes=2))
    assert one(shard(0, done, tasks=(task(0), retry)), observed(lost, finished)).state == "succeeded"


# -- A: attempt states ------------------------------------------------------------------------------------------


def test_a5_an_incarnation_requeued_away_without_status_is_a_failed_attempt() -> None:
    killed = attempt(0, 1, restarts=0, beat_at=NOW - timedelta(hours=1))
    pending = evidence(task(0), "requeued", raw="PENDING", start=None, restarts=1)
    result = one(shard(0, killed), observed(pending))
    assert [(a.attempt, a.state, a.restart_count) for a in result.attempts] == [(1, "failed", 0)]


def test_a2_a3_a4_a6_attempt_states_follow_their_records_and_evidence() -> None:
    attempts = (
        attempt(0, 1, status=ended("time_limit"), published=((0, 2),)),
        attempt(0, 2, restarts=1, status=ended("cancelled")),
        attempt(0, 3, restarts=2, status=ended("server_died")),
        attempt(0, 4, restarts=3, beat_at=NOW),
    )
    result = one(shard(0, *attempts), observed(evidence(task(0), "running", restarts=3)))
    assert [a.state for a in result.attempts] == ["partial", "cancelled", "failed", "running"]
    assert [a.records_published for a in result.attempts] == [2, None, None, None]


def test_a7_a8_attempt_of_a_pending_task_is_pending_a_terminal_one_without_status_inconsistent() -> None:
    # sacct down: squeue shows the task pending and cannot count its restarts; its attempt wrote no status
    held = attempt(0, beat_at=NOW - timedelta(minutes=30))
    result = one(shard(0, held), observed(evidence(task(0), "pending", start=None), sacct="failed"))
    assert [a.state for a in result.attempts] == ["pending"]
    late = evidence(task(0), "completed", exit_code=0, end=NOW - timedelta(seconds=DEFAULT_GRACE_S + 1))
    result = one(shard(0, held), observed(late))
    assert [(a.state, a.scheduler_state) for a in result.attempts] == [("scheduler_inconsistent", "COMPLETED")]


# -- R: the run state from shard counts, and the ETA -----------------------------------------------------------


def in_state(state: str, k: int) -> tuple[ShardSnapshot, TaskEvidence | None]:
    """Shard ``k`` built so that it classifies as ``state`` (with this observation's evidence for its task)."""
    ref = task(k)
    old = NOW - timedelta(minutes=10)
    if state == "succeeded":
        return shard(k, attempt(k, status=ended("succeeded"), published=FULL)), None
    if state == "running":
        return shard(k, attempt(k, beat_at=NOW)), evidence(ref, "running")
    if state == "pending":
        return shard(k), evidence(ref, "pending", start=None)
    if state == "partial":
        return shard(k, attempt(k, status=ended("time_limit"), published=HALF)), None
    if state == "failed":
        return shard(k, attempt(k, status=ended("server_died"))), None
    if state == "cancelled":
        return shard(k, attempt(k, status=ended("cancelled"))), None
    if state == "missing":
        return shard(k), None
    if state == "stale":
        return shard(k, attempt(k, beat_at=old)), evidence(ref, "running")
    if state == "scheduler_inconsistent":
        return shard(k, attempt(k)), evidence(ref, "completed", exit_code=0, end=old)
    if state == "not_submitted":
        return shard(k, tasks=()), None
    raise AssertionError(state)


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        pytest.param(("succeeded", "succeeded"), "succeeded", id="R2-all-succeeded"),
        pytest.param(("failed", "running", "stale", "pending"), "running", id="R3-any-running"),
        pytest.param(("failed", "pending", "succeeded"), "pending", id="R4-any-pending"),
        pytest.param(("failed", "partial", "cancelled"), "failed", id="R6-any-failed"),
        pytest.param(("partial", "cancelled", "succeeded"), "cancelled", id="R7-any-cancelled"),
        pytest.param(("partial", "succeeded", "stale"), "partial", id="R8-any-partial"),
        pytest.param(("missing", "stale", "scheduler_inconsistent"), "attention", id="R9-attention"),
        pytest.param(("succeeded", "missing"), "attention", id="R9-succeeded-and-missing"),
    ],
)
def test_r_run_state_from_shard_counts(states: tuple[str, ...], expected: str) -> None:
    built = [in_state(state, k) for k, state in enumerate(states)]
    run = snapshot(*(s for s, _ in built))
    result = status_of(run, observed(*(e for _, e in built if e is not None)))
    assert [s.state for s in result.shards] == list(states)
    assert result.state == expected
    assert sum(result.counts.values()) == result.shards_total == len(states)


def test_r1_r5_not_submitted_and_unknown_runs() -> None:
    refused = SubmissionRecord(submitted_at=SUBMITTED, jobs=(), submitted=0, recovered=0, sbatch_calls=1, error="no")
    assert status_of(snapshot(shard(0, tasks=()), submissions=(refused,)), None).state == "not_submitted"
    unknown = status_of(snapshot(shard(0, attempt(0)), in_state("failed", 1)[0]), None, evidence_kind="none")
    assert (unknown.state, unknown.counts) == ("unknown", {"failed": 1, "unknown": 1})


def test_eta_is_remaining_records_over_the_generation_rate() -> None:
    started = NOW - timedelta(seconds=100)
    a = attempt(0, beat_at=NOW, client_started=started, done=5, done_at=NOW)
    b = attempt(1, beat_at=NOW, client_started=started + timedelta(seconds=50), done=5, done_at=NOW)
    run = snapshot(shard(0, a), shard(1, b))
    result = status_of(run, observed(evidence(task(0), "running"), evidence(task(1), "running")))
    assert result.records_per_s == pytest.approx(0.1)  # 10 records over the longest elapsed 100 s
    assert result.eta_s == pytest.approx(100.0)  # 10 remaining


def test_eta_is_zero_when_done_and_unknown_without_a_rate() -> None:
    done = in_state("succeeded", 0)[0]
    assert status_of(snapshot(done), None).eta_s == 0.0
    failed = status_of(snapshot(in_state("failed", 0)[0]), None)
    assert (failed.eta_s, failed.records_per_s) == (None, None)


def test_evidence_age_and_sources_are_reported() -> None:
    observation = observed(sacct="timed_out")
    result = status_of(snapshot(shard(0)), observation, now=NOW + timedelta(seconds=30), evidence_kind="cached")
    assert (result.evidence, result.observed_at, result.evidence_age_s) == ("cached", iso(NOW), 30.0)
    assert result.sacct == observation.sacct


# -- properties: whatever the evidence --------------------------------------------------------------------------

_FINAL: tuple[FinalStatus, ...] = get_args(FinalStatus)
_TASK_STATES: tuple[TaskState, ...] = get_args(TaskState)
_COVERAGE = (None, ((0, 5),), ((5, 10),), ((0, 10),), ((3, 8),))


@st.composite
def shard_and_evidence(draw: st.DrawFn, k: int) -> tuple[ShardSnapshot, list[TaskEvidence]]:
    retry = task(k, job=RETRY_JOB, generation=1, submitted=SUBMITTED + timedelta(hours=1))
    refs = draw(st.sampled_from(((), (task(k),), (task(k), retry))))
    attempts = []
    for number in range(1, draw(st.integers(0, 3)) + 1):
        coverage = draw(st.sampled_from(_COVERAGE))
        attempts.append(
            attempt(
                k,
                number,
                by=draw(st.sampled_from((task(k), retry))),
                claimed=draw(st.booleans()),
                restarts=draw(st.integers(0, 2)),
                record=draw(st.booleans()),
                beat_at=draw(st.sampled_from((None, NOW, NOW - timedelta(minutes=5)))),
                done=draw(st.none() | st.integers(0, RECORDS_PER_SHARD)),
                done_at=NOW,
                status=draw(st.none() | st.sampled_from(_FINAL).map(ended)),
                published=coverage,
            )
        )
    found = []
    for ref in refs:
        if draw(st.booleans()):
            continue
        found.append(
            evidence(
                ref,
                draw(st.sampled_from(_TASK_STATES)),
                exit_code=draw(st.sampled_from((None, 0, 1, EXIT_NOT_OURS, 6, 10))),
                end=draw(st.sampled_from((None, NOW, NOW - timedelta(hours=1)))),
                restarts=draw(st.integers(0, 2)),
            )
        )
    return shard(k, *attempts, tasks=refs), found


@st.composite
def runs(draw: st.DrawFn) -> tuple[RunSnapshot, Observation | None]:
    drawn = [draw(shard_and_evidence(k)) for k in sorted(draw(st.sets(st.integers(0, SHARDS - 1), min_size=1)))]
    if draw(st.booleans()):
        return snapshot(*(s for s, _ in drawn)), None
    health: SourceStatus = draw(st.sampled_from(("ok", "failed", "timed_out", "disabled")))
    tasks = [e for _, found in drawn for e in found]
    return snapshot(*(s for s, _ in drawn)), observed(*tasks, sacct=health, lag=draw(st.booleans()))


@settings(max_examples=200, deadline=None)
@given(runs(), st.sampled_from(get_args(SchedulerEvidence)))
def test_property_succeeded_iff_complete_counts_sum_and_records_bounded(
    drawn: tuple[RunSnapshot, Observation | None], kind: SchedulerEvidence
) -> None:
    run, observation = drawn
    result = status_of(run, observation, evidence_kind=kind)
    assert sum(result.counts.values()) == result.shards_total == len(run.shards)
    assert set(result.counts) <= set(SHARD_STATES)
    assert result.records_done <= result.records_total
    for snap, got in zip(run.shards, result.shards, strict=True):
        assert (got.state == "succeeded") == (not snap.missing), got
        assert snap.records_done <= got.records_done <= got.records_total
        assert got.missing == snap.missing
    assert (result.state == "succeeded") == all(not s.missing for s in run.shards)


# -- D: damaged parts; N: what Slurm's terminal state adds; O: partial evidence ------------------------------------


def damaged_shard(k: int, problem: str = "missing") -> ShardSnapshot:
    """Shard ``k`` whose one complete attempt lost its only part (as the reader's cheap check reports it)."""
    plan = shard_plan(k)
    damage = PartDamage(
        shard=k,
        attempt=1,
        path=f"shards/{k:05d}/attempts/0001/output/part-00000.parquet",
        range=plan.range,
        problem=problem,  # type: ignore[arg-type]
        detail="the file is gone",
    )
    found = replace(attempt(k, published=FULL), damaged=(damage,))
    return shard_snapshot(plan, (found,), (task(k),), ())


def test_d1_a_complete_shard_with_a_lost_part_is_damaged_naming_the_part_its_records_and_the_retry() -> None:
    run = snapshot(shard(0, attempt(0, published=FULL)), damaged_shard(1))
    result = status_of(run, observed())
    lost = result.shards[1]
    assert (lost.state, lost.reason, lost.records_done) == ("damaged", "part_missing", 0)
    assert lost.missing == (shard_plan(1).range,)
    assert lost.damaged[0].path == "shards/00001/attempts/0001/output/part-00000.parquet"
    assert "records 10-19" in (lost.message or "")
    assert f"retry {run.run.run_id} --shard 1" in (lost.message or "")
    assert (result.state, result.counts) == ("damaged", {"damaged": 1, "succeeded": 1})


def test_d2_damage_a_retry_set_aside_is_not_damage_its_range_is_what_the_retry_generates() -> None:
    lost = damaged_shard(0)
    aside = SetAsidePart(damage=lost.damaged[0], moved_to=None)
    retried = shard_snapshot(lost.plan, lost.attempts, (task(0),), (aside,))
    assert (retried.damaged, retried.missing) == ((), (shard_plan(0).range,))
    assert one(retried, observed(evidence(task(0), "completed", exit_code=0, end=NOW))).state != "damaged"


def test_d3_damage_beside_other_missing_records_leaves_the_shard_its_state_with_an_anomaly() -> None:
    plan = shard_plan(0)
    half = replace(
        attempt(0, published=HALF, status=ended("time_limit")),
        damaged=(
            PartDamage(
                shard=0, attempt=1, path="p", range=IndexRange(plan.start, plan.start + 2), problem="size", detail="x"
            ),
        ),
    )
    result = one(shard_snapshot(plan, (half,), (task(0),), ()), observed())
    assert (result.state, result.reason, result.records_done) == ("partial", "time_limit", 3)
    assert any("part p" in note for note in result.anomalies)


def test_n1_a_node_failure_is_failed_node_fail_with_the_node_never_a_users_cancel() -> None:
    down = evidence(task(0), "node_fail", raw="NODE_FAIL", end=NOW - timedelta(minutes=4), reason="NodeDown")
    down = down.model_copy(update={"nodes": "node3"})
    # the supervisor's SIGTERM read as a cancel (an older release), or its own node_fail, or no status at all
    for status in (ended("cancelled", "the job was cancelled (JobState=NODE_FAIL, Reason=NodeDown)"), None):
        result = one(shard(0, attempt(0, status=status)), observed(down))
        assert (result.state, result.reason) == ("failed", "node_fail"), status
        assert "node node3 failed or was set DOWN" in (result.message or "")
    own = one(shard(0, attempt(0, status=ended("node_fail", "node(s) node3 failed or was set DOWN"))), observed(down))
    assert (own.state, own.reason, own.message) == ("failed", "node_fail", "node(s) node3 failed or was set DOWN")


def test_n2_out_of_memory_is_failed_out_of_memory_with_the_memory_asked_for() -> None:
    oom = evidence(task(0), "out_of_memory", raw="OUT_OF_MEMORY", exit_code=0, end=NOW - timedelta(minutes=4))
    result = one(shard(0, attempt(0, status=ended("client_error", "the client worker was killed"))), observed(oom))
    assert (result.state, result.reason) == ("failed", "out_of_memory")
    assert "ran out of memory" in (result.message or "")
    assert "--mem=" in (result.message or "")
    assert "client_error: the client worker was killed" in (result.message or "")


def test_n3_a_preemption_shows_its_requeue_evidence() -> None:
    again = evidence(task(0), "pending", raw="PENDING", restarts=1)
    requeued = evidence(task(0), "preempted", raw="PREEMPTED", end=NOW - timedelta(minutes=4), restarts=2)
    assert one(shard(0, attempt(0, status=ended("preempted", "preempted"))), observed(again)).state == "pending"
    last = attempt(0, restarts=2, status=ended("preempted", "preempted"), published=HALF)  # the third incarnation
    result = one(shard(0, last), observed(requeued))
    assert (result.state, result.reason) == ("partial", "preempted")
    assert "requeued the job 2 time(s)" in (result.message or "")


def test_o1_a_failed_source_beside_a_live_one_is_named_with_what_it_hides_and_who_depends_on_it() -> None:
    running_once = attempt(1, beat_at=NOW - timedelta(hours=1))
    run = snapshot(shard(0, attempt(0, published=FULL)), shard(1, running_once))
    result = status_of(run, observed(sacct="failed"))
    assert result.evidence == "live"
    (source,) = result.degraded
    assert (source.source, source.status, source.shards) == ("sacct", "failed", (1,))
    assert "left squeue" in source.hides
    healthy = status_of(snapshot(shard(0, attempt(0, published=FULL))), observed(sacct="timed_out"))
    assert [(d.source, d.shards) for d in healthy.degraded] == [("sacct", ())]
    assert status_of(run, observed()).degraded == ()
