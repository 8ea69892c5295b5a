"""The analysis as bytes: canonical JSON and a CSV with a fixed, documented header (one row per case).

Both are deterministic for an analysis (and so for its evidence): JSON is the planner's canonical encoding (sorted
keys, no whitespace, UTF-8); CSV has the columns of :data:`CSV_HEADER` in that order, ``\\n`` line ends, numbers as
Python prints them (``repr`` of a float, shortest round-trip), empty cells for unknown values, ``true``/``false``;
text cells (``case``, ``reason``) through ``contracts.csv_text``, so none starts as a spreadsheet formula.
"""

from __future__ import annotations

import csv
import io

from data_designer.slurm.contracts import BenchmarkAnalysis, CaseAnalysis, Stat, csv_text
from data_designer.slurm.planner import canonical_json

STAT_METRICS = (
    "records_per_s",
    "records_per_s_per_gpu",
    "output_tokens_per_s",
    "requests_per_s",
    "boot_s",
    "generation_s",
    "wall_s",
    "gpu_hours_per_1k",
)
"""The per-case statistics, each as three columns: ``<metric>_mean``, ``<metric>_std``, ``<metric>_n``."""

REQUEST_COLUMNS = (
    "requests_sent",
    "requests_succeeded",
    "requests_failed",
    "requests_failed_timeout",
    "requests_failed_connection",
    "requests_failed_status",
    "requests_retried",
    "error_rate",
    "latency_p50_s",
    "latency_p90_s",
    "latency_p95_s",
    "latency_p99_s",
    "latency_mean_s",
    "latency_bucket_error",
    "output_tokens_per_request",
)
"""A case's request columns, in order (``RequestSummary``)."""

SERVER_COLUMNS = ("queue_waiting_mean", "queue_waiting_peak", "kv_cache_usage_peak", "preemptions")
"""What the servers were doing (empty: not available)."""

CSV_HEADER: tuple[str, ...] = (
    "case_index",
    "case",
    "children",
    "complete",
    "reason",
    "gpus",
    *(f"{metric}_{part}" for metric in STAT_METRICS for part in ("mean", "std", "n")),
    "time_to_target_s",
    "projected_jobs",
    "projected_gpu_hours",
    "projected_wall_s",
    "within_budget",
    "pareto",
    "best",
    *REQUEST_COLUMNS,
    "feasible",
    "infeasible_reason",
    *SERVER_COLUMNS,
)
"""The CSV's columns, fixed: ``case`` is ``label=value`` per axis joined by ``;``, ``children`` the child indices
joined by ``;``; projections are empty when the benchmark sets no targets or the case is not ranked. The request
columns (:data:`REQUEST_COLUMNS`, every repeat's requests merged; ``failed_status`` is ``status=count`` joined by
``;``) are empty when the case has no request evidence, and so are the server columns (:data:`SERVER_COLUMNS`)
until server samples are recorded."""


def analysis_json(analysis: BenchmarkAnalysis) -> bytes:
    """The canonical JSON of the analysis (what ``--format json`` prints and ``analyses/`` keeps)."""
    return canonical_json(analysis.model_dump(mode="json"))


def analysis_csv(analysis: BenchmarkAnalysis) -> str:
    """One row per case under :data:`CSV_HEADER`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for case in analysis.cases:
        writer.writerow(_row(case))
    return out.getvalue()


def _row(case: CaseAnalysis) -> list[str]:
    projection = case.projection
    cells: list[object] = [
        case.case_index,
        csv_text(";".join(f"{label}={_cell(value)}" for label, value in case.case)),
        ";".join(str(i) for i in case.children),
        case.complete,
        None if case.reason is None else csv_text(case.reason),
        case.gpus,
    ]
    for metric in STAT_METRICS:
        stat: Stat = getattr(case, metric)
        cells += [stat.mean, stat.std, stat.n]
    cells += [
        case.time_to_target_s,
        None if projection is None else projection.jobs,
        None if projection is None else projection.gpu_hours,
        None if projection is None else projection.wall_s,
        None if projection is None else projection.within_budget,
        case.pareto,
        case.best,
    ]
    requests = case.requests
    if requests is None:
        cells += [None] * len(REQUEST_COLUMNS)
    else:
        statuses = requests.failed_status
        other = [f"other={requests.failed_status_other}"] if requests.failed_status_other else []
        cells += [
            requests.sent,
            requests.succeeded,
            requests.failed,
            requests.failed_timeout,
            requests.failed_connection,
            ";".join([f"{item.status}={item.count}" for item in statuses] + other),
            requests.retried,
            requests.error_rate,
            requests.latency_p50_s,
            requests.latency_p90_s,
            requests.latency_p95_s,
            requests.latency_p99_s,
            requests.latency_mean_s,
            requests.latency_bucket_error,
            requests.output_tokens_per_request,
        ]
    cells += [
        case.feasible,
        None if case.infeasible_reason is None else csv_text(case.infeasible_reason),
        case.queue_waiting_mean,
        case.queue_waiting_peak,
        case.kv_cache_usage_peak,
        case.preemptions,
    ]
    return [_cell(cell) for cell in cells]


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)
