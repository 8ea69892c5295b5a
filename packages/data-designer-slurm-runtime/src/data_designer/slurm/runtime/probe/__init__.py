"""The profile probe: checks of one profile cluster against the Slurm it reaches, and the probe job."""

from data_designer.slurm.runtime.probe._checks import (
    DEFAULT_PROBE_TIMEOUT_S,
    PROBE_COMMANDS,
    gpus_in_gres,
    probe_cluster,
)
from data_designer.slurm.runtime.probe._job import (
    FIRST_POLL_S,
    MAX_POLL_S,
    PROBE_JOB_TIME_MINUTES,
    RUNTIME_CODE,
    TOKEN_GRACE_S,
    ProbeState,
    check_job_evidence,
    probe_script,
    run_probe_job,
    shell_quote,
)

__all__ = [
    "DEFAULT_PROBE_TIMEOUT_S",
    "FIRST_POLL_S",
    "MAX_POLL_S",
    "PROBE_COMMANDS",
    "PROBE_JOB_TIME_MINUTES",
    "RUNTIME_CODE",
    "TOKEN_GRACE_S",
    "ProbeState",
    "check_job_evidence",
    "gpus_in_gres",
    "probe_cluster",
    "probe_script",
    "run_probe_job",
    "shell_quote",
]
