"""``benchmark analyze BENCH``: what is fastest and cheapest, from the children's validated evidence only.

Every child is read and classified exactly as ``benchmark status`` does (one observation of all children, or
their last recorded ones with ``refresh=False``); a child whose run succeeded contributes the records of the
attempts whose valid manifests count for its shard (``store.read_run`` keeps them: sha256-checked manifests
over disjoint ranges), and ``runtime.analysis.analyze`` turns them into measurements, statistics, projections
and recommendations (the formulas are its docstring's). The analysis is written once to
``benchmarks/<id>/analyses/<evidence digest>.json`` (canonical JSON): the same evidence gives the same bytes and
the same file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from data_designer.slurm.contracts import (
    AnalyzeResult,
    BenchmarkAnalysis,
    ClusterFacts,
    RunStatus,
)
from data_designer.slurm.contracts.records import ATTEMPT_SCHEMA, STATUS_SCHEMA, BenchmarkRecord
from data_designer.slurm.runtime import CommandRunner, SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.analysis import AttemptEvidence, Capacity, ChildEvidence, analysis_json, analyze
from data_designer.slurm.runtime.status import Rules
from data_designer.slurm.runtime.store import (
    AttemptSnapshot,
    BenchmarkLayout,
    Clock,
    RecordOk,
    RunLayout,
    RunSnapshot,
    make_directories,
    modes_of_directory,
    publish_bytes_once,
    read_benchmark,
    read_record,
    system_clock,
)
from data_designer.slurm.services._benchmark_status import (
    ChildrenView,
    _evidence,
    find_benchmark,
    observe_children,
)
from data_designer.slurm.services._profile import load_profile_file, select_cluster
from data_designer.slurm.services._status import _collector_paused, is_unavailable

ANALYSES_DIR = "analyses"
_OPERATION = "benchmark.analyze"


def analyze_benchmark(
    bench: str | Path,
    *,
    refresh: bool = True,
    plot: str | Path | None = None,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    rules: Rules | None = None,
) -> AnalyzeResult:
    """Analyze benchmark ``bench`` (an id, prefix, name or benchmark file) from a fresh read of its children.

    ``plot``: also write the PNG there (needs the ``plot`` extra: matplotlib, imported only then). Errors: the
    profile's (exit 2/3), no such benchmark (exit 3), the plot extra missing (exit 2). A scheduler that cannot be
    asked leaves children classified from their records (``unknown_children`` counts those left unknown)."""
    if plot is not None:
        from data_designer.slurm.services._plot import check_plot  # matplotlib only under --plot

        check_plot(Path(plot))  # a wrong suffix or a missing extra fails before any read or scheduler call
    profile_path, loaded = load_profile_file(profile, environ=environ)
    _, cluster_profile = select_cluster(loaded, cluster, file=str(profile_path))
    root = Path(cluster_profile.workspace_root)
    layout = find_benchmark(root, bench)
    snapshot = read_benchmark(layout)
    record = snapshot.record
    scheduler = SlurmScheduler(runner if runner is not None else SubprocessRunner(env=environ), clock=clock)
    with _collector_paused():  # as status does: at 1,000 children the collector's passes were 15-20% of the CPU
        view = observe_children(root, snapshot, scheduler, refresh=refresh, clock=clock, rules=rules)
        evidence = _children_evidence(record, view)
        analysis = analyze(record, evidence, capacity=_capacity(record, view))
        written = persist(layout, analysis)
    plotted = None
    if plot is not None:
        from data_designer.slurm.services._plot import write_plot  # matplotlib only under --plot

        plotted = str(write_plot(analysis, Path(plot)))
    calls = max((one.calls for one in view.seen), default=0)
    errors = sorted({one.detail for one in view.seen if one.evidence != "live" and one.calls and one.detail})
    observed = [one.observation.observed_at for one in view.seen if one.observation is not None]
    return AnalyzeResult(
        analysis=analysis,
        analysis_file=str(written),
        evidence=_evidence(view.seen, refresh),
        observed_at=max(observed) if observed else None,
        scheduler_calls=calls,
        scheduler_error=errors[0] if errors else None,
        unknown_children=sum(1 for status in view.statuses.values() if is_unavailable(status)),
        plot=plotted,
    )


def persist(layout: BenchmarkLayout, analysis: BenchmarkAnalysis) -> Path:
    """``analyses/<evidence digest (16 hex)>.json``, written once: the same evidence finds its file."""
    directory = layout.directory / ANALYSES_DIR
    make_directories(directory, modes_of_directory(layout.directory))
    path = directory / f"{analysis.evidence_digest[:16]}.json"
    publish_bytes_once(path, analysis_json(analysis), operation=_OPERATION)
    return path


def _children_evidence(record: BenchmarkRecord, view: ChildrenView) -> list[ChildEvidence]:
    out: list[ChildEvidence] = []
    for entry in record.children:
        item = view.read.get(entry.child_id)
        if item is None:
            continue  # not bound: analyze lists it as not_bound
        if not isinstance(item, RunSnapshot):
            out.append(ChildEvidence(entry.index, item.run_id, item.state, item.problem))
            continue
        run_id = str(item.layout.run_id)
        status = view.statuses[run_id]
        out.append(_child(entry.index, item, status, view.reasons.get(run_id)))
    return out


def _child(index: int, snapshot: RunSnapshot, status: RunStatus, reason: str | None) -> ChildEvidence:
    run_id = str(snapshot.layout.run_id)
    allocation = snapshot.plan.allocation
    per_node = allocation.gpus_per_node
    gpus = allocation.nodes * per_node if allocation.exclusive and allocation.nodes and per_node else allocation.gpus
    if status.state != "succeeded" or len(snapshot.shards) != 1:
        why = reason if status.state != "succeeded" else "a benchmark child has one shard; this run has several"
        return ChildEvidence(
            index, run_id, status.state if status.state != "succeeded" else "unreadable", why, (), gpus
        )
    shard = snapshot.shards[0]
    by_number = {attempt.number: attempt for attempt in shard.attempts}
    attempts = tuple(
        _attempt(snapshot.layout, shard.plan.shard, number, by_number.get(number))
        for number in sorted(n for n, ranges in shard.kept.items() if ranges)
    )
    return ChildEvidence(index, run_id, status.state, reason, attempts, gpus)


def _attempt(layout: RunLayout, shard: int, number: int, read: AttemptSnapshot | None) -> AttemptEvidence:
    """A contributing attempt's records: the reader keeps its manifest; its attempt and status records are read
    here when the reader had no need of them (an attempt whose manifest covers all it was assigned)."""
    manifest = None if read is None else read.manifest
    record = None if read is None else read.record
    status = None if read is None else read.status
    if record is None:
        found = read_record(layout.attempt_record(shard, number), ATTEMPT_SCHEMA)
        record = found.payload if isinstance(found, RecordOk) else None
    if status is None:
        ended = read_record(layout.status(shard, number), STATUS_SCHEMA)
        status = ended.payload if isinstance(ended, RecordOk) else None
    return AttemptEvidence(number, record, status, manifest)


def _capacity(record: BenchmarkRecord, view: ChildrenView) -> Capacity | None:
    """Nodes and GPUs of the children's GPU partition, from the benchmark's cluster facts."""
    partition = next(
        (item.plan.allocation.partition for item in view.read.values() if isinstance(item, RunSnapshot)), None
    )
    return capacity_of(record.facts, partition)


def capacity_of(facts: ClusterFacts, partition: str | None) -> Capacity | None:
    found = next((p for p in facts.partitions if p.name == partition), None) if partition else None
    if found is None or not found.shapes:
        return None
    nodes = sum(shape.nodes for shape in found.shapes)
    gpus = sum((shape.gpus or 0) * shape.nodes for shape in found.shapes)
    return Capacity(nodes=nodes, gpus=gpus)
