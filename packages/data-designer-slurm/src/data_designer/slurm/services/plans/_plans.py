"""Dry-run services: compile a run (or expand a benchmark) against a profile, offline, and optionally write it out.

No Slurm and no run directory: GPUs per node come from the profile (``auto`` stays unresolved), MaxArraySize is
Slurm's default (1001) unless given. Registered images resolve from the workspace's registry as in ``execute``
(``services.images._records``: the entries of the names used, each digest checked with one ``stat`` while the file's
identity is the cached one), so a dry run and ``execute`` give the same plan digest; names the registry lacks stay
unresolved, absolute paths pass unchecked. With ``cluster_check`` the cluster's
facts are used instead (cached or asked, never written) and the plan is checked against them as
``execute`` checks it. The files the run names (its
Data Designer config, a benchmark's base run) are read here and handed to the pure planner.

Every problem is reported with the file and line it comes from: the planner reports key paths,
which are mapped back to the run file, the profile's selected cluster, or the config file.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import (
    AliasSummary,
    BenchmarkDryRun,
    BenchmarkPlan,
    BenchmarkSpec,
    ChildSummary,
    ClusterFacts,
    ClusterProfile,
    ConflictError,
    DryRunOutput,
    ExecutionPlan,
    ImageRecord,
    InvalidInputError,
    KeyPath,
    PlanSummary,
    Problem,
    RunDryRun,
    RunSpec,
    SlurmExtensionError,
    VllmDeployment,
)
from data_designer.slurm.planner import (
    INLINE_CONFIG_FILE,
    Document,
    DryRunFile,
    base_run_path,
    benchmark_files,
    benchmark_images,
    compile,
    config_path,
    expand,
    load_base_run,
    load_benchmark,
    load_run,
    named_images,
    parse_document,
    plan_files,
    resolve_config,
)
from data_designer.slurm.runtime.scheduler import CommandRunner
from data_designer.slurm.runtime.store import Clock, read_text, system_clock, write_text_atomic
from data_designer.slurm.services.context import DEFAULT_MAX_ARRAY_SIZE, ServiceContext, cluster_facts, refuse_misfit
from data_designer.slurm.services.images import registered_images, submitting_installation
from data_designer.slurm.services.plans._seeds import seed_files

_RUN_KEYS = frozenset(RunSpec.model_fields)
_PROFILE_KEYS = frozenset(ClusterProfile.model_fields)


class Source:
    """A file problems can point into: its name, its document (parsed only when a problem needs a line), and the
    key prefix of the part that was compiled (a profile's selected cluster, a benchmark's inline base run)."""

    def __init__(self, file: str, text: Callable[[], str], prefix: KeyPath = ()) -> None:
        self.file = file
        self.prefix = prefix
        self._text = text

    @functools.cached_property
    def document(self) -> Document:
        return parse_document(self._text(), file=self.file)


def run_images(run: RunSpec, profile: ClusterProfile) -> tuple[ImageRecord, ...]:
    """The registry's records of the images ``run`` names on ``profile`` (digests verified by identity)."""
    return registered_images(profile, named_images(run, profile))


_COMPILE = "plan.compile"


def plan_run(
    run_file: str | Path,
    *,
    profile: str | Path | None = None,
    cluster: str | None = None,
    out: str | Path | None = None,
    force: bool = False,
    max_array_size: int | None = None,
    environ: Mapping[str, str] | None = None,
    cluster_check: bool = False,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
) -> RunDryRun:
    """Compile ``run_file`` against the selected profile cluster without Slurm; with ``out``, write the plan there.

    ``cluster_check`` compiles with the cluster's facts instead (the workspace's fresh cache, else asked from
    Slurm through ``runner``; nothing is written to the workspace) and refuses, as ``execute`` does, a plan that
    asks for more than the partition offers (exit 2, one problem per violation).

    ``out`` receives ``plan.json`` (the plan's canonical JSON), ``allocation.sbatch`` and
    ``submission.json`` (the submission unit, bound with run id ``dry-run`` and the output directory
    as run directory); the last two only when nothing is unresolved. A non-empty ``out`` is never
    written to unless ``force`` (:class:`ConflictError`, exit 4).
    """
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock)
    operation = "execute.dry_run"
    run_path = Path(run_file).expanduser().absolute()
    run_text = read_input(run_path, what="run file", operation=operation)
    run = load_run(run_text, file=str(run_path))
    profile_path, cluster_name, cluster_profile = ctx.selected
    if cluster_check:
        if max_array_size is not None:
            raise InvalidInputError(
                "--max-array-size does not combine with --cluster-check",
                code="not_with_cluster_check",
                operation=operation,
                key_path=("--max-array-size",),
                hint="leave out --max-array-size: the cluster check reads the cluster's own MaxArraySize",
            )
        scheduler = ctx.scheduler()
        facts, _ = cluster_facts(cluster_profile, scheduler, clock)
    else:
        facts = dry_run_facts(cluster_profile, max_array_size)
    run_source = Source(str(run_path), lambda: run_text)
    profile_source = profile_source_of(profile_path, cluster_name, operation=operation)
    plan, config_text = compile_located(
        run, cluster_profile, cluster_name, facts, run_source=run_source, profile_source=profile_source
    )
    seed_files(run, config_text, operation=operation)  # what execute checks before it writes anything
    if cluster_check:
        refuse_misfit(plan, facts, lambda p: locate(p, run_source, profile_source))
    output = None
    if out is not None:
        directory = Path(out).expanduser().absolute()
        output = write_outputs(directory, plan_files(plan, str(directory)), force=force, operation=operation)
    return RunDryRun(
        run_file=str(run_path),
        profile_file=str(profile_path),
        cluster=cluster_name,
        facts=facts,
        plan=summarize(plan),
        output=output,
    )


def plan_benchmark(
    bench_file: str | Path,
    *,
    profile: str | Path | None = None,
    cluster: str | None = None,
    out: str | Path | None = None,
    force: bool = False,
    max_array_size: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> BenchmarkDryRun:
    """Expand ``bench_file`` into its children against the selected profile cluster without Slurm.

    With ``out``: ``benchmark.json`` (the benchmark plan's canonical JSON) and, per child,
    ``children/<index>-<child id>/`` with the files :func:`plan_run` writes (job names
    ``dd-<benchmark>-<child id>-dry-run-c<chunk>``). A non-empty ``out`` needs ``force``.
    """
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ)
    operation = "benchmark.dry_run"
    inputs = read_benchmark_inputs(Path(bench_file).expanduser().absolute(), operation=operation)
    bench_path, benchmark = inputs.path, inputs.spec
    profile_path, cluster_name, cluster_profile = ctx.selected
    facts = dry_run_facts(cluster_profile, max_array_size)
    profile_source = profile_source_of(profile_path, cluster_name, operation=operation)
    plan = expand_located(inputs, cluster_profile, cluster_name, facts, profile_source)

    output = None
    if out is not None:
        directory = Path(out).expanduser().absolute()
        files = benchmark_files(plan, str(directory))
        output = write_outputs(directory, files, force=force, operation=operation)
    warnings = {w: None for child in plan.children for w in child.plan.warnings}
    return BenchmarkDryRun(
        benchmark_file=str(bench_path),
        profile_file=str(profile_path),
        cluster=cluster_name,
        facts=facts,
        name=benchmark.name,
        digest=plan.digest,
        cases=len(plan.children) // benchmark.repeats,
        repeats=benchmark.repeats,
        exclusive=plan.exclusive,
        max_concurrent_children=plan.max_concurrent_children,
        children=tuple(
            ChildSummary(
                child_id=child.child_id,
                index=child.index,
                case=child.case,
                repeat=child.repeat,
                records=child.records,
                plan_digest=child.plan_digest,
                nodes_per_allocation=child.plan.allocation.nodes,
                gpus_per_allocation=child.plan.allocation.gpus,
                gpu_hours_upper_bound=child.plan.gpu_hours_upper_bound,
                submittable=not child.plan.unresolved,
            )
            for child in plan.children
        ),
        gpu_hours_upper_bound=plan.gpu_hours_upper_bound,
        unresolved=plan.unresolved,
        warnings=tuple(warnings),
        submittable=not plan.unresolved,
        output=output,
    )


@dataclass(frozen=True)
class BenchmarkInputs:
    """A benchmark file read once, with its base run and the base run's Data Designer config (texts and sources)."""

    path: Path
    text: str
    spec: BenchmarkSpec
    source: Source
    base: RunSpec
    base_path: str | None
    """The base run file, or None for a base run inline in the benchmark file."""
    base_text: str | None
    base_source: Source
    config_file: str | None
    config_text: str | None


def read_benchmark_inputs(bench_path: Path, *, operation: str) -> BenchmarkInputs:
    """Read and validate the benchmark file, its base run and the config (exit 2 or 3, located at file and key)."""
    bench_text = read_input(bench_path, what="benchmark file", operation=operation)
    benchmark = load_benchmark(bench_text, file=str(bench_path))
    bench_source = Source(str(bench_path), lambda: bench_text)
    base_path = base_run_path(benchmark)
    base_text: str | None = None
    if base_path is None:
        base = load_base_run(benchmark, file=str(bench_path), source=bench_source.document)
        base_source = Source(str(bench_path), lambda: bench_text, ("base", "inline"))
    else:
        text = read_named(base_path, bench_source, ("base", "run"), what="base run", operation=operation)
        base = load_base_run(benchmark, text, file=str(bench_path))
        base_source = Source(base_path, lambda: text)
        base_text = text
    config_file = config_path(base)
    config_text = None
    if config_file is not None:
        config_text = read_named(
            config_file, base_source, ("data_designer", "config"), what="Data Designer config", operation=operation
        )
    return BenchmarkInputs(
        bench_path,
        bench_text,
        benchmark,
        bench_source,
        base,
        base_path,
        base_text,
        base_source,
        config_file,
        config_text,
    )


def expand_located(
    inputs: BenchmarkInputs,
    profile: ClusterProfile,
    cluster: str,
    facts: ClusterFacts,
    profile_source: Source,
) -> BenchmarkPlan:
    """``planner.expand`` of the inputs with the registry's images, every problem located in the file and line it
    comes from."""
    images = registered_images(profile, benchmark_images(inputs.spec, inputs.base, profile))
    try:
        return expand(
            inputs.spec,
            profile,
            cluster=cluster,
            base=inputs.base,
            config=resolve_config(inputs.base, inputs.config_text),
            facts=facts,
            images=images,
            installation=submitting_installation(),
            source=inputs.source.document,
            base_source=None if inputs.base_path is None else inputs.base_source.document,
        )
    except InvalidInputError as exc:
        located = [_locate_child(p, inputs.base_source, profile_source) for p in exc.problems]
        raise InvalidInputError.from_problems(located, operation="benchmark.expand", file=str(inputs.path)) from exc


def _locate_child(problem: Problem, base: Source, profile: Source) -> Problem:
    """A problem of a benchmark child: expand locates benchmark and base run keys; the rest is located here."""
    if problem.file == INLINE_CONFIG_FILE:
        return locate(problem, base, profile)
    key = problem.key_path or ()
    if key[:2] == ("base", "inline"):
        key = key[2:]
    if key and key[0] in _PROFILE_KEYS - _RUN_KEYS:
        return locate(problem.model_copy(update={"file": None, "line": None, "key_path": key}), base, profile)
    return problem


def read_input(path: Path, *, what: str, operation: str) -> str:
    """The text of an input file named on the command line (exit 3 when missing)."""
    return read_text(path, operation=operation, what=what)


def read_named(path: str, named_by: Source, key: KeyPath, *, what: str, operation: str) -> str:
    """The text of a file that an input names at ``key`` (errors point at that key's line)."""
    try:
        return read_text(path, operation=operation, what=what)
    except SlurmExtensionError as exc:
        full = (*named_by.prefix, *key)
        raise type(exc)(
            exc.info.message,
            code=exc.info.code,
            operation=operation,
            file=named_by.file,
            line=named_by.document.line_of(full),
            key_path=full,
            hint=exc.info.hint if exc.info.code != "file_not_found" else "fix the path, or create the file",
        ) from exc


def dry_run_facts(profile: ClusterProfile, max_array_size: int | None) -> ClusterFacts:
    """Cluster facts from the profile alone: GPUs per node when it gives a number, MaxArraySize as told or default."""
    if max_array_size is not None and max_array_size < 1:
        raise InvalidInputError(
            f"max array size {max_array_size} is not positive",
            code="max_array_size",
            key_path=("--max-array-size",),
            hint="give the cluster's MaxArraySize (scontrol show config), e.g. 1001",
        )
    gpus = profile.gpus_per_node if isinstance(profile.gpus_per_node, int) else None
    return ClusterFacts(gpus_per_node=gpus, max_array_size=max_array_size or DEFAULT_MAX_ARRAY_SIZE)


def profile_source_of(path: Path, cluster: str, *, operation: str) -> Source:
    """The profile, for pointing problems at the selected cluster's keys (read again only when one needs a line)."""
    return Source(str(path), lambda: read_text(path, operation=operation), ("clusters", cluster))


def compile_located(
    run: RunSpec,
    profile: ClusterProfile,
    cluster: str,
    facts: ClusterFacts,
    *,
    run_source: Source,
    profile_source: Source,
) -> tuple[ExecutionPlan, str | None]:
    """Read the run's config, compile, and locate every problem in the file and line it comes from; the plan and
    the config file's text (None for an inline config)."""
    path = config_path(run)
    config_text = None
    if path is not None:
        config_text = read_named(
            path, run_source, ("data_designer", "config"), what="Data Designer config", operation=_COMPILE
        )
    plan = compile_config(
        run, profile, cluster, facts, config_text, run_source=run_source, profile_source=profile_source
    )
    return plan, config_text


def compile_config(
    run: RunSpec,
    profile: ClusterProfile,
    cluster: str,
    facts: ClusterFacts,
    config_text: str | None,
    *,
    run_source: Source,
    profile_source: Source,
) -> ExecutionPlan:
    """Compile with the config text already read, every problem located in the file and line it comes from
    (``execute`` reads the config's bytes itself, to snapshot exactly what it compiled)."""
    try:
        return compile(
            run,
            profile,
            cluster=cluster,
            config=resolve_config(run, config_text),
            facts=facts,
            images=run_images(run, profile),
            installation=submitting_installation(),
        )
    except InvalidInputError as exc:
        located = [locate(p, run_source, profile_source) for p in exc.problems]
        raise InvalidInputError.from_problems(located, operation=_COMPILE) from exc


def locate(problem: Problem, run: Source, profile: Source) -> Problem:
    """``problem`` with the file and line its key path points at, when the planner left them out."""
    key = problem.key_path
    if problem.file == INLINE_CONFIG_FILE:
        source, key = run, ("data_designer", "inline", *(key or ()))
    elif problem.file is not None or not key:
        return problem
    elif key[0] in _RUN_KEYS:
        source = run
    elif key[0] in _PROFILE_KEYS:
        source = profile
    else:
        return problem
    full = (*source.prefix, *key)
    return problem.model_copy(update={"file": source.file, "line": source.document.line_of(full), "key_path": full})


def summarize(plan: ExecutionPlan) -> PlanSummary:
    """The reviewable numbers of ``plan``."""
    run, allocation = plan.run, plan.allocation
    aliases: list[AliasSummary] = []
    for endpoint in allocation.client.endpoints:
        deployment = run.deployments.get(endpoint.alias)
        if deployment is None:
            aliases.append(
                AliasSummary(
                    alias=endpoint.alias,
                    kind="external",
                    engine=None,
                    model=endpoint.model,
                    replicas=0,
                    gpus_per_replica=0,
                    concurrency=endpoint.concurrency,
                    endpoint=endpoint.endpoint,
                )
            )
            continue
        gpus = (
            deployment.tensor_parallel * deployment.pipeline_parallel
            if isinstance(deployment, VllmDeployment)
            else deployment.gpus_per_replica
        )
        aliases.append(
            AliasSummary(
                alias=endpoint.alias,
                kind="deployed",
                engine=deployment.engine,
                model=deployment.model,
                replicas=deployment.replicas,
                gpus_per_replica=gpus,
                concurrency=endpoint.concurrency,
            )
        )
    return PlanSummary(
        name=run.name,
        digest=plan.digest,
        config_digest=plan.config_digest,
        records=run.records,
        shards=len(plan.shards),
        allocations=len(plan.shards),
        array_jobs=len(plan.submission.chunks),
        nodes_per_allocation=allocation.nodes,
        gpus_per_node=allocation.gpus_per_node,
        gpus_per_allocation=allocation.gpus,
        partition=allocation.partition,
        account=allocation.account,
        time_limit=allocation.time_limit,
        gpu_hours_upper_bound=plan.gpu_hours_upper_bound,
        aliases=tuple(aliases),
        unresolved=plan.unresolved,
        warnings=plan.warnings,
        submittable=not plan.unresolved,
    )


def write_outputs(directory: Path, files: Sequence[DryRunFile], *, force: bool, operation: str) -> DryRunOutput:
    """Write ``files`` (relative path, bytes) under ``directory``; a non-empty directory only with ``force``."""
    if directory.exists() and not directory.is_dir():
        raise ConflictError(
            f"{str(directory)!r} exists and is not a directory",
            code="out_not_directory",
            operation=operation,
            file=str(directory),
            hint="give --out a new or empty directory",
        )
    occupied = directory.is_dir() and any(directory.iterdir())
    if occupied and not force:
        raise ConflictError(
            f"output directory {str(directory)!r} is not empty",
            code="out_not_empty",
            operation=operation,
            file=str(directory),
            hint="choose a new or empty directory, or pass --force to overwrite the files in it",
        )
    for name, data in files:
        write_text_atomic(directory / name, data.decode("utf-8"), overwrite=force, operation=operation)
    return DryRunOutput(directory=str(directory), files=tuple(name for name, _ in files), overwritten=occupied)
