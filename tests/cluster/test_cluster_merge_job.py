"""``merge --as-job`` on the real local Slurm cluster, each call a fresh process of the installed CLI.

A tiny run (2 shards of 2 records, the test server) is merged by a merge job on the CPU partition; ``status
--json`` is polled until it shows the merge succeeded, and the merge directory holds the run's records. A second
merge job, into a new ``--output``, is held back by the profile's ``--begin=now+600`` (an sbatch option the profile
may set) and ``scancel``-ed while pending: ``status`` then shows the merge cancelled, and nothing was written.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from data_designer.slurm.contracts import MergeResult, MergeStatus, RunStatus
from data_designer.slurm.contracts.records import MERGE_MANIFEST_SCHEMA
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, merge_jobs_dir, read_record
from data_designer.slurm.runtime.testing import run_logs, writer_run

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
SHARDS = 2
RECORDS = 4
WAIT_S = 180
CLI_TIMEOUT_S = 120


def test_a_merge_job_succeeds_in_status_and_a_cancelled_one_shows_cancelled(
    tmp_path: Path, local_slurm: dict[str, str], e2e: ModuleType
) -> None:
    client = {"cpus": 1, "memory_gb": 1, "batch_size": 2, "concurrency": {"writer": 1}}
    submission = {"time_limit": "00:10:00", "warning_lead_s": 60, "drain_grace_s": 10}
    document = writer_run(
        "mergejob", records=RECORDS, shards=SHARDS, replicas=1, gpus_per_replica=0, client=client, submission=submission
    )
    directory = tmp_path / "run"
    finished = e2e.execute_and_wait(directory, local_slurm, document, sys.executable)
    layout = finished.layout
    assert [finished.statuses[s].status for s in range(SHARDS)] == ["succeeded"] * SHARDS, finished.diagnosis()
    profile = directory / "profile.yaml"
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
    env.update({**e2e.slurm_env(local_slurm), "HOME": str(directory / "home"), "COLUMNS": "200"})
    scheduler = SlurmScheduler(SubprocessRunner(overrides=e2e.slurm_env(local_slurm)))
    job_ids: list[str] = []

    def cli(verb: str, *flags: str, profile_file: Path = profile) -> subprocess.CompletedProcess[str]:
        argv = [str(DATA_DESIGNER), "slurm", verb, finished.result.run_id, "--profile", str(profile_file), *flags]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)

    def submitted(done: subprocess.CompletedProcess[str]) -> MergeResult:
        assert done.returncode == 0, done.stderr
        result = MergeResult.model_validate_json(done.stdout)
        assert result.outcome == "submitted"
        assert result.job_id is not None
        job_ids.append(result.job_id)
        return result

    def merge_state() -> MergeStatus:
        done = cli("status", "--json")
        assert done.returncode == 0, done.stderr
        merge = RunStatus.model_validate_json(done.stdout).merge
        assert merge is not None, done.stdout
        return merge

    def wait_for(state: str) -> MergeStatus:
        deadline = time.monotonic() + WAIT_S
        while (merge := merge_state()).state != state:
            assert merge.state in ("pending", "running"), (merge, job_logs())
            assert time.monotonic() < deadline, f"merge not {state} within {WAIT_S}s: {merge}\n{job_logs()}"
            time.sleep(1)
        return merge

    def job_logs() -> str:
        jobs = merge_jobs_dir(layout)
        texts = [f"{p.name}: {p.read_text(errors='replace')[-1500:]}" for p in sorted(jobs.glob("slurm-*"))]
        return "\n".join(texts) + "\n" + run_logs(layout, tail_chars=800)

    try:
        first = submitted(cli("merge", "--as-job", "--json"))
        assert first.job_name == f"dd-{layout.run_id}-merge-1"
        merge = wait_for("succeeded")
        assert (merge.job_id, merge.records, merge.complete) == (first.job_id, RECORDS, True)
        assert merge.merge_dir == str(layout.merge_dir / "0001")
        manifest = read_record(layout.merge_dir / "0001" / "manifest.json", MERGE_MANIFEST_SCHEMA)
        assert isinstance(manifest, RecordOk)
        assert (manifest.payload.records, manifest.payload.records_total) == (RECORDS, RECORDS)
        assert sum(f.records for f in manifest.payload.files) == RECORDS
        assert (merge_jobs_dir(layout) / f"slurm-{first.job_name}.out").is_file()

        held = directory / "profile-held.yaml"
        text = profile.read_text(encoding="utf-8")
        assert "sbatch_options: []" in text
        held.write_text(text.replace("sbatch_options: []", 'sbatch_options: ["--begin=now+600"]'), encoding="utf-8")
        output = tmp_path / "second-merge"
        second = submitted(cli("merge", "--as-job", "--output", str(output), "--json", profile_file=held))
        assert second.merge_dir == str(output)
        assert merge_state().state == "pending"
        cancelled = subprocess.run(
            ["scancel", second.job_id or ""], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert cancelled.returncode == 0, cancelled.stderr
        merge = wait_for("cancelled")
        assert merge.job_id == second.job_id
        assert not output.exists(), "a merge job cancelled while pending wrote nothing"
    finally:
        scheduler.cancel([job.job_id for job in finished.result.jobs] + job_ids, confirm_timeout_s=60)
