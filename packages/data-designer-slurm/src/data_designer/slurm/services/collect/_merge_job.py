"""``merge --as-job``: the same merge as a one-task CPU job on the profile's CPU partition, returning at once.

The job (``runtime.jobs.CpuJob``) execs ``python -m data_designer.slurm.runtime.merge --run-dir DIR ...`` with the
profile's compute Python, named ``dd-<run id>-merge-<n>`` (``n``: the next merge job number), its stdout and
stderr in ``<run>/merge/jobs/slurm-<job name>.out|.err``. Once Slurm accepted it, a :class:`MergeJobRecord` is
appended as ``<run>/merge/jobs/NNNN.json``; ``status`` derives the merge's state from that record, the run's one
scheduler observation (which asks about the newest merge job too) and the merge manifest the job writes last.
A lost ``sbatch`` reply is repaired by submitting again: the job is found by its name, as execute's chunks are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from data_designer.slurm.contracts import ClusterProfile, InvalidInputError, MergeResult
from data_designer.slurm.contracts.records import MergeJobRecord
from data_designer.slurm.planner import slurm_path_problems
from data_designer.slurm.runtime.jobs import CpuJob, command_script, compute_launcher, cpu_job_runner, submit_cpu_job
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.status import SINCE_SLACK
from data_designer.slurm.runtime.store import (
    JOB_NAME_PREFIX,
    Clock,
    RunSnapshot,
    merge_job_error_file,
    merge_job_output_file,
    record_merge_job,
    reserve_merge_job,
)
from data_designer.slurm.services.profiles import load_profile_file, select_cluster

if TYPE_CHECKING:  # runtime.merge loads pyarrow: not with the services
    from data_designer.slurm.runtime.merge import MergeOptions

_OPERATION = "merge"


def submit_merge_job(
    snapshot: RunSnapshot,
    options: MergeOptions,
    *,
    profile: str | Path | None,
    cluster: str | None,
    environ: Mapping[str, str] | None,
    runner: CommandRunner | None,
    clock: Clock,
) -> MergeResult:
    """Submit the merge of ``snapshot`` as a CPU job and record it. The profile is ``profile`` (else the one the run
    was made with) and its cluster ``cluster`` (else the run's). Errors: a compute Python that is an image, or a path
    Slurm would read as a pattern, exit 2; sbatch refused exit 2 or unreachable exit 5 (nothing is recorded)."""
    layout = snapshot.layout
    file, loaded = load_profile_file(profile if profile is not None else snapshot.run.profile_file, environ=environ)
    _, cluster_profile = select_cluster(loaded, cluster or snapshot.run.cluster, file=str(file))
    launcher = _launcher(cluster_profile, str(file))
    if options.output is not None and (
        problems := slurm_path_problems(str(options.output), what="--output", key_path=("--output",))
    ):
        raise InvalidInputError.from_problems(problems, operation=_OPERATION)
    name = f"{JOB_NAME_PREFIX}{layout.run_id}-merge-{reserve_merge_job(layout)}"
    run_dir = str(layout.run_dir)
    job = CpuJob(
        job_name=name,
        script=command_script(
            _merge_job_argv(launcher, run_dir, options), title=f"data-designer-slurm merge of run {layout.run_id}"
        ),
        workdir=run_dir,
        time_limit=cluster_profile.default_time_limit,
        output=str(merge_job_output_file(layout, name)),
        error=str(merge_job_error_file(layout, name)),
    )
    scheduler = SlurmScheduler(
        runner if runner is not None else cpu_job_runner(cluster_profile, env=environ), clock=clock
    )
    submitted_at = clock()  # before sbatch: a manifest written after this is the job's
    submitted = submit_cpu_job(
        scheduler, cluster_profile, job, since=snapshot.run.created_at - SINCE_SLACK, operation=_OPERATION
    )
    record = MergeJobRecord(
        job_id=submitted.job_id,
        job_name=name,
        submitted_at=submitted_at,
        output=str(options.output) if options.output is not None else None,
        allow_partial=options.allow_partial,
        drop_provenance=not options.provenance,
        max_rows_per_file=options.max_rows_per_file,
        compact=options.compact,
        row_group_rows=options.row_group_rows,
    )
    record_merge_job(layout, record, clock=clock, operation=_OPERATION)
    return MergeResult(
        run_id=snapshot.run.run_id,
        run_dir=run_dir,
        outcome="submitted",
        merge_dir=record.output,
        records_total=snapshot.run.records,
        job_id=submitted.job_id,
        job_name=name,
    )


def _launcher(cluster: ClusterProfile, file: str) -> tuple[str, ...]:
    launcher = compute_launcher(cluster)
    if launcher is None:
        raise InvalidInputError(
            f"merge --as-job runs the compute Python interpreter, but compute_python is the image "
            f"{cluster.compute_python.image!r}",
            code="merge_job_needs_interpreter",
            operation=_OPERATION,
            file=file,
            key_path=("compute_python", "image"),
            hint="merge in the foreground (without --as-job), or name compute_python.interpreter",
        )
    return launcher


def _merge_job_argv(launcher: Sequence[str], run_dir: str, options: MergeOptions) -> tuple[str, ...]:
    from data_designer.slurm.runtime.merge import merge_job_argv

    return merge_job_argv(launcher, run_dir, options)
