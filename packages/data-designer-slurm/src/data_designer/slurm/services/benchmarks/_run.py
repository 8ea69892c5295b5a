"""``benchmark run BENCH``: submit every child of a benchmark as an ordinary run, and return.

The benchmark file, its base run and config are read once and expanded (``planner.expand``) with the cluster's
facts, looked up once for the whole benchmark (the workspace cache, else Slurm). Every child plan is checked as
``execute`` checks a plan (nothing unresolved, fits the partition, its variables set) before anything is written.
Then, in ``benchmarks/<name>-<digest prefix>/``:

1. ``benchmark.json`` is written once (equal input finds it and reuses the benchmark; any change of a digest is a
   new id), with the inputs copied under ``inputs/``.
2. Each child, in order: its binding ``children/<child id>.json`` (child id -> run id) is taken write-once *before*
   its run directory is created, so of two concurrent ``benchmark run`` calls exactly one creates each child's
   run; the run is then made and submitted by ``services.runs.submit_plan``, exactly what ``execute`` does
   after compiling, with the child's ``benchmark.json`` link.

No process of ours stays behind: ``max_concurrent_children`` (cap) is enforced by Slurm through dependency lanes.
Child i waits (``--dependency=afterany``) for child i - cap, so at most cap children hold allocations at once;
with repeats innermost, the repeats of one case fall into different lanes. A predecessor that is no longer pending
or running is left out of the dependency (Slurm refuses one on a job it has forgotten). Submitting stops at the
first failure, so a lane never skips a child; the result lists every child (submitted, already submitted,
resumed, held, failed, not attempted) and the error the command exits with. Running it again submits exactly the
children without submission evidence. A binding whose holder is gone before its run was submitted is resumed
through a write-once ``children/<child id>.resume-<k>`` claim.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from data_designer.slurm.contracts import (
    TERMINAL_TASK_STATES,
    BenchmarkChild,
    BenchmarkPlan,
    BenchmarkRunResult,
    ChildOutcome,
    ChildSubmission,
    ClusterFacts,
    ClusterProfile,
    ConflictError,
    InvalidInputError,
    SlurmExtensionError,
    SubmittedChunk,
    UnavailableError,
)
from data_designer.slurm.contracts.records import (
    BENCHMARK_SCHEMA,
    RUN_SCHEMA,
    BenchmarkChildEntry,
    BenchmarkLink,
    BenchmarkRecord,
    ChildBinding,
    ChildResumeClaim,
    InputFile,
    InputRole,
    Requester,
    RunRecord,
    SeedRewrite,
)
from data_designer.slurm.runtime.facts import save_facts
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.status import SINCE_SLACK, Rules
from data_designer.slurm.runtime.store import (
    BenchmarkLayout,
    BenchmarkSnapshot,
    ChildBindings,
    Clock,
    FileModes,
    RecordOk,
    RunId,
    RunIdFactory,
    RunLayout,
    benchmark_id,
    bind_child,
    claim_child_resume,
    discard_run_directory,
    modes_for,
    read_benchmark,
    read_record,
    read_submissions,
    record_submission,
    requester_from_environment,
    run_id_factory,
    snapshot_mode,
    system_clock,
    write_benchmark,
    write_benchmark_input,
)
from data_designer.slurm.services.context import (
    Alive,
    CountingRunner,
    ServiceContext,
    cluster_facts,
    default_alive,
    refuse_misfit,
)
from data_designer.slurm.services.plans import (
    BenchmarkInputs,
    Source,
    expand_located,
    locate,
    profile_source_of,
    read_benchmark_inputs,
    seed_files,
)
from data_designer.slurm.services.runs import (
    BoundRun,
    InputSnapshot,
    RunTarget,
    bind_run,
    passed_environment,
    source_mode,
    submit_plan,
    submitted_jobs,
)

_OPERATION = "benchmark.run"
_RUN_NAME_MAX = 64
"""A run name's longest spelling (contracts ``Name``); a child's run is named ``<benchmark name>-c<index>``."""
_LOOKUPS = ("squeue", "sacct")


def run_benchmark(
    bench_file: str | Path,
    *,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    id_factory: RunIdFactory | None = None,
    alive: Alive | None = None,
    rules: Rules | None = None,
) -> BenchmarkRunResult:
    """Submit the children of ``bench_file`` that have no submission evidence yet; return at once.

    Errors before anything is submitted are raised (invalid input exit 2, a missing file exit 3, Slurm unreachable
    for its facts exit 5). A failure while submitting children is returned in the result (``error``), with every
    child's outcome, and the CLI exits with its code after printing the table. ``alive`` decides whether the
    holder of a binding whose run was never submitted may still be submitting it (default: its pid on this host,
    else ``Rules.retry_grace_s`` after it bound the child).
    """
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock, rules=rules)
    bench_path = Path(bench_file).expanduser().absolute()
    inputs = read_benchmark_inputs(bench_path, operation=_OPERATION)
    profile_path, cluster_name, cluster_profile = ctx.selected
    modes = modes_for(cluster_profile.workspace_sharing)
    counting = CountingRunner(ctx.submitting_runner(cluster_profile.workspace_sharing))
    scheduler = SlurmScheduler(counting, clock=clock)
    submitting = ctx.submitting_environment

    facts, lookup = cluster_facts(cluster_profile, scheduler, clock)
    profile_source = profile_source_of(profile_path, cluster_name, operation=_OPERATION)
    plan = expand_located(inputs, cluster_profile, cluster_name, facts, profile_source)
    environments = _checked(
        plan, inputs, facts, submitting, profile_file=str(profile_path), profile_source=profile_source
    )
    seed = seed_files(inputs.base, inputs.config_text, operation=_OPERATION)
    layout = BenchmarkLayout(Path(cluster_profile.workspace_root), benchmark_id(inputs.spec.name, plan.digest))
    if lookup.asked:
        save_facts(cluster_profile.workspace_root, lookup.facts, modes, clock)

    requester = requester_from_environment(submitting, clock=clock)
    started = requester.time
    created = _ensure_record(layout, plan, inputs, facts, str(profile_path), cluster_name, requester, modes, clock)
    snapshot = read_benchmark(layout)
    context = _Context(
        layout=layout,
        plan=plan,
        target=_Target(inputs, str(profile_path), cluster_name, cluster_profile, facts),
        snapshot=_child_inputs(inputs, seed),
        scheduler=scheduler,
        clock=clock,
        environments=environments,
        ids=id_factory or run_id_factory(clock),
        alive=alive or default_alive(ctx.rules.retry_grace_s, clock),
        environ=submitting,
        modes=modes,
        started=started,
    )
    rows, error = _submit_children(context, snapshot)
    counts: dict[ChildOutcome, int] = {}
    for row in rows:
        counts[row.outcome] = counts.get(row.outcome, 0) + 1
    warnings = {w: None for child in plan.children for w in child.plan.warnings}
    return BenchmarkRunResult(
        benchmark_id=layout.benchmark_id,
        benchmark_dir=str(layout.directory),
        name=inputs.spec.name,
        digest=plan.digest,
        cluster=cluster_name,
        benchmark_file=str(bench_path),
        created=created,
        exclusive=plan.exclusive,
        max_concurrent_children=plan.max_concurrent_children,
        children=tuple(rows),
        counts=counts,
        sbatch_calls=counting.commands.get("sbatch", 0),
        scheduler_lookups=sum(counting.commands.get(name, 0) for name in _LOOKUPS),
        facts_asked=lookup.asked,
        error=None if error is None else error.info,
        warnings=tuple(warnings),
    )


# -- checks and the record ------------------------------------------------------------------------------------------


def _checked(
    plan: BenchmarkPlan,
    inputs: BenchmarkInputs,
    facts: ClusterFacts,
    environ: Mapping[str, str],
    *,
    profile_file: str,
    profile_source: Source,
) -> dict[str, dict[str, str]]:
    """Every distinct child plan checked as ``execute`` checks one; the values of its variables, by plan digest."""
    if plan.unresolved:  # deduplicated over the children, each located in the benchmark or base run file
        problems = [u.problem() for u in plan.unresolved]
        raise InvalidInputError.from_problems(problems, operation=_OPERATION, file=str(inputs.path))
    run_file = inputs.base_path or str(inputs.path)
    values: dict[str, dict[str, str]] = {}
    for child in plan.children:
        if child.plan_digest in values:
            continue
        refuse_misfit(child.plan, facts, lambda p: locate(p, inputs.base_source, profile_source))
        values[child.plan_digest] = passed_environment(
            child.plan, environ, run_file=run_file, profile_file=profile_file
        )
    return values


def _ensure_record(
    layout: BenchmarkLayout,
    plan: BenchmarkPlan,
    inputs: BenchmarkInputs,
    facts: ClusterFacts,
    profile_file: str,
    cluster: str,
    requester: Requester,
    modes: FileModes,
    clock: Clock,
) -> bool:
    """Write the benchmark's record (and inputs) unless an equal benchmark has it; whether this call wrote it."""
    found = read_record(layout.record, BENCHMARK_SCHEMA)
    if isinstance(found, RecordOk):
        if found.payload.digest != plan.digest:
            raise ConflictError(
                f"benchmark directory {str(layout.directory)!r} holds a benchmark of digest {found.payload.digest}, "
                f"not {plan.digest}",
                code="benchmark_id_collision",
                operation=_OPERATION,
                file=str(layout.record),
                hint="two benchmarks share a name and a 12-digit digest prefix: rename this benchmark",
            )
        return False
    files = _copy_inputs(layout, inputs, modes)
    record = BenchmarkRecord(
        benchmark_id=layout.benchmark_id,
        name=inputs.spec.name,
        digest=plan.digest,
        created_at=clock(),
        created_by=requester,
        benchmark_file=str(inputs.path),
        profile_file=profile_file,
        cluster=cluster,
        facts=facts,
        exclusive=plan.exclusive,
        max_concurrent_children=plan.max_concurrent_children,
        cases=len(plan.children) // inputs.spec.repeats,
        repeats=inputs.spec.repeats,
        axes=tuple(label for label, _ in plan.children[0].case),
        targets=inputs.spec.targets,
        gpu_hours_upper_bound=plan.gpu_hours_upper_bound,
        children=tuple(_entry(child) for child in plan.children),
        inputs=files,
    )
    return write_benchmark(layout, record, clock=clock, operation=_OPERATION)


def _entry(child: BenchmarkChild) -> BenchmarkChildEntry:
    return BenchmarkChildEntry(
        index=child.index,
        child_id=child.child_id,
        case=child.case,
        repeat=child.repeat,
        records=child.records,
        plan_digest=child.plan_digest,
        nodes=child.plan.allocation.nodes,
        gpus=child.plan.allocation.gpus,
        gpu_hours_upper_bound=child.plan.gpu_hours_upper_bound,
    )


def _sources(inputs: BenchmarkInputs) -> list[tuple[InputRole, Path, bytes]]:
    files: list[tuple[InputRole, Path, bytes]] = [("benchmark", inputs.path, inputs.text.encode("utf-8"))]
    if inputs.base_path is not None and inputs.base_text is not None:
        files.append(("run", Path(inputs.base_path), inputs.base_text.encode("utf-8")))
    if inputs.config_file is not None and inputs.config_text is not None:
        files.append(("config", Path(inputs.config_file), inputs.config_text.encode("utf-8")))
    return files


def _copy_inputs(layout: BenchmarkLayout, inputs: BenchmarkInputs, modes: FileModes) -> tuple[InputFile, ...]:
    """The benchmark file, base run and config under ``inputs/<role>/`` (write-once; an equal copy is kept)."""
    copied = []
    for role, path, data in _sources(inputs):
        mode = snapshot_mode(modes, source_mode(path))
        name = path.name.lstrip(".") or role
        copied.append(
            InputFile(
                role=role,
                source=str(path),
                path=write_benchmark_input(layout, role, name, data, mode=mode, modes=modes, operation=_OPERATION),
                sha256=hashlib.sha256(data).hexdigest(),
                size=len(data),
            )
        )
    return tuple(copied)


def _child_inputs(inputs: BenchmarkInputs, seed: tuple[SeedRewrite, list[tuple[Path, str]]] | None) -> InputSnapshot:
    """What each child run copies under ``inputs/``: the benchmark file, its base run and config, the seed files."""
    files: tuple[tuple[InputRole, Path, bytes | None], ...] = tuple(_sources(inputs))
    return InputSnapshot(files, seed)


# -- children -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    inputs: BenchmarkInputs
    profile_file: str
    cluster: str
    profile: ClusterProfile
    facts: ClusterFacts

    def of(self, child: BenchmarkChild, name: str) -> RunTarget:
        return RunTarget(
            name=name,
            records=child.records,
            run_file=str(self.inputs.path),
            profile_file=self.profile_file,
            cluster=self.cluster,
            profile=self.profile,
            facts=self.facts,
        )


@dataclass(frozen=True)
class _Context:
    layout: BenchmarkLayout
    plan: BenchmarkPlan
    target: _Target
    snapshot: InputSnapshot
    scheduler: SlurmScheduler
    clock: Clock
    environments: dict[str, dict[str, str]]
    ids: RunIdFactory
    alive: Alive
    environ: Mapping[str, str]
    modes: FileModes
    started: datetime
    """When this call began (by its clock): bindings this process took before then are its own earlier calls'."""

    def link(self, child: BenchmarkChild) -> BenchmarkLink:
        return BenchmarkLink(
            benchmark_id=self.layout.benchmark_id,
            benchmark_dir=str(self.layout.directory),
            digest=self.plan.digest,
            child_id=child.child_id,
            index=child.index,
            case=child.case,
            repeat=child.repeat,
        )


@dataclass
class _Evidence:
    """What the records say of one child before this call submits anything."""

    binding: ChildBinding | None
    jobs: tuple[str, ...] = ()
    """Job ids of its first submission, when every chunk was accepted."""
    record: RunRecord | None = None
    holder: Requester | None = None
    unreadable: str | None = None
    next_resume: int = 1


def _submit_children(
    context: _Context, snapshot: BenchmarkSnapshot
) -> tuple[list[ChildSubmission], SlurmExtensionError | None]:
    children = context.plan.children
    cap = context.plan.max_concurrent_children
    evidence = [_evidence(context, snapshot.children[child.child_id]) for child in children]
    live = _live_predecessors(context, children, evidence, cap)
    known = _found_by_name(context, evidence)
    jobs: dict[int, tuple[str, ...]] = {}
    """Per child index, the jobs a lane successor may wait for: submitted now, or submitted before and live."""
    rows: list[ChildSubmission] = []
    error: SlurmExtensionError | None = None
    stopped: str | None = None
    for child, found in zip(children, evidence, strict=True):
        row = _row(child, cap, found)
        if found.jobs:
            jobs[child.index] = tuple(job for job in found.jobs if job in live)
            rows.append(row.model_copy(update={"outcome": "already_submitted", "jobs": found.jobs}))
            continue
        if stopped is not None:
            rows.append(row.model_copy(update={"outcome": "not_attempted", "detail": stopped}))
            continue
        after = jobs.get(child.index - cap, ())
        try:
            outcome, run_id, submitted = _submit_child(context, child, found, after, known)
        except _Held as held:
            rows.append(row.model_copy(update={"outcome": "held", "run_id": held.run_id, "detail": held.detail}))
            stopped = f"child {child.index} is held by another 'benchmark run'"
            error = ConflictError(
                f"benchmark {context.layout.benchmark_id}: {held.detail}",
                code="benchmark_busy",
                operation=_OPERATION,
                file=str(context.layout.binding(child.child_id)),
                hint="another 'benchmark run' is submitting these children: follow them with 'data-designer slurm "
                "benchmark status', or run 'benchmark run' again once it has returned",
            )
            continue
        except _Failed as failed:
            detail = failed.error.info.message
            update = {"outcome": "failed", "run_id": failed.run_id, "after": after, "detail": detail}
            rows.append(row.model_copy(update=update))
            stopped = f"child {child.index} failed to submit (the lanes keep their order)"
            error = _rerun_hint(failed.error, context, child)
            continue
        jobs[child.index] = submitted
        rows.append(row.model_copy(update={"outcome": outcome, "run_id": run_id, "jobs": submitted, "after": after}))
    return rows, error


def _rerun_hint(error: SlurmExtensionError, context: _Context, child: BenchmarkChild) -> SlurmExtensionError:
    """The child's error with a fix that names ``benchmark run``, not ``execute``: ``execute --run-id`` would submit
    the child's run without its dependency lane."""
    cause = (error.info.hint or "fix the cause").split("; ")[0]
    error.info = error.info.model_copy(
        update={
            "hint": f"{cause}; then run 'data-designer slurm benchmark run {context.target.inputs.path}' again: it "
            f"submits child {child.index} in its lane, then the rest (a change that changes a digest is a new "
            "benchmark)"
        }
    )
    return error


def _row(child: BenchmarkChild, cap: int, found: _Evidence) -> ChildSubmission:
    return ChildSubmission(
        index=child.index,
        child_id=child.child_id,
        case=child.case,
        repeat=child.repeat,
        outcome="not_attempted",
        run_id=None if found.binding is None else found.binding.run_id,
        lane=child.index % cap,
    )


def _evidence(context: _Context, bindings: ChildBindings) -> _Evidence:
    if bindings.unreadable and bindings.binding is None:
        return _Evidence(None, unreadable=", ".join(bindings.unreadable))
    binding = bindings.binding
    if binding is None:
        return _Evidence(None)
    holder = bindings.resumes[-1].claimed_by if bindings.resumes else binding.claimed_by
    found = _Evidence(binding, holder=holder, next_resume=bindings.highest_resume + 1)
    layout = RunLayout(Path(context.target.profile.workspace_root), RunId.parse(binding.run_id))
    read = read_record(layout.run_record, RUN_SCHEMA)
    if not isinstance(read, RecordOk):
        return found
    found.record = read.payload
    found.jobs = _first_submission(layout, read.payload)
    return found


def _first_submission(layout: RunLayout, record: RunRecord) -> tuple[str, ...]:
    """The job ids of the run's generation-0 chunks, when every chunk of its unit was accepted (else none)."""
    by_chunk: dict[int, str] = {}
    try:
        submissions = read_submissions(layout)
    except (OSError, SlurmExtensionError):
        return ()
    for job in (job for submission in submissions if submission.generation == 0 for job in submission.jobs):
        by_chunk.setdefault(job.chunk, job.job_id)
    wanted = [chunk.chunk for chunk in record.unit.chunks]
    if not wanted or any(chunk not in by_chunk for chunk in wanted):
        return ()
    return tuple(dict.fromkeys(by_chunk[chunk] for chunk in wanted))


def _live_predecessors(
    context: _Context, children: Sequence[BenchmarkChild], evidence: Sequence[_Evidence], cap: int
) -> set[str]:
    """Of the jobs submitted before this call, those still pending or running that a child to submit now waits
    for: one observation for all of them (none when no such child has a submitted predecessor)."""
    wanted: list[str] = []
    for child, found in zip(children, evidence, strict=True):
        before = child.index - cap
        if found.jobs or before < 0:
            continue
        wanted.extend(evidence[before].jobs)
    if not wanted:
        return set()
    since = min(f.record.created_at for f in evidence if f.record is not None and f.jobs) - SINCE_SLACK
    observation = context.scheduler.observe(tuple(dict.fromkeys(wanted)), since=since)
    if not observation.scheduler_reachable:
        raise UnavailableError(
            "cannot tell which earlier children are still queued or running (their jobs are the dependency lanes "
            f"of the children to submit): squeue {observation.squeue.status}, sacct {observation.sacct.status}",
            code="scheduler_unreachable",
            operation=_OPERATION,
            hint="nothing was submitted; run 'benchmark run' again when the scheduler answers",
        )
    return {task.job_id for task in observation.tasks if task.state not in TERMINAL_TASK_STATES}


def _found_by_name(context: _Context, evidence: Sequence[_Evidence]) -> dict[str, SubmittedChunk]:
    """The chunks Slurm already holds of runs recorded but never (wholly) submitted, by job name: one
    ``squeue --name`` and one ``sacct --name`` for all of them together (none when there is no such run)."""
    units = [found.record for found in evidence if found.record is not None and not found.jobs]
    if not units:
        return {}
    names = [chunk.job_name for record in units for chunk in record.unit.chunks]
    since = min(record.created_at for record in units) - SINCE_SLACK
    return context.scheduler.find_submitted(names, since=since)


class _Held(Exception):
    """The child is bound to a live ``benchmark run`` that may be submitting it right now."""

    def __init__(self, run_id: str | None, detail: str) -> None:
        super().__init__(detail)
        self.run_id = run_id
        self.detail = detail


class _Failed(Exception):
    """Submitting the child's run failed (``error``); ``run_id`` is its bound run."""

    def __init__(self, run_id: str, error: SlurmExtensionError) -> None:
        super().__init__(error.info.message)
        self.run_id = run_id
        self.error = error


def _submit_child(
    context: _Context,
    child: BenchmarkChild,
    found: _Evidence,
    after: tuple[str, ...],
    known: Mapping[str, SubmittedChunk],
) -> tuple[ChildOutcome, str, tuple[str, ...]]:
    """Bind (or take over) the child and submit its run; the outcome, run id and job ids."""
    if found.unreadable is not None:
        raise _Held(None, f"child {child.index}'s binding cannot be read ({found.unreadable}); it is never bound again")
    outcome: ChildOutcome = "submitted"
    if found.binding is None:
        binding = _bind(context, child)
        if isinstance(binding, _Evidence):  # another process bound it first
            found = binding
        else:
            return (
                outcome,
                binding.run_id,
                _failing(binding.run_id, lambda: _create(context, child, binding.run_id, after)),
            )
    assert found.binding is not None
    if found.jobs:  # the binding's winner submitted it between our reading and our binding
        return "already_submitted", found.binding.run_id, found.jobs
    if found.holder is not None and not _is_self(found.holder, context.started) and context.alive(found.holder):
        who = found.holder
        raise _Held(
            found.binding.run_id, f"child {child.index} is being submitted by {who.user}@{who.host} (pid {who.pid})"
        )
    claim = ChildResumeClaim(
        child_id=child.child_id,
        resume=found.next_resume,
        claimed_by=requester_from_environment(context.environ, clock=context.clock),
    )
    if not claim_child_resume(context.layout, claim, clock=context.clock, operation=_OPERATION):
        raise _Held(found.binding.run_id, f"child {child.index} is being resumed by another 'benchmark run'")
    run_id = found.binding.run_id
    if found.record is None:  # bound, but its run record was never written: nothing of it was submitted
        discard_run_directory(RunLayout(Path(context.target.profile.workspace_root), RunId.parse(run_id)))
        return "resumed", run_id, _failing(run_id, lambda: _create(context, child, run_id, after))
    record = found.record
    return "resumed", run_id, _failing(run_id, lambda: _resume(context, child, record, after, known))


def _failing(run_id: str, submit: Callable[[], tuple[str, ...]]) -> tuple[str, ...]:
    try:
        return submit()
    except SlurmExtensionError as exc:
        raise _Failed(run_id, exc) from exc


def _is_self(who: Requester, started: datetime) -> bool:
    """A binding taken by this very process before this call began (an earlier call, returned): never held against
    it. One taken during this call by the same process is another thread's, held like any other."""
    return who.pid == os.getpid() and who.host == socket.gethostname() and who.time < started


def _bind(context: _Context, child: BenchmarkChild) -> ChildBinding | _Evidence:
    """Take the child's binding write-once; the winner's evidence when another process took it first."""
    rid = context.ids(_child_run_name(context.plan.benchmark.name, child.index))
    binding = ChildBinding(
        child_id=child.child_id,
        index=child.index,
        run_id=str(rid),
        claimed_by=requester_from_environment(context.environ, clock=context.clock),
    )
    if bind_child(context.layout, binding, modes=context.modes, clock=context.clock, operation=_OPERATION):
        return binding
    again = read_benchmark(context.layout)
    return _evidence(context, again.children[child.child_id])


def _create(context: _Context, child: BenchmarkChild, run_id: str, after: tuple[str, ...]) -> tuple[str, ...]:
    rid = RunId.parse(run_id)
    target = context.target.of(child, rid.name)
    bound: BoundRun = bind_run(target, rid)
    result = submit_plan(
        child.plan,
        context.snapshot,
        target,
        bound,
        context.scheduler,
        clock=context.clock,
        environment=context.environments[child.plan_digest],
        link=context.link(child),
        after_jobs=after,
    )
    return tuple(dict.fromkeys(job.job_id for job in result.jobs))


def _resume(
    context: _Context,
    child: BenchmarkChild,
    record: RunRecord,
    after: tuple[str, ...],
    known: Mapping[str, SubmittedChunk],
) -> tuple[str, ...]:
    """Submit the chunks of a recorded run that Slurm does not hold (found by name), and record them."""
    layout = RunLayout(Path(context.target.profile.workspace_root), RunId.parse(record.run_id))
    result = context.scheduler.submit(
        record.unit,
        since=record.created_at - SINCE_SLACK,
        environment=context.environments[child.plan_digest],
        after_jobs=after,
        known={chunk.job_name: known[chunk.job_name] for chunk in record.unit.chunks if chunk.job_name in known},
    )
    jobs = submitted_jobs(record.unit, result.chunks)
    record_submission(layout, jobs, sbatch_calls=result.sbatch_calls, clock=context.clock, operation=_OPERATION)
    return tuple(dict.fromkeys(job.job_id for job in jobs))


def _child_run_name(name: str, index: int) -> str:
    """``<benchmark name>-c<index>``, the name shortened so the whole stays a valid run name."""
    suffix = f"-c{index}"
    head = name[: _RUN_NAME_MAX - len(suffix)].rstrip("-._")
    return f"{head}{suffix}"
