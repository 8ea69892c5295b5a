"""One-task jobs on the profile's CPU partition (the probe job, the merge job): their submission, one helper."""

from data_designer.slurm.runtime.jobs._cpu_job import (
    DISCARD,
    CpuJob,
    command_script,
    compute_launcher,
    cpu_job_runner,
    cpu_job_unit,
    submit_cpu_job,
    submitting_runner,
)

__all__ = [
    "DISCARD",
    "CpuJob",
    "command_script",
    "compute_launcher",
    "cpu_job_runner",
    "cpu_job_unit",
    "submit_cpu_job",
    "submitting_runner",
]
