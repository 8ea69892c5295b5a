"""The one-task CPU job helper (``runtime.jobs``): its sbatch argv, its script, its path checks."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts import ClusterProfile, InvalidInputError
from data_designer.slurm.runtime.jobs import CpuJob, command_script, compute_launcher, cpu_job_unit, submit_cpu_job
from data_designer.slurm.runtime.scheduler import SlurmScheduler
from data_designer.slurm.runtime.testing import FakeSlurm


def cluster_of(**overrides: Any) -> ClusterProfile:
    data: dict[str, Any] = {
        "workspace_root": "/ws",
        "account": "ddtest",
        "partitions": {"gpu": "gpu", "cpu": "cpu"},
        "compute_python": {"interpreter": sys.executable},
        "sbatch_options": ["--qos=debug"],
    }
    data.update(overrides)
    return ClusterProfile.model_validate(data)


def job(**overrides: Any) -> CpuJob:
    values: dict[str, Any] = {
        "job_name": "dd-run-merge-1",
        "script": command_script(["python", "-c", "print('it''s')"], title="a job"),
        "workdir": "/ws/runs/r",
        "time_limit": "01:00:00",
        "output": "/ws/runs/r/merge/jobs/slurm-dd-run-merge-1.out",
        "error": "/ws/runs/r/merge/jobs/slurm-dd-run-merge-1.err",
    }
    values.update(overrides)
    return CpuJob(**values)


def test_the_unit_is_one_task_on_the_cpu_partition_with_the_profiles_options_first() -> None:
    unit = cpu_job_unit(cluster_of(), job(environment=("HF_TOKEN",)))
    assert unit.sbatch_args == (
        "--qos=debug",
        "--partition=cpu",
        "--time=01:00:00",
        "--nodes=1",
        "--ntasks=1",
        "--output=/ws/runs/r/merge/jobs/slurm-dd-run-merge-1.out",
        "--error=/ws/runs/r/merge/jobs/slurm-dd-run-merge-1.err",
        "--chdir=/ws/runs/r",
        "--export=ALL,HF_TOKEN",
        "--account=ddtest",
    )
    assert unit.environment == ("HF_TOKEN",)
    assert [(c.job_name, c.array_spec) for c in unit.chunks] == [("dd-run-merge-1", "0")]
    assert not any(a.startswith("--account") for a in cpu_job_unit(cluster_of(account=None), job()).sbatch_args)


@pytest.mark.parametrize("field", ["workdir", "output", "error"])
def test_a_path_slurm_would_read_as_a_pattern_is_refused(field: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        cpu_job_unit(cluster_of(), job(**{field: "/ws/runs/100%/x"}))
    assert refused.value.info.code == "unsafe_slurm_path"
    assert refused.value.info.exit_code == 2


def test_the_script_execs_the_quoted_argv(tmp_path: Path) -> None:
    script = command_script(["/opt/py thon", "-m", "mod", "--x", "a'b"], title="title here")
    assert script == "#!/bin/bash\n# title here\nexec '/opt/py thon' -m mod --x 'a'\"'\"'b'\n"


def test_the_launcher_is_the_interpreter_and_none_for_an_image() -> None:
    assert compute_launcher(cluster_of()) == (sys.executable,)
    assert compute_launcher(cluster_of(compute_python={"image": "dd:latest"})) is None


def test_submitting_twice_finds_the_job_again_by_name() -> None:
    fake = FakeSlurm()
    scheduler = SlurmScheduler(fake, clock=fake.clock, sleep=fake.sleep)
    first = submit_cpu_job(scheduler, cluster_of(), job(), since=fake.clock())
    again = submit_cpu_job(scheduler, cluster_of(), job(), since=fake.clock())
    assert (first.job_id, first.recovered) == ("1000", False)
    assert (again.job_id, again.recovered) == ("1000", True)
    assert fake.count_calls("sbatch") == 1
