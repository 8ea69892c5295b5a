"""The merge state rule (``status.merge_status``, rows M1-M10 of ``docs/architecture/status.md``), the reader's
side of it (merge job records and the newest manifest, read only when the run lists ``merge/``) and the merge
job's entry point (``python -m data_designer.slurm.runtime.merge``: exit 0, 6 or 1)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from data_designer.slurm.contracts import Observation, SourceReport, SourceStatus, TaskEvidence, TaskState
from data_designer.slurm.contracts.records import MERGE_JOB_SCHEMA, MergeJobRecord
from data_designer.slurm.runtime.merge import MergeOptions, merge_snapshot
from data_designer.slurm.runtime.merge._job_main import main
from data_designer.slurm.runtime.status import merge_status
from data_designer.slurm.runtime.store import (
    MergeFound,
    MergeJobSnapshot,
    RunLayout,
    RunSnapshot,
    append_record,
    merge_jobs_dir,
    read_run,
)
from data_designer.slurm.runtime.testing import write_run_directory

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SUBMITTED = NOW - timedelta(minutes=5)
GRACE = 60.0
JOB = "4242"


def clock() -> datetime:
    return NOW


@pytest.fixture
def layout(tmp_path: Path) -> RunLayout:
    return write_run_directory(tmp_path, shards=2, records_per_shard=3, clock=clock, parquet_parts=True)


@pytest.fixture
def merged(layout: RunLayout) -> MergeFound:
    done = merge_snapshot(read_run(layout, clock=clock), MergeOptions(), clock=lambda: SUBMITTED + timedelta(minutes=1))
    return MergeFound(done.directory, done.manifest, SUBMITTED + timedelta(minutes=1))


def job(*, err: str | None = None) -> MergeJobSnapshot:
    record = MergeJobRecord(job_id=JOB, job_name="dd-x-merge-1", submitted_at=SUBMITTED, max_rows_per_file=10)
    return MergeJobSnapshot(record, SUBMITTED, last_error_line=err)


def snap(layout: RunLayout, *, jobs: tuple[MergeJobSnapshot, ...] = (), merge: MergeFound | None = None) -> RunSnapshot:
    return replace(read_run(layout, clock=clock), merge_jobs=jobs, merge=merge)


def observed(
    state: TaskState | None = None,
    *,
    raw: str | None = None,
    exit_code: int | None = None,
    ended: datetime | None = None,
    sacct: SourceStatus = "ok",
) -> Observation:
    tasks: tuple[TaskEvidence, ...] = ()
    if state is not None:
        tasks = (
            TaskEvidence(
                job_id=JOB,
                array_index=0,
                state=state,
                raw_state=raw or state.upper(),
                exit_code=exit_code,
                end_time=ended.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if ended else None,
                source="sacct",
                observed_at="2026-03-01T12:00:00.000000Z",
            ),
        )
    return Observation(
        observed_at="2026-03-01T12:00:00.000000Z",
        tasks=tasks,
        squeue=SourceReport(source="squeue", status="ok"),
        sacct=SourceReport(source="sacct", status=sacct),
        calls=2,
    )


def state_of(snapshot: RunSnapshot, observation: Observation | None) -> tuple[str, str | None]:
    found = merge_status(snapshot, observation, NOW, grace_s=GRACE, evidence="live")
    assert found is not None
    return found.state, found.message


def test_m0_a_run_without_merge_job_or_merge_has_no_merge_state(layout: RunLayout) -> None:
    assert merge_status(snap(layout), observed(), NOW, grace_s=GRACE, evidence="live") is None


def test_m1_a_foreground_merge_is_succeeded(layout: RunLayout, merged: MergeFound) -> None:
    found = merge_status(snap(layout, merge=merged), None, NOW, grace_s=GRACE, evidence="none")
    assert found is not None
    assert (found.state, found.job_id, found.records, found.complete) == ("succeeded", None, 6, True)
    assert found.merge_dir == str(merged.directory)


def test_m2_a_manifest_newer_than_the_job_is_succeeded_whatever_slurm_says(
    layout: RunLayout, merged: MergeFound
) -> None:
    assert state_of(snap(layout, jobs=(job(),), merge=merged), observed("running"))[0] == "succeeded"
    assert state_of(snap(layout, jobs=(job(),), merge=merged), None)[0] == "succeeded"


def test_m3_pending_and_running_jobs_and_a_fresh_unseen_one(layout: RunLayout) -> None:
    one = snap(layout, jobs=(job(),))
    assert state_of(one, observed("pending"))[0] == "pending"
    assert state_of(one, observed("requeued"))[0] == "pending"
    assert state_of(one, observed("running"))[0] == "running"
    fresh = replace(one, merge_jobs=(replace(job(), record=job().record.model_copy(update={"submitted_at": NOW})),))
    assert state_of(fresh, observed()) == ("pending", "submitted; not yet in accounting")


def test_m4_a_cancelled_job_is_cancelled(layout: RunLayout) -> None:
    assert state_of(snap(layout, jobs=(job(),)), observed("cancelled", raw="CANCELLED by 0")) == (
        "cancelled",
        "Slurm: CANCELLED by 0",
    )


def test_m5_a_completed_job_with_an_older_manifest_reused_it(layout: RunLayout, merged: MergeFound) -> None:
    older = replace(merged, written_at=SUBMITTED - timedelta(hours=1))
    assert state_of(snap(layout, jobs=(job(),), merge=older), observed("completed", ended=NOW))[0] == "succeeded"


def test_m6_m7_a_completed_job_without_manifest_waits_the_grace_then_is_failed(layout: RunLayout) -> None:
    one = snap(layout, jobs=(job(),))
    assert state_of(one, observed("completed", exit_code=0, ended=NOW - timedelta(seconds=10)))[0] == "running"
    assert state_of(one, observed("completed", exit_code=0, ended=NOW - timedelta(seconds=GRACE + 1))) == (
        "failed",
        "Slurm says COMPLETED (exit 0) and no merge manifest was written",
    )


def test_m7_a_failed_job_names_its_exit_code_and_the_last_line_of_its_stderr(layout: RunLayout) -> None:
    one = snap(layout, jobs=(job(err="merge refused: run r is missing records of shard(s) 1"),))
    assert state_of(one, observed("failed", exit_code=6, ended=NOW)) == (
        "failed",
        "Slurm says FAILED (exit 6) and no merge manifest was written: merge refused: run r is missing records of "
        "shard(s) 1",
    )
    assert state_of(one, observed("out_of_memory", raw="OUT_OF_MEMORY", exit_code=0, ended=NOW))[0] == "failed"


def test_m8_a_job_neither_source_knows_after_the_grace_is_failed(layout: RunLayout) -> None:
    assert state_of(snap(layout, jobs=(job(),)), observed()) == (
        "failed",
        f"no evidence: neither squeue nor sacct knows job {JOB}",
    )


def test_m9_cached_evidence_after_a_failed_ask_cannot_say_pending_or_running(layout: RunLayout) -> None:
    one = snap(layout, jobs=(job(),))
    found = merge_status(one, observed("running"), NOW, grace_s=GRACE, evidence="cached", asked=True)
    assert found is not None
    assert (found.state, found.message) == ("unknown", "Slurm could not be asked; last seen RUNNING")
    shown = merge_status(one, observed("running"), NOW, grace_s=GRACE, evidence="cached", asked=False)
    assert shown is not None
    assert shown.state == "running"  # --no-refresh: the recorded state as it was


def test_m10_without_any_observation_or_sacct_the_merge_is_unknown(layout: RunLayout) -> None:
    one = snap(layout, jobs=(job(),))
    assert state_of(one, None)[0] == "unknown"
    assert state_of(one, observed(sacct="timed_out")) == ("unknown", "no scheduler evidence (sacct timed_out)")


def test_the_reader_reads_merges_only_when_the_run_lists_merge_and_the_stderr_only_without_a_newer_manifest(
    layout: RunLayout,
) -> None:
    plain = read_run(layout, clock=clock)
    assert (plain.merge_jobs, plain.merge) == ((), None)
    jobs = merge_jobs_dir(layout)
    jobs.mkdir(parents=True)
    record = job().record
    append_record(jobs, MERGE_JOB_SCHEMA, record, clock=clock)
    (jobs / "slurm-dd-x-merge-1.err").write_text("first\nlast words\n\n", encoding="utf-8")
    snapshot = read_run(layout, clock=clock)
    assert snapshot.merge_job == MergeJobSnapshot(record, NOW, last_error_line="last words")
    assert snapshot.observed_job_ids == (*snapshot.job_ids, JOB)
    assert snapshot.stats.files_read > plain.stats.files_read
    merge_snapshot(snapshot, MergeOptions(), clock=clock)
    after = read_run(layout, clock=clock)
    assert after.merge is not None
    assert after.merge.directory == layout.merge_dir / "0001"
    assert after.merge_job is not None
    assert after.merge_job.last_error_line is None


def test_the_job_entry_point_merges_refuses_and_fails_with_its_exit_codes(
    layout: RunLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--run-dir", str(layout.run_dir), "--max-rows-per-file", "4"]) == 0
    out = capsys.readouterr().out
    assert '"outcome": "merged"' in out
    assert '"records": 6' in out
    assert main(["--run-dir", str(layout.run_dir), "--max-rows-per-file", "4"]) == 0
    assert '"outcome": "reused"' in capsys.readouterr().out
    assert main(["--run-dir", str(tmp_path / "runs" / "nope-20260101T000000Z-000000")]) == 1
    assert "merge failed" in capsys.readouterr().err


def test_the_job_entry_point_refuses_a_run_missing_records_with_exit_6(tmp_path: Path) -> None:
    from data_designer.slurm.runtime.testing import outcome_cycle

    partial = write_run_directory(
        tmp_path,
        shards=2,
        records_per_shard=3,
        clock=clock,
        parquet_parts=True,
        outcome=outcome_cycle(("succeeded", "cancelled")),
    )
    done = subprocess.run(
        [sys.executable, "-m", "data_designer.slurm.runtime.merge", "--run-dir", str(partial.run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 6, done.stderr
    assert "merge refused: run" in done.stderr
    assert "missing records of shard(s) 1" in done.stderr
    assert "data_designer.slurm.services" not in done.stderr
    imports = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "data_designer.slurm.runtime.merge", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert imports.returncode == 0
    assert "data_designer.slurm.services" not in imports.stderr, "the merge job imports nothing above the runtime"
