"""A retry whose ``sbatch`` reply is lost, on the real local Slurm cluster: the next retry finds the job by name.

One shard whose server crashes at start fails; ``retry_run`` (in process, through the real ``sbatch``, ``squeue``
and ``sacct``) submits generation 1, but the reply is lost (``ReplyLosingRunner``: sbatch ran and Slurm holds the
job, the caller saw a timeout). The intent stays without a submission record. A second ``retry_run`` whose holder
check says the first one is gone resumes the intent: real ``squeue --name`` and ``sacct --name -S`` find the job,
and it makes no ``sbatch`` call at all. Slurm holds exactly one job of that name.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from data_designer.slurm.contracts import TERMINAL_TASK_STATES, UnavailableError
from data_designer.slurm.contracts.records import SUBMISSION_SCHEMA
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, read_record, sequence_numbers
from data_designer.slurm.runtime.testing import CountingRunner, ReplyLosingRunner, writer_run
from data_designer.slurm.services import retry_run, run_status

pytestmark = [pytest.mark.cluster]


def test_a_lost_sbatch_reply_is_found_by_name_and_never_submitted_twice(
    tmp_path: Path, local_slurm: dict[str, str], e2e: ModuleType
) -> None:
    run = writer_run(
        "lost-reply",
        records=2,
        shards=1,
        replicas=1,
        gpus_per_replica=0,
        server_flags=["--crash-at-start"],
        client={"cpus": 1, "memory_gb": 1},
        submission={"time_limit": "00:10:00", "warning_lead_s": 60, "drain_grace_s": 10},
    )
    layout, result = e2e.execute(tmp_path / "run", local_slurm, run, sys.executable)
    slurm = e2e.slurm_env(local_slurm)
    real = SubprocessRunner(overrides=slurm)
    scheduler = SlurmScheduler(real)
    profile = tmp_path / "run" / "profile.yaml"

    deadline = time.monotonic() + 120
    while run_status(layout.run_id.text, profile=profile, runner=real).shards[0].state != "failed":
        assert time.monotonic() < deadline, "the crashing shard did not fail within 120 s"
        time.sleep(1)

    with pytest.raises(UnavailableError) as lost:
        retry_run(layout.run_id.text, profile=profile, runner=ReplyLosingRunner(real, count=1), environ={})
    assert lost.value.info.code == "sbatch_reply_lost"
    assert layout.retry_intent(1).exists()
    generations = []
    for number in sequence_numbers(layout.submissions_dir):
        found = read_record(layout.submission_record(number), SUBMISSION_SCHEMA)
        assert isinstance(found, RecordOk)
        generations.append(found.payload.generation)
    assert generations == [0]  # the intent has no submission record: its reply never arrived

    counting = CountingRunner(real)
    resumed = retry_run(layout.run_id.text, profile=profile, runner=counting, environ={}, alive=lambda who: False)
    assert resumed.resumed == (1,)
    assert resumed.recovered == 1
    assert counting.count("sbatch") == 0
    job_name = f"dd-{layout.run_id}-r1-c0"
    assert [job.job_name for job in resumed.jobs] == [job_name]

    assert jobs_named(job_name, slurm) == {resumed.jobs[0].job_id}  # one job of that name: the one found
    scheduler.cancel([job.job_id for job in (*result.jobs, *resumed.jobs)], confirm_timeout_s=60)
    tasks = scheduler.observe([resumed.jobs[0].job_id]).tasks
    assert all(task.state in TERMINAL_TASK_STATES for task in tasks)


def jobs_named(job_name: str, slurm: dict[str, str]) -> set[str]:
    """The job ids squeue or accounting know under ``job_name`` (polled briefly: sacct lags a new job)."""
    env = {**os.environ, **slurm}
    found: set[str] = set()
    deadline = time.monotonic() + 30
    while not found and time.monotonic() < deadline:
        for argv in (
            ["squeue", "--noheader", "-t", "all", f"--name={job_name}", "-o", "%F"],
            ["sacct", "-X", "-n", "-P", "-o", "JobID", "-S", "now-1hours", f"--name={job_name}"],
        ):
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=True)
            found |= {line.split("_")[0] for line in done.stdout.split()}
        time.sleep(0 if found else 1)
    return found
