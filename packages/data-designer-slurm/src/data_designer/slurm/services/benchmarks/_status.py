"""``benchmark status BENCH`` and ``benchmark ls``: a benchmark's children and how each stands, from records.

``BENCH`` is a benchmark id (``<name>-<digest prefix>``, or a unique prefix of one), a benchmark name (its newest
benchmark), or a benchmark file (the newest benchmark run from that file). Every bound child's run is read with the
one run reader (``store.read_run``) and classified exactly as ``status`` classifies a run, from one observation of
all children's jobs together (``status.observe_runs``: one ``squeue`` and one ``sacct`` for the whole benchmark,
each run's part appended to its ``observations/``), or with ``refresh=False`` from their last recorded
observations. A child not bound yet is ``not_bound``; a child run that cannot be read is listed as such.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import (
    BenchmarkChildStatus,
    BenchmarkList,
    BenchmarkStatus,
    BenchmarkSummary,
    ChildState,
    NotFoundError,
    RunStatus,
    RunSummary,
    SchedulerEvidence,
    SlurmExtensionError,
)
from data_designer.slurm.contracts.records import BENCHMARK_SCHEMA, BenchmarkRecord
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.status import Rules, RunObservation, cached_observation, observe_runs
from data_designer.slurm.runtime.store import (
    BenchmarkLayout,
    BenchmarkSnapshot,
    Clock,
    RecordOk,
    RunDirectory,
    RunId,
    RunLayout,
    RunSnapshot,
    format_timestamp,
    is_benchmark_id,
    list_benchmark_dirs,
    read_benchmark,
    read_record,
    system_clock,
)
from data_designer.slurm.services.context import ServiceContext, collector_paused
from data_designer.slurm.services.runs import classify_observed, read_listed, run_summary

_OPERATION = "benchmark.status"


def benchmark_status(
    bench: str | Path,
    *,
    refresh: bool = True,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    rules: Rules | None = None,
) -> BenchmarkStatus:
    """Every child of benchmark ``bench`` with its run and state. Errors: the profile's (exit 2/3), no such
    benchmark (exit 3). A scheduler that cannot be asked leaves the runs classified from what they recorded, with
    ``scheduler_error`` saying why (``status`` says the same per run)."""
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock, rules=rules)
    cluster_profile = ctx.selected.profile
    root = Path(cluster_profile.workspace_root)
    snapshot = read_benchmark(find_benchmark(root, bench))
    record = snapshot.record
    scheduler = ctx.scheduler()
    view = observe_children(root, snapshot, scheduler, refresh=refresh, clock=clock, rules=rules)
    read, summaries, reasons, seen = view.read, view.summaries, view.reasons, view.seen
    children: list[BenchmarkChildStatus] = []
    counts: dict[ChildState, int] = {}
    for child in record.children:
        binding = snapshot.children[child.child_id].binding
        run_id = None if binding is None else binding.run_id
        item = read.get(child.child_id)
        summary = summaries.get(run_id or "") if isinstance(item, RunSnapshot) else item
        state: ChildState = "not_bound" if summary is None else summary.state
        counts[state] = counts.get(state, 0) + 1
        children.append(
            BenchmarkChildStatus(
                index=child.index,
                child_id=child.child_id,
                case=child.case,
                repeat=child.repeat,
                state=state,
                reason=reasons.get(run_id or "") if summary is not None else "not bound yet: run 'benchmark run'",
                run_id=run_id,
                run=summary,
            )
        )
    calls = max((one.calls for one in seen), default=0)
    errors = sorted({one.detail for one in seen if one.evidence != "live" and one.calls and one.detail})
    return BenchmarkStatus(
        benchmark_id=record.benchmark_id,
        benchmark_dir=str(snapshot.layout.directory),
        name=record.name,
        digest=record.digest,
        cluster=record.cluster,
        benchmark_file=record.benchmark_file,
        exclusive=record.exclusive,
        max_concurrent_children=record.max_concurrent_children,
        children=tuple(children),
        counts=counts,
        complete=counts.get("succeeded", 0) == len(record.children),
        evidence=_evidence(seen, refresh),
        scheduler_calls=calls,
        scheduler_error=errors[0] if errors else None,
    )


@dataclass(frozen=True)
class ChildrenView:
    """A benchmark's bound children read and classified: per child id what was read (a run snapshot, or a summary
    saying why it could not be), per run id its status, summary and why; the observations used."""

    read: dict[str, RunSnapshot | RunSummary]
    statuses: dict[str, RunStatus]
    summaries: dict[str, RunSummary]
    reasons: dict[str, str]
    seen: list[RunObservation]


def observe_children(
    root: Path,
    snapshot: BenchmarkSnapshot,
    scheduler: SlurmScheduler,
    *,
    refresh: bool,
    clock: Clock,
    rules: Rules | None,
    attempt_records: bool = False,
) -> ChildrenView:
    """Read every bound child's run (``attempt_records``: as ``store.read_run`` says), observe all of them at once
    (or take their last observations), classify each as ``status`` does. What ``benchmark status`` and ``benchmark
    analyze`` share."""
    with collector_paused():
        read = _read_children(root, snapshot, clock, attempt_records)
        runs = [item for item in read.values() if isinstance(item, RunSnapshot)]
        seen = list(observe_runs(runs, scheduler, clock=clock)) if refresh else [cached_observation(r) for r in runs]
        now = clock()
        statuses: dict[str, RunStatus] = {}
        summaries: dict[str, RunSummary] = {}
        reasons: dict[str, str] = {}
        for run, observed in zip(runs, seen, strict=True):
            classified = classify_observed(run, observed, now, rules)
            key = str(run.layout.run_id)
            statuses[key] = classified
            summaries[key] = run_summary(run, classified)
            why = "; ".join(dict.fromkeys(shard.reason for shard in classified.shards if shard.reason))
            if why:
                reasons[key] = why
    return ChildrenView(read, statuses, summaries, reasons, seen)


def _evidence(seen: list[RunObservation], refresh: bool) -> SchedulerEvidence:
    """live when asked now and answered, cached when the runs' last observations stand, none without either."""
    kinds = {one.evidence for one in seen}
    if refresh and "live" in kinds:
        return "live"
    return "cached" if "cached" in kinds or "live" in kinds else "none"


def _read_children(
    root: Path, snapshot: BenchmarkSnapshot, clock: Clock, attempt_records: bool
) -> dict[str, RunSnapshot | RunSummary]:
    out: dict[str, RunSnapshot | RunSummary] = {}
    for child_id, bindings in snapshot.children.items():
        if bindings.binding is None:
            continue
        run_id = bindings.binding.run_id
        try:
            layout: RunLayout | None = RunLayout(root, RunId.parse(run_id))
        except SlurmExtensionError:
            layout = None
        path = root / "runs" / run_id
        problem = None if layout is not None else "the binding's run id is not a run id"
        if layout is not None and not layout.run_dir.is_dir():
            out[child_id] = RunSummary(
                run_id=run_id,
                run_dir=str(layout.run_dir),
                state="incomplete",
                problem="bound, but its run directory was never created (run 'benchmark run' again)",
            )
            continue
        out[child_id] = read_listed(RunDirectory(run_id, path, layout, problem), clock, attempt_records=attempt_records)
    return out


def find_benchmark(root: Path, bench: str | Path) -> BenchmarkLayout:
    """The benchmark ``bench`` names in workspace ``root`` (see the module docstring); NotFoundError (exit 3)."""
    text = str(bench)
    layouts = list_benchmark_dirs(root)
    path = Path(text).expanduser()
    if path.is_file():
        wanted = str(path.absolute())
        found = [(layout, record) for layout, record in _records(layouts) if record.benchmark_file == wanted]
        if found:
            return _newest(found)
        raise _not_found(f"no benchmark was run from {wanted!r} in workspace {str(root)!r}", f"benchmark run {text}")
    if is_benchmark_id(text) and any(layout.benchmark_id == text for layout in layouts):
        return BenchmarkLayout(root, text)
    prefixed = [layout for layout in layouts if layout.benchmark_id.startswith(text)]
    named = [(layout, record) for layout, record in _records(layouts) if record.name == text]
    if named:
        return _newest(named)
    if len(prefixed) == 1:
        return prefixed[0]
    if len(prefixed) > 1:
        shown = ", ".join(layout.benchmark_id for layout in prefixed[:5])
        raise _not_found(f"{text!r} names {len(prefixed)} benchmarks ({shown})", "give the whole benchmark id")
    raise _not_found(f"no benchmark {text!r} in workspace {str(root)!r}", "benchmark ls")


def _records(layouts: tuple[BenchmarkLayout, ...]) -> list[tuple[BenchmarkLayout, BenchmarkRecord]]:
    """Each benchmark's record alone (its bindings are not needed to match a name or a file); unreadable skipped."""
    found = []
    for layout in layouts:
        read = read_record(layout.record, BENCHMARK_SCHEMA)
        if isinstance(read, RecordOk):
            found.append((layout, read.payload))
    return found


def _newest(found: list[tuple[BenchmarkLayout, BenchmarkRecord]]) -> BenchmarkLayout:
    return max(found, key=lambda item: (item[1].created_at, item[0].benchmark_id))[0]


def _not_found(message: str, fix: str) -> NotFoundError:
    hint = fix if fix.startswith("give") else f"see 'data-designer slurm {fix}'"
    return NotFoundError(message, code="benchmark_not_found", operation=_OPERATION, key_path=("BENCH",), hint=hint)


def list_benchmarks(
    *,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> BenchmarkList:
    """The benchmarks of the selected profile cluster's workspace, newest first, from their records only."""
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ)
    _, cluster_name, cluster_profile = ctx.selected
    root = Path(cluster_profile.workspace_root)
    rows: list[BenchmarkSummary] = []
    for layout in list_benchmark_dirs(root):
        try:
            snapshot = read_benchmark(layout)
        except SlurmExtensionError as exc:
            rows.append(
                BenchmarkSummary(
                    benchmark_id=layout.benchmark_id, benchmark_dir=str(layout.directory), problem=exc.info.message
                )
            )
            continue
        record = snapshot.record
        rows.append(
            BenchmarkSummary(
                benchmark_id=record.benchmark_id,
                benchmark_dir=str(layout.directory),
                name=record.name,
                created_at=format_timestamp(record.created_at),
                benchmark_file=record.benchmark_file,
                children=len(record.children),
                bound=sum(1 for child in snapshot.children.values() if child.binding is not None),
            )
        )
    rows.sort(key=lambda row: (row.created_at or "", row.benchmark_id), reverse=True)
    return BenchmarkList(workspace=str(root), cluster=cluster_name, benchmarks=tuple(rows))
