"""``merge --as-job`` and the merge's state in ``status``, against the fake Slurm.

The fake accepts the merge job but runs nothing: a test plays the job's part by running the runtime merge itself
(``merge_snapshot`` on the run, on the fake's clock) and moves the job through Slurm states with ``set_state``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import CheckFailedError, InvalidInputError, MergeResult, MergeStatus
from data_designer.slurm.contracts.records import MERGE_JOB_SCHEMA
from data_designer.slurm.planner import ProfileTemplate, render_profile
from data_designer.slurm.runtime.merge import MergeOptions, merge_snapshot
from data_designer.slurm.runtime.status import Rules
from data_designer.slurm.runtime.store import RecordOk, RunLayout, merge_jobs_dir, read_record, read_run
from data_designer.slurm.runtime.testing import (
    FakeSlurm,
    ShardOutcome,
    outcome_cycle,
    register_run_jobs,
    write_run_directory,
)
from data_designer.slurm.services import merge_run, run_status

GRACE_S = 60.0


class Run:
    """A run of real Parquet parts, its jobs in the fake, and the profile it was made with (the run's own)."""

    def __init__(self, root: Path, outcomes: tuple[ShardOutcome, ...] = ("succeeded",) * 2, **profile: Any) -> None:
        self.fake = FakeSlurm(accounts=("ddtest",))
        workspace = root / "ws"
        workspace.mkdir()
        pick = outcome_cycle(outcomes)
        self.layout: RunLayout = write_run_directory(
            workspace, shards=len(outcomes), outcome=pick, clock=self.fake.clock, parquet_parts=True
        )
        register_run_jobs(self.fake, self.layout, outcome=pick)
        template = ProfileTemplate(
            cluster="local",
            workspace_root=str(workspace),
            account="ddtest",
            gpu_partition="gpu",
            cpu_partition="cpu",
            python=profile.get("python", sys.executable),
        )
        (workspace / "profile.yaml").write_text(render_profile(template), encoding="utf-8")
        self.ref = str(self.layout.run_dir)

    def submit(self, **kwargs: Any) -> MergeResult:
        return merge_run(self.ref, as_job=True, runner=self.fake, clock=self.fake.clock, environ={}, **kwargs)

    def merge_status(self) -> MergeStatus | None:
        status = run_status(self.ref, runner=self.fake, clock=self.fake.clock, environ={}, rules=Rules(grace_s=GRACE_S))
        return status.merge

    def run_the_job(self, **options: Any) -> None:
        """What the job does on a compute node: the runtime merge of the run."""
        merge_snapshot(read_run(self.layout, clock=self.fake.clock), MergeOptions(**options), clock=self.fake.clock)

    def sbatch_calls(self) -> list[tuple[str, ...]]:
        return [argv for argv in self.fake.calls if argv[0] == "sbatch"]


def test_as_job_submits_one_cpu_task_records_it_and_returns_at_once(tmp_path: Path) -> None:
    run = Run(tmp_path)
    result = run.submit()

    rid = run.layout.run_id
    assert result.outcome == "submitted"
    assert result.job_name == f"dd-{rid}-merge-1"
    assert result.job_id == "1001"  # after the run's one chunk
    assert result.merge_dir is None  # the job picks the next merge/NNNN
    assert not run.layout.merge_dir.joinpath("0001").exists(), "nothing is merged here"
    [argv] = run.sbatch_calls()
    jobs = merge_jobs_dir(run.layout)
    for expected in (
        "--partition=cpu",
        "--account=ddtest",
        "--nodes=1",
        "--ntasks=1",
        f"--chdir={run.layout.run_dir}",
        f"--output={jobs}/slurm-dd-{rid}-merge-1.out",
        f"--error={jobs}/slurm-dd-{rid}-merge-1.err",
        f"--job-name=dd-{rid}-merge-1",
        "--array=0",
    ):
        assert expected in argv
    script = run.fake.jobs[1001].script
    assert f"exec {sys.executable} -m data_designer.slurm.runtime.merge --run-dir {run.layout.run_dir}" in script
    record = read_record(jobs / "0001.json", MERGE_JOB_SCHEMA)
    assert isinstance(record, RecordOk)
    assert (record.payload.job_id, record.payload.job_name) == ("1001", f"dd-{rid}-merge-1")
    assert record.payload.output is None

    second = run.submit(output=tmp_path / "elsewhere", drop_provenance=True, max_rows_per_file=7)
    assert (second.job_name, second.job_id) == (f"dd-{rid}-merge-2", "1002")
    assert second.merge_dir == str(tmp_path / "elsewhere")
    tail = run.fake.jobs[1002].script.splitlines()[-1]
    assert tail.endswith(f"--output {tmp_path / 'elsewhere'} --max-rows-per-file 7 --drop-provenance")


def test_status_follows_the_job_from_pending_to_running_to_succeeded(tmp_path: Path) -> None:
    run = Run(tmp_path)
    job = run.submit().job_id
    assert job is not None

    pending = run.merge_status()
    assert pending is not None
    assert (pending.state, pending.job_id) == ("pending", job)
    status = run_status(run.ref, runner=run.fake, clock=run.fake.clock, environ={})
    assert status.scheduler_calls == 2, "the merge job is asked about in the run's one squeue and one sacct"
    squeue = next(argv for argv in reversed(run.fake.calls) if argv[0] == "squeue")
    assert job in squeue[squeue.index("-j") + 1].split(",")

    run.fake.set_state(job, 0, "RUNNING")
    assert run.merge_status() == MergeStatus(state="running", job_id=job)

    run.fake.advance(5)
    run.run_the_job()
    run.fake.set_state(job, 0, "COMPLETED")
    done = run.merge_status()
    assert done is not None
    assert (done.state, done.records, done.complete) == ("succeeded", 20, True)
    assert done.merge_dir == str(run.layout.merge_dir / "0001")


def test_a_manifest_shows_succeeded_before_slurm_reports_the_end(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.submit()
    run.fake.advance(1)
    run.run_the_job()
    merge = run.merge_status()
    assert merge is not None
    assert merge.state == "succeeded"


def test_a_cancelled_merge_job_is_cancelled(tmp_path: Path) -> None:
    run = Run(tmp_path)
    job = run.submit().job_id
    assert job is not None
    run.fake.run(["scancel", job], timeout_s=5)
    merge = run.merge_status()
    assert merge is not None
    assert merge.state == "cancelled"
    assert (merge.message or "").startswith("Slurm: CANCELLED")


def test_a_job_that_ended_without_a_manifest_is_failed_with_its_exit_code_and_stderr(tmp_path: Path) -> None:
    run = Run(tmp_path)
    result = run.submit()
    assert result.job_id is not None
    err = merge_jobs_dir(run.layout) / f"slurm-{result.job_name}.err"
    err.write_text("Traceback (most recent call last):\nOSError: [Errno 28] No space left on device\n")
    run.fake.set_state(result.job_id, 0, "FAILED", exit_code=1)
    run.fake.advance(3)  # past the accounting lag: sacct has the exit code
    merge = run.merge_status()
    assert merge is not None
    assert merge.state == "failed"
    assert merge.message == (
        "Slurm says FAILED (exit 1) and no merge manifest was written: OSError: [Errno 28] No space left on device"
    )


def test_a_completed_job_without_a_manifest_waits_the_grace_then_is_failed(tmp_path: Path) -> None:
    run = Run(tmp_path)
    job = run.submit().job_id
    assert job is not None
    run.fake.set_state(job, 0, "COMPLETED")
    waiting = run.merge_status()
    assert waiting is not None
    assert waiting.state == "running"  # the shared filesystem may not show the manifest yet
    run.fake.advance(GRACE_S + 1)
    failed = run.merge_status()
    assert failed is not None
    assert failed.state == "failed"
    assert failed.message == "Slurm says COMPLETED (exit 0) and no merge manifest was written"


def test_a_completed_job_that_reused_an_earlier_merge_is_succeeded(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.run_the_job()  # merged in the foreground first
    run.fake.advance(5)
    job = run.submit().job_id
    assert job is not None
    run.fake.set_state(job, 0, "COMPLETED")
    merge = run.merge_status()
    assert merge is not None
    assert (merge.state, merge.message) == ("succeeded", "the same evidence was merged before")


def test_a_job_slurm_never_heard_of_is_failed_after_the_grace_never_running(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.submit()
    record = read_record(merge_jobs_dir(run.layout) / "0001.json", MERGE_JOB_SCHEMA)
    assert isinstance(record, RecordOk)
    forged = record.payload.model_copy(update={"job_id": "99999"})  # as if its accounting were purged
    from data_designer.slurm.runtime.store import append_record

    append_record(merge_jobs_dir(run.layout), MERGE_JOB_SCHEMA, forged, clock=run.fake.clock)
    early = run.merge_status()
    assert early is not None
    assert (early.state, early.job_id) == ("pending", "99999")
    run.fake.advance(GRACE_S + 1)
    late = run.merge_status()
    assert late is not None
    assert late.state == "failed"
    assert late.message == "no evidence: neither squeue nor sacct knows job 99999"


def test_the_merge_is_unknown_while_slurm_cannot_be_asked(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.submit()
    run.fake.fail("squeue")
    run.fake.fail("sacct")
    merge = run.merge_status()
    assert merge is not None
    assert merge.state == "unknown"
    run.fake.heal()
    seen = run.merge_status()
    assert seen is not None
    assert seen.state == "pending"
    run.fake.fail("squeue")
    run.fake.fail("sacct")
    cached = run.merge_status()
    assert cached is not None
    assert cached.state == "unknown"  # the recorded observation says pending, but it is old evidence
    assert cached.message == "Slurm could not be asked; last seen PENDING"


def test_a_foreground_merge_is_succeeded_without_a_job_and_a_run_without_merges_has_none(tmp_path: Path) -> None:
    run = Run(tmp_path)
    assert run.merge_status() is None
    run.run_the_job()
    merge = run.merge_status()
    assert merge is not None
    assert (merge.state, merge.job_id, merge.records) == ("succeeded", None, 20)


def test_as_job_refuses_a_run_not_complete_without_allow_partial(tmp_path: Path) -> None:
    run = Run(tmp_path, ("succeeded", "failed_server"))
    with pytest.raises(CheckFailedError) as refused:
        run.submit()
    assert refused.value.info.code == "run_incomplete"
    assert "1 (failed, server_failed_to_start)" in refused.value.info.message
    assert run.sbatch_calls() == []
    assert not merge_jobs_dir(run.layout).exists()

    partial = run.submit(allow_partial=True)
    assert partial.outcome == "submitted"
    assert "--allow-partial" in run.fake.jobs[int(partial.job_id or 0)].script


def test_as_job_refuses_an_image_compute_python_and_an_output_slurm_reads_as_a_pattern(tmp_path: Path) -> None:
    run = Run(tmp_path)
    with pytest.raises(InvalidInputError) as unsafe:
        run.submit(output=tmp_path / "100%")
    assert unsafe.value.info.code == "unsafe_slurm_path"
    assert unsafe.value.info.key_path == ("--output",)
    profile = run.layout.root / "profile.yaml"
    text = profile.read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if "interpreter:" in line)
    profile.write_text(text.replace(line, line.split("interpreter:")[0] + "image: dd-client"), encoding="utf-8")
    with pytest.raises(InvalidInputError) as image:
        run.submit()
    assert image.value.info.code == "merge_job_needs_interpreter"
    assert run.sbatch_calls() == []


def test_the_cli_submits_with_json_and_status_prints_the_merge_line(tmp_path: Path, monkeypatch: Any) -> None:
    run = Run(tmp_path)
    import data_designer.slurm.services.collect._merge_job as merge_job
    import data_designer.slurm.services.context._context as status_service

    monkeypatch.setattr(merge_job, "cpu_job_runner", lambda cluster, env=None: run.fake)
    monkeypatch.setattr(status_service, "SubprocessRunner", lambda env=None: run.fake)
    submitted = CliRunner().invoke(app, ["merge", run.ref, "--as-job", "--json"])
    assert submitted.exit_code == 0, submitted.output
    result = json.loads(submitted.output)
    assert (result["outcome"], result["job_id"]) == ("submitted", "1001")
    shown = CliRunner().invoke(app, ["status", run.ref])
    assert "merge: pending (job 1001)" in shown.output
