"""``execute``: create a run directory, snapshot the inputs, persist the plan and records, submit, return at once.

A new run: the run file and its Data Designer config are read once (their bytes are both compiled
and snapshotted, so what runs is what was compiled), cluster facts are taken from the workspace's
cache or asked from Slurm (``services.context.cluster_facts``: partitions, GPUs per node when the profile says
``auto``, ``MaxArraySize``), the plan is compiled and refused while anything is unresolved or while
it asks for more than the partition offers (``planner.check_fit``: CPUs, memory, GPUs, nodes, time),
the submission unit is bound (before anything is written, so a bad workspace path or a refused plan
writes nothing; facts asked afresh are cached only once the plan passes), then the run directory is
created exclusively and filled in this
order: ``inputs/`` with ``inputs/manifest.json``, ``plan.json``, ``run.json``, and after submitting
``submissions/NNNN.json``. Every file is write-once.

Resuming (``run_id``): the run record and plan of an existing run are read back (never the run file
again: users edit files after submitting) and the recorded unit is submitted again. The scheduler
adapter finds chunks already accepted by job name and submits only the missing ones, so repeating
``execute`` for one run never duplicates its jobs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import (
    MAX_SEED_FILE_BYTES,
    ClusterFacts,
    ClusterProfile,
    ConflictError,
    ExecuteResult,
    ExecutionPlan,
    InternalError,
    InvalidInputError,
    KeyPath,
    NotFoundError,
    SlurmExtensionError,
    SubmissionBinding,
    SubmissionUnit,
    SubmittedChunk,
    UnavailableError,
    format_key_path,
)
from data_designer.slurm.contracts.records import (
    BenchmarkLink,
    InputFile,
    InputRole,
    InputsManifest,
    RunRecord,
    SeedRewrite,
    SubmittedJob,
)
from data_designer.slurm.planner import (
    bind_submission,
    config_path,
    load_run,
)
from data_designer.slurm.runtime.facts import save_facts
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler, SubmissionRefused
from data_designer.slurm.runtime.status import SINCE_SLACK
from data_designer.slurm.runtime.store import (
    Clock,
    FileModes,
    RunId,
    RunIdFactory,
    RunLayout,
    create_run_directory,
    load_plan,
    modes_for,
    read_bounded,
    read_run_record,
    record_submission,
    run_id_factory,
    snapshot_mode,
    submission_binding,
    system_clock,
    write_benchmark_link,
    write_input,
    write_inputs_manifest,
    write_plan,
    write_run_record,
)
from data_designer.slurm.services.context import ServiceContext, cluster_facts, refuse_misfit
from data_designer.slurm.services.plans import (
    SEED_TOO_LARGE,
    Source,
    compile_config,
    locate,
    profile_source_of,
    read_input,
    read_named,
    seed_files,
)

_OPERATION = "execute"


def execute_run(
    run_file: str | Path,
    *,
    profile: str | Path | None = None,
    cluster: str | None = None,
    run_id: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    id_factory: RunIdFactory | None = None,
) -> ExecuteResult:
    """Submit ``run_file`` on the selected profile cluster, or (``run_id``) submit an existing run's missing chunks.

    ``runner`` reaches Slurm (default: the Slurm commands on PATH in ``environ``); ``clock`` stamps
    records; ``id_factory`` makes the run id (default: the run name, ``clock``'s time and a random
    suffix). Errors: unresolved plan or invalid input exit 2, a missing file or run exit 3, an
    existing run directory exit 4, Slurm unreachable exit 5 (the run directory then keeps what was
    written, and the error names the ``--run-id`` that resumes it).
    """
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock)
    profile_path, cluster_name, cluster_profile = ctx.selected
    scheduler = SlurmScheduler(ctx.submitting_runner(cluster_profile.workspace_sharing), clock=clock)
    submitting = ctx.submitting_environment
    if run_id is not None:
        return _resume(RunId.parse(run_id), cluster_profile, scheduler, clock, submitting)
    return _create(
        Path(run_file).expanduser().absolute(),
        profile_path,
        cluster_name,
        cluster_profile,
        scheduler,
        clock,
        id_factory or run_id_factory(clock),
        submitting,
    )


def _create(
    run_path: Path,
    profile_path: Path,
    cluster_name: str,
    cluster_profile: ClusterProfile,
    scheduler: SlurmScheduler,
    clock: Clock,
    id_factory: RunIdFactory,
    environ: Mapping[str, str],
) -> ExecuteResult:
    run_bytes, run_text = _read(run_path, lambda: read_input(run_path, what="run file", operation=_OPERATION))
    run = load_run(run_text, file=str(run_path))
    run_source = Source(str(run_path), lambda: run_text)
    config_file = config_path(run)
    config_bytes, config_text = None, None
    if config_file is not None:
        named = Path(config_file)
        config_bytes, config_text = _read(
            named,
            lambda: read_named(
                config_file, run_source, ("data_designer", "config"), what="Data Designer config", operation=_OPERATION
            ),
        )
    facts, lookup = cluster_facts(cluster_profile, scheduler, clock)
    profile_source = profile_source_of(profile_path, cluster_name, operation=_OPERATION)
    plan = compile_config(
        run, cluster_profile, cluster_name, facts, config_text, run_source=run_source, profile_source=profile_source
    )
    refuse_unresolved(plan)
    passed = passed_environment(plan, environ, run_file=str(run_path), profile_file=str(profile_path))
    sources: list[tuple[InputRole, Path, bytes | None]] = [("run", run_path, run_bytes)]
    if config_file is not None:
        sources.append(("config", Path(config_file), config_bytes))
    snapshot = InputSnapshot(tuple(sources), seed_files(run, config_text, operation=_OPERATION))
    refuse_misfit(plan, facts, lambda p: locate(p, run_source, profile_source))  # last, as with --cluster-check
    target = RunTarget(
        name=run.name,
        records=run.records,
        run_file=str(run_path),
        profile_file=str(profile_path),
        cluster=cluster_name,
        profile=cluster_profile,
        facts=facts,
    )
    rid = id_factory(run.name)
    binding = bind_run(target, rid)  # before anything is written: a bad workspace path writes nothing
    if lookup.asked:  # checked and about to be used: later runs reuse them for FACTS_MAX_AGE
        save_facts(cluster_profile.workspace_root, lookup.facts, modes_for(cluster_profile.workspace_sharing), clock)
    return submit_plan(plan, snapshot, target, binding, scheduler, clock=clock, environment=passed)


@dataclass(frozen=True)
class InputSnapshot:
    """What a new run copies under ``inputs/``: (role, source, bytes already read or None) per file, and the seed
    dataset's rewrite with its files (``services.plans.seed_files``), all checked before anything is written."""

    files: tuple[tuple[InputRole, Path, bytes | None], ...]
    seed: tuple[SeedRewrite, list[tuple[Path, str]]] | None = None


@dataclass(frozen=True)
class RunTarget:
    """Where and as what a compiled plan becomes a run: the run record's fields that are not the plan's."""

    name: str
    records: int
    run_file: str
    profile_file: str
    cluster: str
    profile: ClusterProfile
    facts: ClusterFacts


@dataclass(frozen=True)
class BoundRun:
    """A run id with its layout and the plan's submission bound to it (nothing written yet)."""

    rid: RunId
    layout: RunLayout
    binding: SubmissionBinding


def bind_run(target: RunTarget, rid: RunId) -> BoundRun:
    """The layout and binding of run ``rid`` in the target's workspace (InvalidInputError for a bad workspace)."""
    layout = RunLayout(Path(target.profile.workspace_root), rid)
    return BoundRun(rid, layout, submission_binding(layout))


def submit_plan(
    plan: ExecutionPlan,
    snapshot: InputSnapshot,
    target: RunTarget,
    bound: BoundRun,
    scheduler: SlurmScheduler,
    *,
    clock: Clock,
    environment: Mapping[str, str],
    link: BenchmarkLink | None = None,
    after_jobs: Sequence[str] = (),
) -> ExecuteResult:
    """Make a new run of a compiled, checked ``plan``: create its directory, snapshot the inputs, write the plan
    and the run record, submit and record the submission. What ``execute RUN_FILE`` does after compiling, and what
    ``benchmark run`` does per child (``link``: the child run's ``benchmark.json``, written before ``run.json``;
    ``after_jobs``: its dependency lane). The job names cannot exist yet, so nothing is looked up before
    ``sbatch``. ``environment`` holds the values of the plan's variables (:func:`passed_environment`)."""
    layout = bound.layout
    unit = bind_submission(plan, bound.binding)
    planned = _plan_snapshot(layout, list(snapshot.files), snapshot.seed)
    modes = modes_for(target.profile.workspace_sharing)
    _make_run_dir(layout, modes)
    manifest = _snapshot(layout, planned, snapshot.seed, modes)
    if not write_inputs_manifest(layout, manifest, clock=clock, operation=_OPERATION):
        raise _already(layout.inputs_manifest)
    if not write_plan(layout, plan, operation=_OPERATION):
        raise _already(layout.plan_record)
    if link is not None and not write_benchmark_link(layout, link, clock=clock, operation=_OPERATION):
        raise _already(layout.benchmark_record)
    record = RunRecord(
        run_id=str(bound.rid),
        name=target.name,
        created_at=bound.rid.created,
        run_file=target.run_file,
        profile_file=target.profile_file,
        cluster=target.cluster,
        facts=target.facts,
        plan_digest=plan.digest,
        config_digest=plan.config_digest,
        shards=len(plan.shards),
        records=target.records,
        binding=bound.binding,
        unit=unit,
    )
    if not write_run_record(layout, record, clock=clock, operation=_OPERATION):
        raise _already(layout.run_record)
    result = _submit(layout, record, scheduler, clock, environment, resumed=False, known={}, after_jobs=after_jobs)
    return result.model_copy(update={"warnings": plan.warnings})  # shown as the dry run shows them


def _resume(
    rid: RunId, cluster_profile: ClusterProfile, scheduler: SlurmScheduler, clock: Clock, environ: Mapping[str, str]
) -> ExecuteResult:
    layout = RunLayout(Path(cluster_profile.workspace_root), rid)
    record = read_run_record(
        layout,
        operation=_OPERATION,
        not_found_hint="check --run-id and --cluster; a run whose record was never written is submitted again "
        "by running execute without --run-id",
    )
    plan = load_plan(layout, expected_digest=record.plan_digest)  # a modified run directory is never submitted again
    passed = passed_environment(plan, environ, run_file=record.run_file, profile_file=record.profile_file)
    result = _submit(layout, record, scheduler, clock, passed, resumed=True)
    return result.model_copy(update={"warnings": plan.warnings})  # shown as the dry run shows them


def passed_environment(
    plan: ExecutionPlan, environ: Mapping[str, str], *, run_file: str, profile_file: str
) -> dict[str, str]:
    """The values of every variable ``plan`` passes to the job, from ``environ``; exit 2 naming the first unset one.

    Checked before anything is written: the values then travel only in ``sbatch``'s environment.
    """
    for name in plan.submission.environment:
        if environ.get(name):
            continue
        named_by: list[KeyPath] = [
            ("deployments", a, "environment") for a, d in plan.run.deployments.items() if name in d.environment
        ]
        named_by += [("external", a, "api_key_env") for a, e in plan.run.external.items() if e.api_key_env == name]
        file, key = (run_file, named_by[0]) if named_by else (profile_file, ("environment",))
        raise InvalidInputError(
            f"{name} is named by {format_key_path(key)} in {file!r} but is unset or empty in this shell",
            code="environment_unset",
            operation=_OPERATION,
            file=file,
            key_path=key,
            hint=f"export {name} before 'execute' (its value reaches the job by environment only, never a file)",
        )
    return {name: environ[name] for name in plan.submission.environment}


def _submit(
    layout: RunLayout,
    record: RunRecord,
    scheduler: SlurmScheduler,
    clock: Clock,
    environment: Mapping[str, str],
    *,
    resumed: bool,
    known: Mapping[str, SubmittedChunk] | None = None,
    after_jobs: Sequence[str] = (),
) -> ExecuteResult:
    try:
        result = scheduler.submit(
            record.unit,
            since=record.created_at - SINCE_SLACK,
            environment=environment,
            known=known,
            after_jobs=after_jobs,
        )
    except SubmissionRefused as exc:
        # the refusal with the chunks accepted before it: status says why the rest is not submitted (and observes those)
        accepted = submitted_jobs(record.unit, exc.accepted)
        record_submission(
            layout, accepted, sbatch_calls=exc.sbatch_calls, clock=clock, operation=_OPERATION, error=exc.info.message
        )
        if accepted:  # the rest may go once the cause is gone: the unit is the same
            hint = (
                f"{exc.info.hint}; {len(accepted)} chunk(s) were accepted: once the cause is fixed outside the plan, "
                f"submit the missing chunks with 'data-designer slurm execute RUN --run-id {record.run_id}'"
            )
        else:  # the frozen plan would be refused again: a new run from the fixed files is what works
            hint = (
                f"{exc.info.hint}; nothing was submitted and run {record.run_id} stays not_submitted: fix the run file "
                f"or the profile and run 'data-designer slurm execute {record.run_file}' again"
            )
        exc.with_context(f"run {record.run_id} ({layout.run_dir})", hint=hint)
        raise
    except SlurmExtensionError as exc:
        exc.with_context(
            f"run {record.run_id} ({layout.run_dir})",
            hint=f"{exc.info.hint or 'fix the cause'}; then submit the missing chunks with "
            f"'data-designer slurm execute RUN --run-id {record.run_id}'",
        )
        raise
    jobs = submitted_jobs(record.unit, result.chunks)
    if len(jobs) != len(record.unit.chunks):
        raise InternalError("the scheduler returned no job for some chunks", code="chunk_not_submitted")
    appended = record_submission(layout, jobs, sbatch_calls=result.sbatch_calls, clock=clock, operation=_OPERATION)
    return ExecuteResult(
        run_id=record.run_id,
        run_dir=str(layout.run_dir),
        name=record.name,
        cluster=record.cluster,
        plan_digest=record.plan_digest,
        records=record.records,
        shards=record.shards,
        jobs=jobs,
        submitted=result.submitted,
        recovered=result.recovered,
        resumed=resumed,
        submission_record=str(appended.path),
    )


def submitted_jobs(unit: SubmissionUnit, submitted: Sequence[SubmittedChunk]) -> tuple[SubmittedJob, ...]:
    """The unit's chunks the scheduler accepted (or found again), in the unit's order."""
    by_name = {c.job_name: c for c in submitted}
    return tuple(
        SubmittedJob(
            chunk=chunk.chunk,
            generation=chunk.generation,
            index_offset=chunk.index_offset,
            job_name=chunk.job_name,
            job_id=found.job_id,
            array_spec=chunk.array_spec,
            recovered=found.recovered,
        )
        for chunk in unit.chunks
        if (found := by_name.get(chunk.job_name)) is not None
    )


def refuse_unresolved(plan: ExecutionPlan) -> None:
    """Exit 2 naming every unresolved entry: a plan is only submitted when complete."""
    if plan.unresolved:
        problems = [u.problem() for u in plan.unresolved]
        raise InvalidInputError.from_problems(problems, operation="execute.plan")


def _read(path: Path, explain: Callable[[], str]) -> tuple[bytes, str]:
    """The bytes and text of ``path``, read once; on failure ``explain`` reads again to raise the located error."""
    try:
        data = read_bounded(path, operation=_OPERATION)
        return data, data.decode("utf-8")
    except (SlurmExtensionError, UnicodeDecodeError) as exc:
        explain()
        raise UnavailableError(  # the second read succeeded: the file changed while being read
            f"{str(path)!r} could not be read consistently: {exc}",
            code="filesystem_unavailable",
            operation=_OPERATION,
            file=str(path),
        ) from exc


def _make_run_dir(layout: RunLayout, modes: FileModes) -> None:
    """Create the run directory (and any missing parent) with the profile's modes: every writer below follows it."""
    try:
        create_run_directory(layout, modes)
    except FileExistsError as exc:
        raise ConflictError(
            f"run directory {str(layout.run_dir)!r} already exists",
            code="run_exists",
            operation=_OPERATION,
            file=str(layout.run_dir),
            hint="run ids are unique; to submit that run's missing chunks pass --run-id",
        ) from exc
    except OSError as exc:
        raise UnavailableError(
            f"cannot create the run directory {str(layout.run_dir)!r}: {exc.strerror}",
            code="filesystem_unavailable",
            operation=_OPERATION,
            file=str(layout.run_dir),
            hint="check the profile's workspace_root: it must be writable and shared with the compute nodes",
        ) from exc


_Planned = tuple[InputRole, Path, str, Path, bytes | None]
"""An input to copy: role, source, path relative to the run directory, target, bytes already read (or None)."""


def _plan_snapshot(
    layout: RunLayout,
    sources: list[tuple[InputRole, Path, bytes | None]],
    seed: tuple[SeedRewrite, list[tuple[Path, str]]] | None,
) -> list[_Planned]:
    """Where every input goes under ``inputs/`` (names checked before anything is written)."""
    relative = [(role, path, f"inputs/{role}/{path.name.lstrip('.') or role}", data) for role, path, data in sources]
    if seed is not None:
        relative += [("seed", path, rel, None) for path, rel in seed[1]]
    return [(role, path, rel, layout.input_file(*rel.split("/")[1:]), data) for role, path, rel, data in relative]


def _snapshot(
    layout: RunLayout,
    planned: list[_Planned],
    seed: tuple[SeedRewrite, list[tuple[Path, str]]] | None,
    modes: FileModes,
) -> InputsManifest:
    """Copy every input into ``inputs/`` (write-once, never more readable than its source), with its sha256."""
    files = []
    for role, source, relative, target, known in planned:
        data = known if known is not None else _read_file(source)
        mode = snapshot_mode(modes, source_mode(source))
        if not write_input(layout, relative.split("/")[1:], data, mode=mode, operation=_OPERATION):
            raise _already(target)
        digest = hashlib.sha256(data).hexdigest()
        files.append(InputFile(role=role, source=str(source), path=relative, sha256=digest, size=len(data)))
    return InputsManifest(files=tuple(files), seed=None if seed is None else seed[0])


def source_mode(path: Path) -> int:
    """The mode of an input file (what its snapshot must never be more readable than)."""
    try:
        return os.stat(path).st_mode
    except OSError:  # gone since it was read: copy it as private as can be
        return 0o600


def _read_file(path: Path) -> bytes:
    try:
        return read_bounded(path, operation=_OPERATION, limit=MAX_SEED_FILE_BYTES, too_large_hint=SEED_TOO_LARGE)
    except NotFoundError as exc:
        raise NotFoundError(
            f"input {str(path)!r} disappeared while it was snapshotted", code="file_not_found", file=str(path)
        ) from exc


def _already(path: Path) -> ConflictError:
    return ConflictError(
        f"{str(path)!r} already exists in a new run directory",
        code="run_exists",
        operation=_OPERATION,
        file=str(path),
        hint="another process is writing this run; execute again for a new run id",
    )
