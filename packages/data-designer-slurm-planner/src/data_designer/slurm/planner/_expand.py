"""Expand a benchmark into ordered child runs, each compiled into an :class:`ExecutionPlan` (pure, deterministic).

Children are the cartesian product of the axes in declared order (the last axis varies fastest),
then the repeats (innermost). Each child is the base run with the case's axis values applied:

* ``concurrency``: ``client.concurrency[alias]`` (a deployed or external alias);
* ``tensor_parallel``, ``replicas``: the field of the alias's deployment (``tensor_parallel``
  needs a ``vllm`` deployment);
* ``nodes``: the deployment's replicas fill that many nodes: ``nodes * (gpus_per_node //
  gpus_per_replica)`` replicas, or ``nodes // nodes_per_replica`` for replicas spanning nodes.
  Other deployments of the run add their own GPUs; without a known ``gpus_per_node`` the axis is
  unresolved and the base replicas stay;
* ``engine_arg``: ``engine_args[arg]`` of a ``vllm`` deployment (checked like any engine arg);
* ``model``: the deployment's model, or the external endpoint's model name;
* ``image``: the deployment's image, or the client's when the axis names no alias;

then one shard (``sharding: {shards: 1}``: one allocation measured per child), the records of the
benchmark's policy (``fixed``, or ``scaled``: ``per_concurrency`` times the child's total client
concurrency over every served alias, clamped to ``[min_records, max_records]``) and
``submission.exclusive`` from the benchmark.

**Children keep the base run's name.** The name is part of the run, hence of the plan digest;
keeping it makes equal cases give equal plan digests in every benchmark built on the same base
run, so a child can be recognised again. Repeats of a case share its plan and plan digest; the
child id (12 hex characters of sha256 over the benchmark digest, the case, the plan digest and
the repeat index) tells them apart. The benchmark digest covers the resolved benchmark (its base
run inline, the Data Designer config inline, every default written out) and every child except
its id, with each plan represented by its digest.

Every problem of every child is reported at once: problems of an axis (or of a value an axis set)
name ``axes[i]`` or ``axes[i].values[j]`` of the benchmark file; problems of the base run name its
key in the run file (or under ``base.inline``); a problem found in several children is reported
once, saying which children.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from data_designer.slurm.contracts import (
    MAX_BENCHMARK_REPLICAS,
    MAX_REPLICAS,
    Axis,
    BaseRun,
    BenchmarkChild,
    BenchmarkPlan,
    BenchmarkSpec,
    CaseValue,
    ClusterFacts,
    ClusterProfile,
    CommandDeployment,
    ConcurrencyAxis,
    EngineArgAxis,
    EngineArgValue,
    ExecutionPlan,
    FixedRecords,
    ImageAxis,
    ImageRecord,
    InvalidInputError,
    KeyPath,
    ModelAxis,
    NodesAxis,
    Problem,
    RunSpec,
    Sharding,
    TensorParallelAxis,
    Unresolved,
    VllmDeployment,
    excerpt,
    format_key_path,
)
from data_designer.slurm.planner._compile import compile
from data_designer.slurm.planner._digest import canonical_json, sha256_digest
from data_designer.slurm.planner._document import Document
from data_designer.slurm.planner._images import Installation
from data_designer.slurm.planner._limits import benchmark_limit_problems, benchmark_replicas_problem
from data_designer.slurm.planner._vllm import check_engine_arg_name, check_engine_args, serve_flag_versions

CHILD_ID_LENGTH = 12
"""Hex characters of a child id."""

_OPERATION = "benchmark.expand"


def expand(
    benchmark: BenchmarkSpec,
    profile: ClusterProfile,
    *,
    cluster: str,
    base: RunSpec,
    config: Document,
    facts: ClusterFacts | None = None,
    images: Iterable[ImageRecord] | None = None,
    installation: Installation | None = None,
    source: Document | None = None,
    base_source: Document | None = None,
) -> BenchmarkPlan:
    """The benchmark plan of ``benchmark`` on ``profile`` (cluster ``cluster``).

    ``base`` is the base run (:func:`load_base_run`) and ``config`` its Data Designer config document
    (:func:`resolve_config`); ``facts``, ``images`` and ``installation`` are as for :func:`compile`.
    ``source`` and ``base_source`` are the parsed benchmark and base run files, when the caller has them: they
    give problems their lines.
    """
    facts = facts or ClusterFacts()
    registry = None if images is None else tuple(images)
    gpus_per_node = profile.gpus_per_node if isinstance(profile.gpus_per_node, int) else facts.gpus_per_node
    state = _State(_Locator(benchmark, source, base_source))
    for problem in benchmark_limit_problems(benchmark):  # before anything is expanded
        state.add(problem.code, problem.key_path or (), problem.message, problem.hint or "")
    if state.problems:
        raise InvalidInputError.from_problems(state.render(cases=0), operation=_OPERATION, file=state.where.file)
    valid = [
        _check_axis(index, axis, benchmark.axes[:index], base, gpus_per_node, state)
        for index, axis in enumerate(benchmark.axes)
    ]
    too_many = benchmark_replicas_problem(_planned_replicas(benchmark, base, valid, gpus_per_node, state.where))
    if too_many is not None:  # before any case is compiled: the cases' plans are held together
        state.add(too_many.code, too_many.key_path or (), too_many.message, too_many.hint or "")
        raise InvalidInputError.from_problems(state.render(cases=0), operation=_OPERATION, file=state.where.file)

    plans: list[tuple[tuple[CaseValue, ...], int, ExecutionPlan]] = []
    cases = 0
    for number, positions in enumerate(itertools.product(*(range(len(axis.values)) for axis in benchmark.axes))):
        cases += 1
        case = tuple((_label(axis), axis.values[j]) for axis, j in zip(benchmark.axes, positions, strict=True))
        described = ", ".join(f"{label}={excerpt(value)}" for label, value in case)
        run, applied = _child_run(benchmark, base, positions, valid, gpus_per_node, (number, described), state)
        try:
            plan = compile(
                run, profile, cluster=cluster, config=config, facts=facts, images=registry, installation=installation
            )
        except InvalidInputError as exc:
            for problem in exc.problems:
                state.found(state.where.child_problem(problem, applied), number, described)
            continue
        if number in state.cases:
            continue  # an axis value could not be applied: reported, and the plan is not that case's
        for item in plan.unresolved:
            state.unresolved(state.where.child_unresolved(item, applied))
        plans.append((case, run.records, plan))

    if state.problems:
        raise InvalidInputError.from_problems(state.render(cases=cases), operation=_OPERATION, file=state.where.file)
    return _assemble(benchmark, base, config, plans, tuple(state.unresolved_items.values()))


def benchmark_plan_digest(plan: BenchmarkPlan) -> str:
    """sha256 of the canonical JSON of ``plan`` without its digest, its child ids and its child plans (their digests
    stand for them). The request targets added later (``max_error_rate``, ``max_p95_latency_s``) count only when set
    away from their defaults, so a benchmark file that does not name them keeps its digest and its id."""
    body = plan.model_dump(mode="json", exclude={"digest": True, "children": {"__all__": {"child_id", "plan"}}})
    targets = body["benchmark"]["targets"]
    for key, default in _LATER_TARGETS.items():
        if targets.get(key) == default:
            del targets[key]
    return sha256_digest(body)


_LATER_TARGETS: dict[str, object] = {"max_error_rate": 0.0, "max_p95_latency_s": None}
"""Analysis targets added after benchmark digests were first published, with their defaults (left out of the
digest at those values)."""


def child_id(benchmark_digest: str, case: Sequence[CaseValue], plan_digest: str, repeat: int) -> str:
    """The id of one child: the first :data:`CHILD_ID_LENGTH` hex characters of sha256 over what identifies it."""
    material = {"benchmark": benchmark_digest, "case": [list(c) for c in case], "plan": plan_digest, "repeat": repeat}
    return sha256_digest(material)[:CHILD_ID_LENGTH]


def _assemble(
    benchmark: BenchmarkSpec,
    base: RunSpec,
    config: Document,
    plans: Sequence[tuple[tuple[CaseValue, ...], int, ExecutionPlan]],
    unresolved: tuple[Unresolved, ...],
) -> BenchmarkPlan:
    source = base.data_designer.model_copy(update={"config": None, "inline": config.data})
    inline_base = base.model_copy(update={"data_designer": source}).model_dump(mode="json")
    resolved = benchmark.model_copy(update={"base": BaseRun(inline=inline_base)})
    children: list[BenchmarkChild] = []
    hours: float | None = 0.0
    for case, records, plan in plans:
        for repeat in range(benchmark.repeats):
            children.append(
                BenchmarkChild(
                    child_id="",
                    index=len(children),
                    case=case,
                    repeat=repeat,
                    records=records,
                    plan=plan,
                    plan_digest=plan.digest,
                )
            )
            bound = plan.gpu_hours_upper_bound
            hours = None if hours is None or bound is None else hours + bound
    draft = BenchmarkPlan(
        digest="",
        benchmark=resolved,
        children=tuple(children),
        unresolved=unresolved,
        gpu_hours_upper_bound=None if hours is None else round(hours, 6),
        exclusive=benchmark.exclusive,
        max_concurrent_children=benchmark.max_concurrent_children,
    )
    digest = benchmark_plan_digest(draft)
    named = tuple(
        c.model_copy(update={"child_id": child_id(digest, c.case, c.plan_digest, c.repeat)}) for c in draft.children
    )
    return draft.model_copy(update={"digest": digest, "children": named})


# --- axes -------------------------------------------------------------------------------------------------------------


def _label(axis: Axis) -> str:
    """How an axis is named in a case: ``<axis>.<alias>`` (``engine_arg.<alias>.<arg>``; ``image`` for the client)."""
    if isinstance(axis, EngineArgAxis):
        return f"engine_arg.{axis.alias}.{axis.arg}"
    if isinstance(axis, ImageAxis) and axis.alias is None:
        return "image"
    return f"{axis.axis}.{axis.alias}"


def _target(axis: Axis) -> tuple[str | None, ...]:
    """What an axis sets; two axes with the same target conflict (``nodes`` sets replicas)."""
    if isinstance(axis, EngineArgAxis):
        return ("engine_arg", axis.alias, axis.arg)
    kind = "replicas" if isinstance(axis, NodesAxis) else axis.axis
    return (kind, axis.alias)


def _run_path(axis: Axis, base: RunSpec) -> KeyPath:
    """The base run key an axis sets (problems compile finds there are reported at the axis value instead)."""
    if isinstance(axis, ConcurrencyAxis):
        return ("client", "concurrency", axis.alias)
    if isinstance(axis, ImageAxis):
        return ("client", "image") if axis.alias is None else ("deployments", axis.alias, "image")
    assert axis.alias is not None
    if isinstance(axis, ModelAxis) and axis.alias in base.external:
        return ("external", axis.alias, "model")
    if isinstance(axis, EngineArgAxis):
        return ("deployments", axis.alias, "engine_args", axis.arg)
    return ("deployments", axis.alias, "replicas" if isinstance(axis, NodesAxis) else axis.axis)


class _State:
    """Problems (grouped over cases) and unresolved entries collected while expanding."""

    def __init__(self, where: _Locator) -> None:
        self.where = where
        self.problems: dict[Problem, list[int]] = {}
        self.unresolved_items: dict[tuple[str, str, str], Unresolved] = {}
        self.cases: dict[int, str] = {}

    def add(self, code: str, key_path: KeyPath, message: str, hint: str) -> None:
        """A problem of the benchmark file itself (not of one case)."""
        line = self.where.line(key_path)
        problem = Problem(code=code, file=self.where.file, line=line, key_path=key_path, message=message, hint=hint)
        self.problems.setdefault(problem, [])

    def found(self, problem: Problem, case: int, described: str) -> None:
        self.cases[case] = described
        found_in = self.problems.setdefault(problem, [])
        if case not in found_in:
            found_in.append(case)

    def unresolved(self, item: Unresolved) -> None:
        self.unresolved_items.setdefault((item.what, item.key_path, item.detail), item)

    def render(self, *, cases: int) -> list[Problem]:
        out: list[Problem] = []
        for problem, found_in in self.problems.items():
            if found_in and len(found_in) < cases:
                first = self.cases[found_in[0]] or "the base case"
                which = f"case {first}" if len(found_in) == 1 else f"{len(found_in)} of {cases} cases, first {first}"
                problem = problem.model_copy(update={"message": f"{problem.message} (in {which})"})
            out.append(problem)
        return out


def _check_axis(
    index: int, axis: Axis, earlier: Sequence[Axis], base: RunSpec, gpus_per_node: int | None, state: _State
) -> bool:
    """Problems of one axis against the base run; whether the axis can be applied."""
    at: KeyPath = ("axes", index)
    ok = True
    for other_index, other in enumerate(earlier):
        if _target(other) == _target(axis):
            state.add(
                "axis_conflict",
                at,
                f"axis {_label(axis)!r} sets what axes[{other_index}] ({_label(other)!r}) already sets",
                "sweep each setting on one axis (nodes and replicas of one alias are one setting)",
            )
            ok = False
    seen: dict[bytes, int] = {}
    for position, value in enumerate(axis.values):
        key = canonical_json(value)
        if key in seen:
            state.add(
                "axis_value_repeated",
                (*at, "values", position),
                f"value {excerpt(value)} repeats values[{seen[key]}]",
                "list each value once; use 'repeats' to measure a case several times",
            )
            ok = False
        seen.setdefault(key, position)
    return _check_alias(at, axis, base, gpus_per_node, state) and ok


def _check_alias(at: KeyPath, axis: Axis, base: RunSpec, gpus_per_node: int | None, state: _State) -> bool:
    served = sorted({*base.deployments, *base.external})
    deployed = sorted(base.deployments)
    if isinstance(axis, ImageAxis) and axis.alias is None:
        return True
    alias = axis.alias
    assert alias is not None
    if isinstance(axis, ConcurrencyAxis | ModelAxis):
        if alias not in served:
            state.add(
                "axis_alias",
                (*at, "alias"),
                f"alias {alias!r} is neither deployed nor external in the base run",
                f"use one of: {', '.join(served) or '(no aliases)'}",
            )
            return False
        return True
    deployment = base.deployments.get(alias)
    if deployment is None:
        what = "external, not deployed" if alias in base.external else "not deployed"
        state.add(
            "axis_alias",
            (*at, "alias"),
            f"the {axis.axis} axis needs a deployed alias; {alias!r} is {what} in the base run",
            f"use one of: {', '.join(deployed) or '(no deployments)'}",
        )
        return False
    if isinstance(axis, TensorParallelAxis | EngineArgAxis) and not isinstance(deployment, VllmDeployment):
        state.add(
            "axis_engine",
            (*at, "alias"),
            f"the {axis.axis} axis needs a 'vllm' deployment; {alias!r} uses engine {deployment.engine!r}",
            "sweep a vllm deployment, or vary the command deployment's argv in separate base runs",
        )
        return False
    if isinstance(axis, EngineArgAxis):
        return _check_engine_arg(at, axis, state)
    if isinstance(axis, NodesAxis):
        if isinstance(deployment, CommandDeployment) and deployment.gpus_per_replica == 0:
            state.add(
                "axis_no_gpus",
                (*at, "alias"),
                f"the nodes axis fills nodes with GPU replicas; {alias!r} uses no GPUs",
                "sweep 'replicas' instead",
            )
            return False
        if gpus_per_node is None:
            state.unresolved(
                Unresolved(
                    what="gpus_per_node",
                    key_path=format_key_path(at),
                    detail=f"the nodes axis of {alias!r} needs GPUs per node, and the profile says 'auto' and the "
                    "cluster was not probed; children keep the base run's replicas",
                    hint="run 'data-designer slurm profile validate --probe' or set gpus_per_node in the profile",
                )
            )
    return True


def _check_engine_arg(at: KeyPath, axis: EngineArgAxis, state: _State) -> bool:
    """The axis's flag and each value, against the supported releases: what no release accepts is reported here,
    once, at the axis; what only the release a child runs refuses is reported when that child is compiled (it
    knows the release: its image's vLLM or its ``vllm_version``), at the value."""
    named = _in_no_release(lambda version: [p] if (p := check_engine_arg_name(axis.arg, version=version)) else [])
    for problem in named:
        state.add(problem.code, (*at, "arg"), problem.message, problem.hint or "")
    if named:
        return False
    ok = True
    for position, value in enumerate(axis.values):
        for problem in _in_no_release(functools.partial(_check_value, axis.arg, value), axis.arg):
            state.add(problem.code, (*at, "values", position), problem.message, problem.hint or "")
            ok = False
    return ok


def _check_value(arg: str, value: EngineArgValue, version: str | None) -> list[Problem]:
    return check_engine_args({arg: value}, path=(), version=version)


def _in_no_release(check: Callable[[str | None], list[Problem]], arg: str | None = None) -> list[Problem]:
    """What the check finds when every supported release alone finds something (else nothing): the findings of the
    newest release that has the flag ``arg``, or of all releases together."""
    versions = serve_flag_versions()
    if not all(check(version) for version in versions):
        return []
    having = [v for v in versions if arg is not None and check_engine_arg_name(arg, version=v) is None]
    return check(having[-1] if having else None)


# --- children ---------------------------------------------------------------------------------------------------------


def _child_run(
    benchmark: BenchmarkSpec,
    base: RunSpec,
    positions: Sequence[int],
    valid: Sequence[bool],
    gpus_per_node: int | None,
    case: tuple[int, str],
    state: _State,
) -> tuple[RunSpec, dict[KeyPath, KeyPath]]:
    """The run of one case, and which run keys the axes set (run key path -> ``axes[i].values[j]``)."""
    run = base
    applied: dict[KeyPath, KeyPath] = {}
    nodes: list[tuple[int, NodesAxis, int]] = []
    for index, (axis, position) in enumerate(zip(benchmark.axes, positions, strict=True)):
        if not valid[index]:
            continue
        applied[_run_path(axis, base)] = ("axes", index, "values", position)
        if isinstance(axis, NodesAxis):
            nodes.append((index, axis, position))
        else:
            run = _apply(run, axis, axis.values[position])
    for index, axis, position in nodes:
        run = _apply_nodes(
            run, axis, axis.values[position], gpus_per_node, ("axes", index, "values", position), case, state
        )
    records = _records(benchmark, run)
    submission = run.submission.model_copy(update={"exclusive": benchmark.exclusive})
    return run.model_copy(
        update={"records": records, "sharding": Sharding(shards=1), "submission": submission}
    ), applied


def _planned_replicas(
    benchmark: BenchmarkSpec, base: RunSpec, valid: Sequence[bool], gpus_per_node: int | None, where: _Locator
) -> int:
    """Replicas over every case (a case above :data:`MAX_REPLICAS` counts none: compile refuses it), stopping past
    :data:`MAX_BENCHMARK_REPLICAS`. Applying the axes is cheap next to compiling."""
    scratch = _State(where)  # problems of applying a case are reported when the case is compiled
    total = 0
    for number, positions in enumerate(itertools.product(*(range(len(axis.values)) for axis in benchmark.axes))):
        run, _ = _child_run(benchmark, base, positions, valid, gpus_per_node, (number, ""), scratch)
        replicas = sum(d.replicas for d in run.deployments.values())
        total += replicas if replicas <= MAX_REPLICAS else 0
        if total > MAX_BENCHMARK_REPLICAS:
            break
    return total


def _apply(run: RunSpec, axis: Axis, value: EngineArgValue) -> RunSpec:
    if isinstance(axis, ConcurrencyAxis):
        client = run.client.model_copy(update={"concurrency": {**run.client.concurrency, axis.alias: value}})
        return run.model_copy(update={"client": client})
    if isinstance(axis, ImageAxis) and axis.alias is None:
        return run.model_copy(update={"client": run.client.model_copy(update={"image": value})})
    assert axis.alias is not None
    if isinstance(axis, ModelAxis) and axis.alias in run.external:
        endpoint = run.external[axis.alias].model_copy(update={"model": value})
        return run.model_copy(update={"external": {**run.external, axis.alias: endpoint}})
    deployment = run.deployments[axis.alias]
    update: dict[str, Any]
    if isinstance(axis, EngineArgAxis):
        assert isinstance(deployment, VllmDeployment)
        update = {"engine_args": {**deployment.engine_args, axis.arg: value}}
    else:
        update = {axis.axis: value}
    return run.model_copy(update={"deployments": {**run.deployments, axis.alias: deployment.model_copy(update=update)}})


def _apply_nodes(
    run: RunSpec,
    axis: NodesAxis,
    nodes: int,
    gpus_per_node: int | None,
    at: KeyPath,
    case: tuple[int, str],
    state: _State,
) -> RunSpec:
    deployment = run.deployments[axis.alias]
    if gpus_per_node is None:
        return run
    if isinstance(deployment, VllmDeployment):
        per_replica = deployment.tensor_parallel * deployment.pipeline_parallel
    else:
        per_replica = deployment.gpus_per_replica
    if per_replica <= gpus_per_node:
        replicas = nodes * (gpus_per_node // per_replica)
    else:
        replicas = nodes // -(-per_replica // gpus_per_node)
    if replicas == 0:
        state.found(
            Problem(
                code="axis_nodes_too_few",
                key_path=at,
                message=f"{nodes} node(s) of {gpus_per_node} GPUs cannot hold a replica of {axis.alias!r} "
                f"({per_replica} GPUs)",
                hint="use more nodes, or fewer GPUs per replica",
                file=state.where.file,
                line=state.where.line(at),
            ),
            *case,
        )
        return run
    updated = deployment.model_copy(update={"replicas": replicas})
    return run.model_copy(update={"deployments": {**run.deployments, axis.alias: updated}})


def _records(benchmark: BenchmarkSpec, run: RunSpec) -> int:
    policy = benchmark.records
    if isinstance(policy, FixedRecords):
        return policy.records
    client = run.client
    total = sum(
        client.concurrency.get(alias, client.default_concurrency) for alias in [*run.deployments, *run.external]
    )
    return min(max(policy.per_concurrency * total, policy.min_records), policy.max_records)


# --- where problems are reported --------------------------------------------------------------------------------------


class _Locator:
    """Maps problems compile finds in a child run back to the benchmark file or the base run file."""

    def __init__(self, benchmark: BenchmarkSpec, source: Document | None, base_source: Document | None) -> None:
        self.file = source.file if source is not None else "<benchmark>"
        self.inline = benchmark.base.inline is not None
        self.base_file = self.file if self.inline else benchmark.base.run
        self._source = source
        self._base_source = source if self.inline else base_source

    def child_problem(self, problem: Problem, applied: Mapping[KeyPath, KeyPath]) -> Problem:
        if problem.file is not None:
            return problem  # found in another file (the Data Designer config): already located
        key_path, file, line = self._locate(problem.key_path, applied)
        return problem.model_copy(update={"key_path": key_path, "file": file, "line": line})

    def child_unresolved(self, item: Unresolved, applied: Mapping[KeyPath, KeyPath]) -> Unresolved:
        # An unresolved entry names its key as plan text (plans are digested): matched against the keys' text.
        text = item.key_path
        if re.split(r"[.\[]", text, maxsplit=1)[0] not in RunSpec.model_fields:
            return item  # a profile key: not in the benchmark's files
        for run_path, axis_path in applied.items():
            if text == format_key_path(run_path) or text.startswith(tuple(format_key_path(run_path) + c for c in ".[")):
                return item.model_copy(update={"key_path": format_key_path(axis_path)})
        return item.model_copy(update={"key_path": f"base.inline.{text}"}) if self.inline else item

    def _locate(
        self, key_path: KeyPath | None, applied: Mapping[KeyPath, KeyPath]
    ) -> tuple[KeyPath | None, str | None, int | None]:
        if key_path is None or not is_run_key(key_path):
            return key_path, None, None  # a profile key (or none): not in the benchmark's files
        for run_path, axis_path in applied.items():
            if key_path[: len(run_path)] == run_path:
                return axis_path, self.file, _line(self._source, axis_path)
        if self.inline:
            inline_path = ("base", "inline", *key_path)
            return inline_path, self.file, _line(self._source, inline_path)
        return key_path, self.base_file, _line(self._base_source, key_path)

    def line(self, key_path: KeyPath) -> int | None:
        return _line(self._source, key_path)


def is_run_key(key_path: KeyPath) -> bool:
    """Whether a problem's key path names a key of the run file (the others name keys of the profile)."""
    return bool(key_path) and key_path[0] in RunSpec.model_fields


def _line(document: Document | None, path: KeyPath) -> int | None:
    """The line of ``path``, or of its nearest ancestor short of the root (which only the empty path names)."""
    return None if document is None else document.line_of(path, root=not path)
