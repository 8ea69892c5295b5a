"""``image add docker://...``: a one-task CPU job imports the reference; ``image info`` derives its state from evidence.

:func:`submit_import` validates the reference (planner grammar, exit 2), renders the job's script
(``planner.render_import_script``) into ``images/<name>/imports/<g:04d>-<token>.sbatch``, submits it on the
profile's CPU partition (``runtime.jobs``: account, time limit, its log ``<g:04d>-<token>.log``) and writes generation ``g`` of the
name with ``import_job`` set before it returns; it never waits for the job. The job's finish step writes the
completion (generation ``g + 1``, with the sha256 and the inspection).

:func:`import_state` is the state of such an entry from one scheduler observation of its job and the registry read
after it: ``ready`` only from a completion; ``importing`` while Slurm shows the job pending or running (or within
the grace after submission or after a completed job, for a lagging filesystem); ``import_cancelled``;
``import_failed`` when the job ended without a completion (its Slurm state, exit and the log's last lines) or when
neither squeue nor sacct knows it after the grace (an import never shows as running forever); ``unknown`` when
Slurm could not be asked.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from data_designer.slurm.contracts import (
    TERMINAL_TASK_STATES,
    ConflictError,
    ImageAdded,
    ImageInfo,
    ImageState,
    InvalidInputError,
    Observation,
    SlurmExtensionError,
    TaskEvidence,
    UnavailableError,
)
from data_designer.slurm.contracts.records import ImageEntry, ImageRole, ImportJob
from data_designer.slurm.planner import ImportScriptRequest, parse_registry_reference, render_import_script
from data_designer.slurm.runtime.images import import_paths, is_completion_of, write_import_script
from data_designer.slurm.runtime.jobs import CpuJob, compute_launcher, cpu_job_runner, submit_cpu_job
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.status import DEFAULT_GRACE_S, SINCE_SLACK
from data_designer.slurm.runtime.store import (
    JOB_NAME_PREFIX,
    Clock,
    parse_timestamp,
    requester_from_environment,
    system_clock,
    tail_lines,
)
from data_designer.slurm.services.context import ServiceContext
from data_designer.slurm.services.images._workspace import Workspace, check_file, refuse_current

LOG_TAIL_LINES = 3
_OPERATION = "image.add"


def import_token(workspace_root: str, name: str, generation: int, submitted_at: datetime) -> str:
    """Eight hex digits from the workspace, the name, the generation and the time: the job name
    ``dd-image-<name>-<g>-<token>`` (a lost sbatch reply's search by name cannot find another workspace's import
    of the same name) and the import's file names (two submissions never share a file)."""
    seed = f"{workspace_root}\0{name}\0{generation}\0{submitted_at.isoformat()}".encode()
    return hashlib.sha256(seed).hexdigest()[:8]


def submit_import(
    source: str,
    *,
    name: str,
    role: ImageRole,
    replace: bool,
    workspace: Workspace,
    environ: Mapping[str, str] | None,
    clock: Clock = system_clock,
    runner: CommandRunner | None = None,
) -> ImageAdded:
    """Submit the import of ``source`` as image ``name`` and record it as the name's next generation; returns at once.

    ``runner`` runs the Slurm commands (default: the ones on PATH under the workspace's umask). Errors: a reference
    outside the grammar or a compute Python that is an image, exit 2; a current image without ``replace``, or
    another ``image add`` of the name that took the generation meanwhile (the job is cancelled), exit 4; sbatch
    refused exit 2 or unreachable exit 5 (nothing is recorded).
    """
    ctx = ServiceContext.of(environ=environ, runner=runner, clock=clock)
    reference = parse_registry_reference(source)
    cluster = workspace.profile
    launcher = compute_launcher(cluster)
    if launcher is None:
        raise InvalidInputError(
            f"the import job runs the compute Python interpreter, but compute_python is the image "
            f"{cluster.compute_python.image!r}",
            code="import_job_needs_interpreter",
            operation=_OPERATION,
            key_path=("compute_python", "image"),
            hint="name compute_python.interpreter in the profile, or import the image with 'enroot import' "
            "yourself and register the .sqsh file",
        )
    registry = workspace.registry
    history = registry.history(name)
    refuse_current(history, replace=replace, file=source)
    generation = history.highest + 1
    submitted_at = clock()
    token = import_token(str(registry.root), name, generation, submitted_at)
    job_name = f"{JOB_NAME_PREFIX}image-{name}-{generation}-{token}"
    paths = import_paths(registry, name, generation, token)
    script = render_import_script(
        ImportScriptRequest(
            reference=reference,
            name=name,
            generation=generation,
            target=str(paths.target),
            workspace_root=str(registry.root),
            launcher=launcher,
        )
    )
    write_import_script(paths, script, workspace.modes)
    job = CpuJob(
        job_name=job_name,
        script=script,
        workdir=str(paths.directory),
        time_limit=cluster.default_time_limit,
        output=str(paths.log),
        error=str(paths.log),
    )
    scheduler = SlurmScheduler(runner if runner is not None else cpu_job_runner(cluster, env=environ), clock=clock)
    try:
        submitted = submit_cpu_job(scheduler, cluster, job, since=submitted_at - SINCE_SLACK, operation=_OPERATION)
    except BaseException:
        paths.script.unlink(missing_ok=True)  # nothing was submitted: no script without its entry
        raise
    entry = ImageEntry(
        name=name,
        generation=generation,
        role=role,
        format="squashfs",
        source=reference.text,
        source_kind="registry",
        path=str(paths.target),
        import_job=ImportJob(
            job_id=submitted.job_id,
            job_name=job_name,
            submitted_at=submitted_at,
            script=str(paths.script),
            log=str(paths.log),
        ),
        added_by=requester_from_environment(ctx.submitting_environment, clock=clock),
    )
    if not registry.write_generation(entry, workspace.modes, clock=clock):
        _cancel_quietly(scheduler, submitted.job_id)
        raise ConflictError(
            f"image {name!r} generation {generation} was written by another 'image add' at the same time; "
            f"import job {submitted.job_id} was cancelled",
            code="image_contended",
            operation=_OPERATION,
            file=str(registry.generation_file(name, generation)),
            hint=f"see 'data-designer slurm image info {name}', then add again (with --replace) if still wanted",
        )
    return ImageAdded(
        entry=entry,
        outcome="import_submitted",
        registry_file=str(registry.generation_file(name, generation)),
        hashed=False,
    )


def import_state(
    entry: ImageEntry,
    *,
    generations: int,
    workspace: Workspace,
    environ: Mapping[str, str] | None,
    runner: CommandRunner | None,
    clock: Clock = system_clock,
    grace_s: float = DEFAULT_GRACE_S,
) -> ImageInfo:
    """The state of the import ``entry`` records: one observation of its job (two Slurm calls), then the registry."""
    job = entry.import_job
    if job is None:
        return ImageInfo(
            entry=entry, generations=generations, state="unknown", detail="the entry has neither a file nor a job"
        )
    cluster = workspace.profile
    scheduler = SlurmScheduler(runner if runner is not None else cpu_job_runner(cluster, env=environ), clock=clock)
    try:
        observation: Observation | None = scheduler.observe([job.job_id], since=job.submitted_at - SINCE_SLACK)
    except UnavailableError as exc:
        observation, unavailable = None, exc.info.message
    completion = _completion(workspace, entry)  # read after Slurm answered: a job that just ended wrote it first
    if completion is not None:
        done = check_file(
            completion, max(generations, completion.generation), workspace.registry, modes=workspace.modes, clock=clock
        )
        return done.model_copy(update={"scheduler_calls": observation.calls if observation else 0})  # I1
    if observation is None:
        why = f"Slurm could not be asked about job {job.job_id}: {unavailable}"
        return _info(entry, generations, "unknown", why)  # I2
    state, detail = classify_import(entry, observation, clock(), grace_s=grace_s)
    if state in ("import_failed", "import_cancelled"):
        detail += _log_tail(Path(job.log))
    return _info(entry, generations, state, detail, observation.calls)


def classify_import(
    entry: ImageEntry, observation: Observation, now: datetime, *, grace_s: float
) -> tuple[ImageState, str]:
    """The pure rule for an import without a completion, from one observation of its job (rows I3-I10 of
    ``docs/architecture/status.md``, "Image import")."""
    job = entry.import_job
    assert job is not None  # import_state asks only about imports
    seen = next((t for t in observation.tasks if t.job_id == job.job_id), None)
    if seen is None:
        if observation.sacct.status != "ok":
            return "unknown", f"no scheduler evidence for job {job.job_id} (sacct {observation.sacct.status})"  # I3
        if (now - job.submitted_at).total_seconds() < grace_s or observation.accounting_lag:
            return "importing", f"job {job.job_id} submitted; not yet in accounting"  # I4
        return "import_failed", f"neither squeue nor sacct knows job {job.job_id} and no completion was recorded"  # I5
    if seen.state in TERMINAL_TASK_STATES:
        return _ended(job.job_id, seen, now, grace_s)
    if seen.state == "running":
        return "importing", f"job {job.job_id} running on {seen.nodes or 'a node'} since {seen.start_time or '-'}"  # I9
    if seen.state == "pending":
        return "importing", f"job {job.job_id} pending ({seen.reason or 'no reason given'})"  # I9
    return "unknown", f"job {job.job_id}: Slurm says {seen.raw_state}"  # I10


def _ended(job_id: str, seen: TaskEvidence, now: datetime, grace_s: float) -> tuple[ImageState, str]:
    if seen.state == "cancelled":
        return "import_cancelled", f"job {job_id}: Slurm says {seen.raw_state}; no completion was recorded"  # I6
    if seen.state == "completed":
        ended_at = parse_timestamp(seen.end_time) if seen.end_time else None
        if ended_at is None or (now - ended_at).total_seconds() < grace_s:  # a shared filesystem may lag
            return "importing", f"job {job_id} completed; waiting for its completion record"  # I7
    code = f" (exit {seen.exit_code})" if seen.exit_code is not None else ""
    return "import_failed", f"job {job_id}: Slurm says {seen.raw_state}{code} and no completion was recorded"  # I8


def _completion(workspace: Workspace, entry: ImageEntry) -> ImageEntry | None:
    history = workspace.registry.history(entry.name)
    return next((e for e in history.entries if is_completion_of(e, entry)), None)


def _log_tail(log: Path) -> str:
    lines = tail_lines(log, LOG_TAIL_LINES)
    return f"; log {str(log)!r}: " + " | ".join(lines) if lines else f"; the log {str(log)!r} is empty or missing"


def _info(entry: ImageEntry, generations: int, state: ImageState, detail: str, calls: int = 0) -> ImageInfo:
    return ImageInfo(entry=entry, generations=generations, state=state, detail=detail, scheduler_calls=calls)


def _cancel_quietly(scheduler: SlurmScheduler, job_id: str) -> None:
    # the conflict is the error to report; a job left behind fails in its finish step (no entry of its own)
    with contextlib.suppress(SlurmExtensionError):
        scheduler.cancel([job_id], confirm_timeout_s=5.0)
