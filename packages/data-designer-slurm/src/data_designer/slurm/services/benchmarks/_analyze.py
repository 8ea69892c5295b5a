"""``benchmark analyze BENCH``: what is fastest and cheapest, from the children's validated evidence only.

Every child is read and classified exactly as ``benchmark status`` does (one observation of all children, or
their last recorded ones with ``refresh=False``); a child whose run succeeded contributes the records of the
attempts whose valid manifests count for its shard (``store.read_run`` keeps them: sha256-checked manifests
over disjoint ranges; with ``attempt_records`` also their ``requests.json`` and ``server-metrics.json``), and
``runtime.analysis.analyze`` turns them into measurements, statistics, projections and recommendations (the formulas are its docstring's). The analysis is written once to
``benchmarks/<id>/analyses/<evidence digest>.json`` (canonical JSON): the same evidence gives the same bytes and
the same file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from data_designer.slurm.contracts import (
    AnalyzeResult,
    ClusterFacts,
    RunStatus,
)
from data_designer.slurm.contracts.records import BenchmarkRecord
from data_designer.slurm.runtime.analysis import AttemptEvidence, Capacity, ChildEvidence, analysis_json, analyze
from data_designer.slurm.runtime.scheduler import CommandRunner
from data_designer.slurm.runtime.status import Rules
from data_designer.slurm.runtime.store import (
    Clock,
    RunSnapshot,
    read_benchmark,
    system_clock,
    write_analysis,
)
from data_designer.slurm.services.benchmarks._status import (
    ChildrenView,
    _evidence,
    find_benchmark,
    observe_children,
)
from data_designer.slurm.services.context import ServiceContext, collector_paused
from data_designer.slurm.services.runs import is_unavailable

_OPERATION = "benchmark.analyze"


def analyze_benchmark(
    bench: str | Path,
    *,
    refresh: bool = True,
    plot: str | Path | None = None,
    force: bool = False,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    rules: Rules | None = None,
) -> AnalyzeResult:
    """Analyze benchmark ``bench`` (an id, prefix, name or benchmark file) from a fresh read of its children.

    ``plot``: also write the PNG there (needs the ``plot`` extra: matplotlib, imported only then), over an existing
    file only with ``force``. Errors: the profile's (exit 2/3), no such benchmark (exit 3), the plot extra missing, a
    symbolic link or a missing directory at ``plot`` (exit 2), an existing ``plot`` without ``force`` (exit 4). A scheduler that cannot be
    asked leaves children classified from their records (``unknown_children`` counts those left unknown)."""
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock, rules=rules)
    if plot is not None:
        from data_designer.slurm.services.benchmarks._plot import check_plot  # matplotlib only under --plot

        check_plot(Path(plot), force=force)  # a wrong suffix, missing extra or refused target fails first
    cluster_profile = ctx.selected.profile
    root = Path(cluster_profile.workspace_root)
    layout = find_benchmark(root, bench)
    snapshot = read_benchmark(layout)
    record = snapshot.record
    scheduler = ctx.scheduler()
    with collector_paused():  # as status does: at 1,000 children the collector's passes were 15-20% of the CPU
        view = observe_children(
            root, snapshot, scheduler, refresh=refresh, clock=clock, rules=rules, attempt_records=True
        )
        evidence = _children_evidence(record, view)
        analysis = analyze(record, evidence, capacity=_capacity(record, view))
        written = write_analysis(layout, analysis.evidence_digest, analysis_json(analysis), operation=_OPERATION)
    plotted = None
    if plot is not None:
        from data_designer.slurm.services.benchmarks._plot import write_plot  # matplotlib only under --plot

        plotted = str(write_plot(analysis, Path(plot), force=force))
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
    kept = {n for n, ranges in shard.kept.items() if ranges}  # read with their records (attempt_records)
    attempts = tuple(
        AttemptEvidence(a.number, a.record, a.status, a.manifest, a.requests, a.server_metrics)
        for a in shard.attempts
        if a.number in kept
    )
    return ChildEvidence(index, run_id, status.state, reason, attempts, gpus)


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
