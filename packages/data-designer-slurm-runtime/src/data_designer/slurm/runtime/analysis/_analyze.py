"""The benchmark analysis: pure functions from children's validated evidence to measurements, statistics,
projections and recommendations (no I/O, no clock; the same evidence gives the same analysis).

Per child (only a child whose run ``status`` classifies ``succeeded`` is measured; every other is listed with its
state and why), over the attempts whose valid manifests contributed records (a retried child sums them):

- records_per_s = records / generation_s (the manifests' ``timings.generation_s``, summed);
- output_tokens_per_s, requests_per_s = the aliases' output tokens (successful requests) / generation_s; None, never
  0, when any manifest reports no usage (``usage_source: unavailable`` or a count of None);
- boot_s = servers ready - supervisor start of the first contributing attempt (``attempt.json``);
- wall_s = sum of final status time - supervisor start (``status.json``) over contributing attempts;
- gpus = nodes x GPUs per node for an exclusive allocation, else the GPUs its replicas use;
- gpu_hours = gpus x wall_s / 3600; gpu_hours_per_1k = gpu_hours / records x 1000;
- records_per_s_per_gpu = records_per_s / gpus (None for a CPU-only case);
- requests: every contributing attempt's ``requests.json`` merged over its routed aliases (sent, succeeded, failed
  by class, retried, the latency and output-token histograms; ``runtime.requests``), with error_rate = failed /
  sent and the latency percentiles p50/p90/p95/p99 read off the merged histogram (within the bucket error
  ``LATENCY_RELATIVE_ERROR``, about 9.05%); None, never zeros, when any contributing attempt has none;
- servers: every replica of every alias of the contributing attempts' ``server-metrics.json`` folded
  (``servers_total``): queue_waiting_mean (weighted by scrapes), queue_waiting_peak, kv_cache_usage_peak,
  preemptions; None, never zeros, when any contributing attempt has no record or no replica exposed the metric.

Per case: the mean, sample standard deviation and n of each metric over its repeats; a case is ranked only when
every repeat was measured and it is feasible: its requests (merged over its repeats) fail at a rate of at most
``targets.max_error_rate`` (default 0) and their p95 latency is at most ``targets.max_p95_latency_s`` when set (a
case without request evidence is not judged). An infeasible case keeps its numbers and says which target it
misses. The Pareto set, over ranked cases, maximises records_per_s_per_gpu and minimises
time_to_target_s (the projection's wall time when the targets give one, else 1000 / records_per_s); the best case
has the lowest mean gpu_hours_per_1k (ties: the lower case index). A case's server figures are the mean of its
measured repeats' queue_waiting_mean, the largest of their peaks and the sum of their preemptions; None unless every
measured repeat has the figure.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from data_designer.slurm.contracts import (
    AnalysisTargets,
    BenchmarkAnalysis,
    CaseAnalysis,
    ChildMeasurement,
    Projection,
    RequestSummary,
    Stat,
)
from data_designer.slurm.contracts.records import (
    LATENCY_RELATIVE_ERROR,
    AliasRequests,
    AttemptRecord,
    BenchmarkRecord,
    OutputManifest,
    RequestEvidence,
    ServerSamplesRecord,
    StatusRecord,
)
from data_designer.slurm.planner import canonical_json
from data_designer.slurm.runtime.analysis._server import ServerSummary, servers_total
from data_designer.slurm.runtime.requests import merge_aliases, percentile_us

DIGITS = 6
"""Decimal places every float of an analysis is rounded to (seconds, rates, GPU-hours)."""


@dataclass(frozen=True)
class AttemptEvidence:
    """One contributing attempt of a child: its records (None where a file is missing or invalid)."""

    number: int
    record: AttemptRecord | None
    status: StatusRecord | None
    manifest: OutputManifest | None
    requests: RequestEvidence | None = None
    server_metrics: ServerSamplesRecord | None = None


@dataclass(frozen=True)
class ChildEvidence:
    """What the service read of one child: its run, state, the attempts whose manifests count, and its GPUs."""

    index: int
    run_id: str | None
    state: str
    reason: str | None
    attempts: tuple[AttemptEvidence, ...] = ()
    gpus: int | None = None


@dataclass(frozen=True)
class Capacity:
    """What the GPU partition holds at once: nodes and GPUs (from the benchmark's cluster facts)."""

    nodes: int
    gpus: int


def analyze(
    record: BenchmarkRecord, children: Sequence[ChildEvidence], *, capacity: Capacity | None = None
) -> BenchmarkAnalysis:
    """The analysis of ``record``'s children from ``children`` (one per child, any order)."""
    by_index = {child.index: child for child in children}
    case_of = _case_indices(record)
    measured = tuple(
        _measure(entry.index, entry.child_id, case_of[entry.index], entry.repeat, by_index.get(entry.index))
        for entry in record.children
    )
    exclusive = record.exclusive
    entries = {entry.index: entry for entry in record.children}
    cases: list[CaseAnalysis] = []
    for case_index, indices in _cases(record):
        members = [measured[i] for i in indices]
        entry = entries[indices[0]]
        nodes = entry.nodes
        cases.append(_case(case_index, entry.case, members, record.targets, capacity, exclusive, nodes))
    ranked = [c for c in cases if c.complete and c.feasible]
    front = _pareto(ranked)
    best = _best(ranked)
    cases = [c.model_copy(update={"pareto": c.case_index in front, "best": c.case_index == best}) for c in cases]
    body = BenchmarkAnalysis(
        benchmark_id=record.benchmark_id,
        name=record.name,
        digest=record.digest,
        axes=record.axes,
        targets=record.targets,
        evidence_digest="",
        complete=all(m.measured for m in measured),
        children=measured,
        cases=tuple(cases),
        pareto=tuple(front),
        best=best,
    )
    return body.model_copy(update={"evidence_digest": evidence_digest(body)})


def evidence_digest(analysis: BenchmarkAnalysis) -> str:
    """sha256 of the canonical JSON of the measured children (what the evidence says, child by child)."""
    return hashlib.sha256(canonical_json([m.model_dump(mode="json") for m in analysis.children])).hexdigest()


# -- children -------------------------------------------------------------------------------------------------------


def _measure(index: int, child_id: str, case_index: int, repeat: int, child: ChildEvidence | None) -> ChildMeasurement:
    def unmeasured(run_id: str | None, state: str, reason: str) -> ChildMeasurement:
        return ChildMeasurement(
            index=index,
            child_id=child_id,
            case_index=case_index,
            repeat=repeat,
            run_id=run_id,
            state=state,
            reason=reason,
            measured=False,
        )

    if child is None:
        return unmeasured(None, "not_bound", "not bound to a run: run 'benchmark run'")
    if child.state != "succeeded":
        return unmeasured(child.run_id, child.state, child.reason or f"the child is {child.state}")
    missing = _missing_evidence(child)
    if missing is not None:
        return unmeasured(child.run_id, child.state, missing)
    manifests = [a.manifest for a in child.attempts if a.manifest is not None]
    records = sum(m.records for m in manifests)
    generation = sum(m.timings.generation_s for m in manifests)
    first = child.attempts[0].record
    assert first is not None
    boot = None
    if first.servers_ready_at is not None:
        boot = max((first.servers_ready_at - first.supervisor_started_at).total_seconds(), 0.0)
    wall = sum(
        max((a.status.finished_at - a.status.started_at).total_seconds(), 0.0)
        for a in child.attempts
        if a.status is not None
    )
    tokens = _usage_sum(manifests, "output_tokens")
    requests = _usage_sum(manifests, "successful_requests")
    gpus = child.gpus
    gpu_hours = None if gpus is None else gpus * wall / 3600
    servers = _child_servers(child.attempts)
    return ChildMeasurement(
        index=index,
        child_id=child_id,
        case_index=case_index,
        repeat=repeat,
        run_id=child.run_id,
        state=child.state,
        measured=True,
        attempts=tuple(a.number for a in child.attempts),
        records=records,
        generation_s=_round(generation),
        boot_s=_round(boot),
        wall_s=_round(wall),
        records_per_s=_round(_ratio(records, generation)),
        output_tokens_per_s=_round(_ratio(tokens, generation)),
        requests_per_s=_round(_ratio(requests, generation)),
        gpus=gpus,
        gpu_hours=_round(gpu_hours),
        gpu_hours_per_1k=_round(None if gpu_hours is None or not records else gpu_hours / records * 1000),
        requests=_child_requests(child.attempts),
        queue_waiting_mean=None if servers is None else servers.queue_waiting_mean,
        queue_waiting_peak=None if servers is None else servers.queue_waiting_peak,
        kv_cache_usage_peak=None if servers is None else servers.kv_cache_usage_peak,
        preemptions=None if servers is None or servers.preemptions is None else round(servers.preemptions),
    )


_SERVER_FIELDS = ("queue_waiting_mean", "queue_waiting_peak", "kv_cache_usage_peak", "preemptions")


def _child_servers(attempts: Sequence[AttemptEvidence]) -> ServerSummary | None:
    """Every alias of the contributing attempts' server samples (None when an attempt has no server-metrics.json)."""
    records = [a.server_metrics for a in attempts]
    if not records or any(r is None for r in records):
        return None
    return servers_total(r for r in records if r is not None)


def _case_servers(measured: Sequence[ChildMeasurement]) -> dict[str, float | int | None]:
    """Mean of the repeats' means, max of their peaks, sum of their preemptions; None unless every one has it."""

    def every(field: str) -> list[float] | None:
        values = [getattr(m, field) for m in measured]
        return None if not values or any(v is None for v in values) else values

    means, waiting, kv, preempted = (every(field) for field in _SERVER_FIELDS)
    return {
        "queue_waiting_mean": None if means is None else _round(statistics.fmean(means)),
        "queue_waiting_peak": None if waiting is None else max(waiting),
        "kv_cache_usage_peak": None if kv is None else max(kv),
        "preemptions": None if preempted is None else int(sum(preempted)),
    }


def _child_requests(attempts: Sequence[AttemptEvidence]) -> RequestSummary | None:
    """Every routed alias of every contributing attempt merged; None when an attempt has no request evidence."""
    if any(a.requests is None for a in attempts):
        return None
    return summarize(merge_aliases(alias for a in attempts if a.requests for alias in a.requests.aliases.values()))


def summarize(merged: AliasRequests) -> RequestSummary:
    """Counts, error rate, percentiles (seconds) and the histograms of merged request evidence."""
    latency = merged.latency_us

    def seconds(us: float | None) -> float | None:
        return None if us is None else _round(us / 1e6)

    tokens = merged.output_tokens
    return RequestSummary(
        sent=merged.sent,
        succeeded=merged.succeeded,
        failed=merged.failed,
        failed_timeout=merged.failed_timeout,
        failed_connection=merged.failed_connection,
        failed_status=merged.failed_status,
        failed_status_other=merged.failed_status_other,
        retried=merged.retried,
        error_rate=_round(merged.failed / merged.sent) if merged.sent else None,
        latency_p50_s=seconds(percentile_us(latency, 50)),
        latency_p90_s=seconds(percentile_us(latency, 90)),
        latency_p95_s=seconds(percentile_us(latency, 95)),
        latency_p99_s=seconds(percentile_us(latency, 99)),
        latency_mean_s=seconds(latency.sum / latency.count) if latency.count else None,
        output_tokens_per_request=_round(tokens.sum / tokens.count) if tokens.count else None,
        latency_us=latency,
        output_tokens=tokens,
    )


def _as_alias(summary: RequestSummary) -> AliasRequests:
    return AliasRequests(
        sent=summary.sent,
        succeeded=summary.succeeded,
        failed_timeout=summary.failed_timeout,
        failed_connection=summary.failed_connection,
        failed_status=summary.failed_status,
        failed_status_other=summary.failed_status_other,
        retried=summary.retried,
        latency_us=summary.latency_us,
        output_tokens=summary.output_tokens,
    )


def _missing_evidence(child: ChildEvidence) -> str | None:
    if not child.attempts:
        return "succeeded, but no attempt's manifest contributes records"
    for attempt in child.attempts:
        for what, value in (
            ("attempt.json", attempt.record),
            ("status.json", attempt.status),
            ("manifest", attempt.manifest),
        ):
            if value is None:
                return f"attempt {attempt.number} has no valid {what}"
    return None


def _usage_sum(manifests: Iterable[OutputManifest], field: str) -> int | None:
    total = 0
    for manifest in manifests:
        if manifest.usage_source != "host" or not manifest.models:
            return None
        for usage in manifest.models.values():
            value = getattr(usage, field)
            if value is None:
                return None
            total += value
    return total


def _ratio(numerator: float | None, denominator: float) -> float | None:
    if numerator is None or denominator <= 0:
        return None
    return numerator / denominator


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, DIGITS)


# -- cases ----------------------------------------------------------------------------------------------------------


def _cases(record: BenchmarkRecord) -> list[tuple[int, list[int]]]:
    """Children grouped by case, in order (repeats innermost: a case is a run of equal cases)."""
    groups: list[tuple[int, list[int]]] = []
    last: object = None
    for entry in record.children:
        key = tuple(entry.case)
        if not groups or key != last:
            groups.append((len(groups), []))
            last = key
        groups[-1][1].append(entry.index)
    return groups


def _case_indices(record: BenchmarkRecord) -> dict[int, int]:
    return {index: case for case, indices in _cases(record) for index in indices}


def _stat(values: Iterable[float | None]) -> Stat:
    known = [v for v in values if v is not None]
    if not known:
        return Stat(mean=None, std=None, n=0)
    std = statistics.stdev(known) if len(known) > 1 else None
    return Stat(mean=_round(statistics.fmean(known)), std=_round(std), n=len(known))


def _case(
    case_index: int,
    case: Sequence[tuple[str, object]],
    members: Sequence[ChildMeasurement],
    targets: AnalysisTargets,
    capacity: Capacity | None,
    exclusive: bool,
    nodes: int | None,
) -> CaseAnalysis:
    complete = all(m.measured for m in members)
    reasons = [f"child {m.index} ({m.state}): {m.reason}" for m in members if not m.measured]
    gpus = next((m.gpus for m in members if m.gpus is not None), None)
    per_gpu = [None if m.records_per_s is None or not m.gpus else m.records_per_s / m.gpus for m in members]
    analysis = CaseAnalysis(
        case_index=case_index,
        case=tuple(case),  # type: ignore[arg-type]
        children=tuple(m.index for m in members),
        complete=complete,
        reason="; ".join(reasons) or None,
        gpus=gpus,
        records_per_s=_stat(m.records_per_s for m in members),
        output_tokens_per_s=_stat(m.output_tokens_per_s for m in members),
        requests_per_s=_stat(m.requests_per_s for m in members),
        records_per_s_per_gpu=_stat(per_gpu),
        boot_s=_stat(m.boot_s for m in members),
        generation_s=_stat(m.generation_s for m in members),
        wall_s=_stat(m.wall_s for m in members),
        gpu_hours_per_1k=_stat(m.gpu_hours_per_1k for m in members),
    )
    measured = [m for m in members if m.measured]
    analysis = analysis.model_copy(update=_case_servers(measured))
    if measured and all(m.requests is not None for m in measured):
        requests = summarize(merge_aliases(_as_alias(m.requests) for m in measured if m.requests is not None))
        missed = _infeasible(requests, targets)
        analysis = analysis.model_copy(
            update={"requests": requests, "feasible": missed is None, "infeasible_reason": missed}
        )
    if not complete:
        return analysis
    projection = _project(analysis, targets, capacity, exclusive, nodes)
    rps = analysis.records_per_s.mean
    to_target = projection.wall_s if projection is not None and projection.wall_s is not None else None
    if to_target is None and rps:
        to_target = 1000 / rps
    return analysis.model_copy(update={"projection": projection, "time_to_target_s": _round(to_target)})


def _infeasible(requests: RequestSummary, targets: AnalysisTargets) -> str | None:
    """Which request target the case misses, with its value (None: it meets them, or there is nothing to judge)."""
    missed = []
    if requests.sent and requests.failed / requests.sent > targets.max_error_rate:
        missed.append(
            f"error rate {requests.failed / requests.sent:.4g} ({requests.failed} of {requests.sent} requests failed) "
            f"exceeds max_error_rate {targets.max_error_rate:g}"
        )
    p95, limit = requests.latency_p95_s, targets.max_p95_latency_s
    if limit is not None and p95 is not None and p95 > limit:
        missed.append(
            f"p95 latency {p95:g} s exceeds max_p95_latency_s {limit:g} (bucket error ±{LATENCY_RELATIVE_ERROR:.2%})"
        )
    return "; ".join(missed) or None


def _project(
    case: CaseAnalysis, targets: AnalysisTargets, capacity: Capacity | None, exclusive: bool, nodes: int | None
) -> Projection | None:
    """The targets' projection from the case's means (None when the benchmark sets no target)."""
    total, budget, runtime = targets.total_records, targets.gpu_budget_hours, targets.target_runtime_per_job_s
    if total is None and budget is None and runtime is None:
        return None
    rps, boot, per_1k = case.records_per_s.mean, case.boot_s.mean or 0.0, case.gpu_hours_per_1k.mean
    concurrent = _concurrent(capacity, exclusive, nodes, case.gpus)
    per_job = None if runtime is None or not rps else max(math.floor(rps * max(runtime - boot, 0.0)), 0)
    jobs: int | None = None
    wall: float | None = None
    if total is not None and per_job:
        jobs = math.ceil(total / per_job)
        if concurrent is not None and runtime is not None:
            wall = math.ceil(jobs / concurrent) * runtime
    elif total is not None and runtime is None and rps and concurrent is not None:
        jobs = concurrent  # no runtime target: the total spread over as many jobs as run at once
        wall = boot + total / (rps * concurrent)
    hours = None if total is None or per_1k is None else per_1k * total / 1000
    return Projection(
        total_records=total,
        runtime_per_job_s=None if runtime is None else float(runtime),
        records_per_job=per_job,
        jobs=jobs,
        gpu_hours=_round(hours),
        concurrent_jobs=concurrent,
        wall_s=_round(wall),
        within_budget=None if budget is None or hours is None else hours <= budget,
        records_in_budget=None if budget is None or not per_1k else math.floor(budget / per_1k * 1000),
    )


def _concurrent(capacity: Capacity | None, exclusive: bool, nodes: int | None, gpus: int | None) -> int | None:
    if capacity is None:
        return None
    if exclusive and nodes:
        return max(capacity.nodes // nodes, 1)
    if gpus:
        return max(capacity.gpus // gpus, 1)
    return None


def _pareto(ranked: Sequence[CaseAnalysis]) -> list[int]:
    """Ranked cases no other ranked case beats on both throughput per GPU (higher) and time to target (lower)."""
    points: list[tuple[int, float, float]] = [
        (c.case_index, c.records_per_s_per_gpu.mean, c.time_to_target_s)
        for c in ranked
        if c.records_per_s_per_gpu.mean is not None and c.time_to_target_s is not None
    ]
    front: list[tuple[int, float, float]] = []
    for index, throughput, time in points:
        dominated = any(
            (t2 >= throughput and s2 <= time) and (t2 > throughput or s2 < time)
            for other, t2, s2 in points
            if other != index
        )
        if not dominated:
            front.append((index, throughput, time))
    front.sort(key=lambda item: (-item[1], item[0]))
    return [index for index, _, _ in front]


def _best(ranked: Sequence[CaseAnalysis]) -> int | None:
    scored = [(c.gpu_hours_per_1k.mean, c.case_index) for c in ranked if c.gpu_hours_per_1k.mean is not None]
    return min(scored)[1] if scored else None
