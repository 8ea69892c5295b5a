"""One task on the profile's CPU partition: the batch job that the probe, ``merge --as-job`` (and later the image
import) submit.

:func:`cpu_job_unit` builds the submission of a :class:`CpuJob`: a one-index array (``--array=0``, as every job
the scheduler adapter submits) of one node and one task on ``partitions.cpu``, with the profile's account and
extra sbatch options first (the job's own options last, so they win, as in a plan), its time limit, working
directory, output and error files, and ``--export=ALL[,NAME...]`` as ``execute`` passes it. :func:`submit_cpu_job`
submits it through :class:`SlurmScheduler` (found again by job name when a reply was lost), and
:func:`cpu_job_runner` is the process runner that gives ``sbatch`` the workspace's umask, so Slurm creates the
job's output files as private (or group-shared) as the run. Every path Slurm opens is checked as ``execute``
checks the run directory (:func:`slurm_path_problems`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from data_designer.slurm.contracts import (
    ArrayTaskBinding,
    ClusterProfile,
    InvalidInputError,
    SubmissionChunk,
    SubmissionUnit,
    SubmittedChunk,
    WorkspaceSharing,
)
from data_designer.slurm.planner import export_option, slurm_path_problems
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import modes_for

DISCARD = "/dev/null"


@dataclass(frozen=True)
class CpuJob:
    """What one CPU job runs, where, for how long, and where Slurm writes its stdout and stderr."""

    job_name: str
    script: str
    workdir: str
    time_limit: str
    """``--time``: minutes (``2``) or Slurm's ``[D-]HH:MM:SS``."""
    output: str = DISCARD
    error: str = DISCARD
    environment: tuple[str, ...] = ()
    """Names of variables the job receives from the submitting environment (their values travel by environment)."""


def cpu_job_unit(cluster: ClusterProfile, job: CpuJob, *, operation: str = "cpu_job") -> SubmissionUnit:
    """The submission of ``job`` on ``cluster``'s CPU partition. InvalidInputError ``unsafe_slurm_path`` (exit 2)
    when a path Slurm opens is relative or holds ``%``, a backslash or a control character."""
    problems = slurm_path_problems(job.workdir, what="job working directory", key_path=("workdir",))
    for what, path in (("job output file", job.output), ("job error file", job.error)):
        if path != DISCARD:
            problems += slurm_path_problems(path, what=what, key_path=("output",))
    if problems:
        raise InvalidInputError.from_problems(problems, operation=operation)
    own = [
        f"--partition={cluster.partitions.cpu}",
        f"--time={job.time_limit}",
        "--nodes=1",
        "--ntasks=1",
        f"--output={job.output}",
        f"--error={job.error}",
        f"--chdir={job.workdir}",
        export_option(job.environment),
    ]
    if cluster.account is not None:
        own.append(f"--account={cluster.account}")
    return SubmissionUnit(
        script=job.script,
        sbatch_args=(*cluster.sbatch_options, *own),
        environment=job.environment,
        chunks=(
            SubmissionChunk(
                job_name=job.job_name,
                chunk=0,
                array_spec="0",
                index_offset=0,
                tasks=(ArrayTaskBinding(index=0, shard=0, attempt=1),),
            ),
        ),
    )


def submit_cpu_job(
    scheduler: SlurmScheduler,
    cluster: ClusterProfile,
    job: CpuJob,
    *,
    since: datetime,
    environment: Mapping[str, str] | None = None,
    operation: str = "cpu_job",
) -> SubmittedChunk:
    """Submit ``job`` (or find it again by name, accepted since ``since``); its one chunk as Slurm accepted it.
    Raises what :meth:`SlurmScheduler.submit` raises (``SubmissionRefused`` exit 2, ``UnavailableError`` exit 5)."""
    unit = cpu_job_unit(cluster, job, operation=operation)
    return scheduler.submit(unit, since=since, environment=environment).chunks[0]


def submitting_runner(sharing: WorkspaceSharing, *, env: Mapping[str, str] | None = None) -> SubprocessRunner:
    """The Slurm commands on PATH, with ``sbatch`` under the umask of a workspace of ``sharing`` (Slurm creates the
    job's ``slurm-*.out`` with it). The one construction of the runner of every service that submits: ``execute``,
    ``benchmark run``, ``retry``, the probe, ``merge --as-job``, the image import."""
    return SubprocessRunner(env=env, umask=modes_for(sharing).umask)


def cpu_job_runner(cluster: ClusterProfile, *, env: Mapping[str, str] | None = None) -> SubprocessRunner:
    """:func:`submitting_runner` for ``cluster``'s workspace."""
    return submitting_runner(cluster.workspace_sharing, env=env)


def compute_launcher(cluster: ClusterProfile) -> tuple[str, ...] | None:
    """The words that start the compute Python (its interpreter), or None when it is an image (not resolved here)."""
    interpreter = cluster.compute_python.interpreter
    return None if interpreter is None else (interpreter,)


def command_script(argv: Sequence[str], *, title: str) -> str:
    """A batch script that execs ``argv`` (each word shell-quoted); ``title`` is its comment line."""
    return "\n".join(["#!/bin/bash", f"# {title}", "exec " + " ".join(shlex.quote(word) for word in argv)]) + "\n"
