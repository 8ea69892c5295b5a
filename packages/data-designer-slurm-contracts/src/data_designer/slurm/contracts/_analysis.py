"""``benchmark analyze``: per-child measurements, per-case statistics, projections and recommendations.

Everything here is computed from validated evidence only (result manifests, attempt and status records of child
runs classified ``succeeded``); a case with any child not succeeded is listed with why and never ranked. The
analysis proper holds no observation time, so the same evidence gives byte-identical JSON and CSV. The formulas
are those of ``runtime.analysis`` (documented in ``docs/architecture/analysis.md`` and the Benchmarks page).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._benchmark import AnalysisTargets
from data_designer.slurm.contracts._benchmark_plan import CaseValue
from data_designer.slurm.contracts._run_status import SchedulerEvidence
from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records import LATENCY_RELATIVE_ERROR, Histogram, StatusCount

ANALYSIS_SCHEMA_VERSION = 1

AnalysisFormat = Literal["table", "json", "csv"]


class Stat(BaseModel):
    """A metric over a case's repeats: mean, sample standard deviation (None below two values) and n."""

    model_config = FROZEN

    mean: float | None = Field(description="None when no repeat has the metric (e.g. no usage counts).")
    std: float | None = Field(description="Sample standard deviation (n - 1); None when n < 2.")
    n: NonNegativeInt = Field(description="Repeats that have the metric.")


class RequestSummary(BaseModel):
    """The requests of a child (its contributing attempts) or a case (its repeats), every routed alias merged, from
    ``requests.json`` (``contracts.records.RequestEvidence``). Percentiles are read off the merged latency
    histogram at the geometric midpoint of their bucket, clamped to the observed min and max: within
    ``latency_bucket_error`` of the true value (relatively) between 1 ms and about 70 minutes."""

    model_config = FROZEN

    sent: NonNegativeInt
    succeeded: NonNegativeInt
    failed: NonNegativeInt = Field(description="failed_timeout + failed_connection + every failed status.")
    failed_timeout: NonNegativeInt
    failed_connection: NonNegativeInt
    failed_status: tuple[StatusCount, ...] = Field(strict=False, description="Non-2xx answers per status.")
    failed_status_other: NonNegativeInt
    retried: NonNegativeInt = Field(description="Failovers: exchanges re-sent to another replica.")
    error_rate: NonNegativeFloat | None = Field(description="failed / sent; None when nothing was sent.")
    latency_p50_s: NonNegativeFloat | None = Field(description="None without a successful request.")
    latency_p90_s: NonNegativeFloat | None
    latency_p95_s: NonNegativeFloat | None
    latency_p99_s: NonNegativeFloat | None
    latency_mean_s: NonNegativeFloat | None = Field(description="Exact: the histogram's sum / count.")
    latency_bucket_error: float = Field(
        default=round(LATENCY_RELATIVE_ERROR, 6), description="The percentiles' relative error bound (2^(1/8) - 1)."
    )
    output_tokens_per_request: NonNegativeFloat | None = Field(
        description="Mean usage.completion_tokens over the answers that report it; None when none does."
    )
    latency_us: Histogram = Field(description="The merged latency histogram (microseconds, fixed buckets).")
    output_tokens: Histogram = Field(description="Output tokens per request: count, sum, min, max.")


class ChildMeasurement(BaseModel):
    """One child: its state, and when it succeeded what its evidence measures (summed over contributing attempts)."""

    model_config = FROZEN

    index: NonNegativeInt
    child_id: str
    case_index: NonNegativeInt
    repeat: NonNegativeInt
    run_id: str | None
    state: str = Field(description="Its run's state as 'status' classifies it, or not_bound.")
    reason: str | None = Field(default=None, description="Why it is not measured (not succeeded, evidence missing).")
    measured: bool = Field(description="It succeeded and every metric below comes from its validated records.")
    attempts: tuple[PositiveInt, ...] = Field(
        default=(), strict=False, description="The attempts whose manifests contributed records (ascending)."
    )
    records: NonNegativeInt | None = None
    generation_s: NonNegativeFloat | None = Field(default=None, description="Sum of the attempts' generation_s.")
    boot_s: NonNegativeFloat | None = Field(
        default=None, description="Allocation start (supervisor start) to servers ready, of the first attempt."
    )
    wall_s: NonNegativeFloat | None = Field(
        default=None, description="Sum over the attempts of supervisor start to its final status."
    )
    records_per_s: NonNegativeFloat | None = Field(default=None, description="records / generation_s.")
    output_tokens_per_s: NonNegativeFloat | None = Field(
        default=None, description="Output tokens of every alias / generation_s; None when a server reports no usage."
    )
    requests_per_s: NonNegativeFloat | None = Field(
        default=None, description="Successful requests of every alias / generation_s; None without usage."
    )
    gpus: NonNegativeInt | None = Field(default=None, description="GPUs held: nodes x GPUs per node when exclusive.")
    gpu_hours: NonNegativeFloat | None = Field(default=None, description="gpus x wall_s / 3600.")
    gpu_hours_per_1k: NonNegativeFloat | None = Field(default=None, description="gpu_hours / records x 1000.")
    requests: RequestSummary | None = Field(
        default=None, description="Its requests; None when an attempt has no requests.json (not available)."
    )
    queue_waiting_mean: NonNegativeFloat | None = Field(
        default=None,
        description="Mean requests waiting over every scrape of every replica (server-metrics.json); None: not "
        "available (an attempt without the record, or no replica exposed the metric).",
    )
    queue_waiting_peak: NonNegativeFloat | None = Field(default=None, description="Peak requests waiting.")
    kv_cache_usage_peak: NonNegativeFloat | None = Field(default=None, description="Peak KV-cache usage (0..1).")
    preemptions: NonNegativeInt | None = Field(default=None, description="Preempted requests (counter increase).")


class Projection(BaseModel):
    """What the case's mean measurements project for the benchmark's targets (projections, never measurements)."""

    model_config = FROZEN

    total_records: PositiveInt | None = None
    runtime_per_job_s: NonNegativeFloat | None = Field(default=None, description="The target runtime of one job.")
    records_per_job: NonNegativeInt | None = Field(
        default=None, description="records_per_s x (runtime per job - boot_s), rounded down."
    )
    jobs: NonNegativeInt | None = Field(default=None, description="ceil(total_records / records_per_job).")
    gpu_hours: NonNegativeFloat | None = Field(default=None, description="gpu_hours_per_1k x total_records / 1000.")
    concurrent_jobs: PositiveInt | None = Field(
        default=None,
        description="Jobs the GPU partition holds at once: exclusive, its nodes // the case's nodes; else its GPUs // "
        "the case's GPUs (at least 1).",
    )
    wall_s: NonNegativeFloat | None = Field(
        default=None,
        description="ceil(jobs / concurrent_jobs) x runtime per job; without a runtime target, boot_s + "
        "total_records / (records_per_s x concurrent_jobs).",
    )
    within_budget: bool | None = Field(default=None, description="gpu_hours <= the GPU budget, when one is set.")
    records_in_budget: NonNegativeInt | None = Field(
        default=None, description="Records the GPU budget buys: budget / gpu_hours_per_1k x 1000."
    )


class CaseAnalysis(BaseModel):
    """One case (a value per axis) over its repeats."""

    model_config = FROZEN

    case_index: NonNegativeInt
    case: tuple[CaseValue, ...] = Field(strict=False)
    children: tuple[NonNegativeInt, ...] = Field(strict=False, description="Child indices, repeat order.")
    complete: bool = Field(description="Every repeat succeeded and was measured: the case is ranked.")
    reason: str | None = Field(default=None, description="Why it is not ranked.")
    gpus: NonNegativeInt | None = None
    records_per_s: Stat
    output_tokens_per_s: Stat
    requests_per_s: Stat
    records_per_s_per_gpu: Stat
    boot_s: Stat
    generation_s: Stat
    wall_s: Stat
    gpu_hours_per_1k: Stat
    time_to_target_s: float | None = Field(
        default=None,
        description="The projection's wall time, else seconds per 1,000 records of one allocation (1000 / "
        "records_per_s): the second Pareto objective.",
    )
    projection: Projection | None = None
    requests: RequestSummary | None = Field(
        default=None, description="Every repeat's requests merged; None unless every measured repeat has them."
    )
    feasible: bool = Field(
        default=True,
        description="False: its error rate or p95 latency exceeds the targets; it is then never best nor on the "
        "Pareto set. Without request evidence a case is not judged (True).",
    )
    infeasible_reason: str | None = Field(default=None, description="Which target it misses, with its value.")
    queue_waiting_mean: NonNegativeFloat | None = Field(
        default=None,
        description="The mean of its repeats' queue_waiting_mean (server samples); None: not available (a measured "
        "repeat without it).",
    )
    queue_waiting_peak: NonNegativeFloat | None = Field(
        default=None, description="The largest of its repeats' peaks; None: not available."
    )
    kv_cache_usage_peak: NonNegativeFloat | None = Field(
        default=None, description="The largest of its repeats' peak KV-cache usage (0..1); None: not available."
    )
    preemptions: NonNegativeInt | None = Field(
        default=None, description="Its repeats' preemptions summed; None: not available."
    )
    pareto: bool = Field(default=False, description="On the Pareto front of throughput per GPU and time to target.")
    best: bool = Field(default=False, description="The lowest mean GPU-hours per 1,000 records among ranked cases.")


class BenchmarkAnalysis(BaseModel):
    """The analysis proper: deterministic for its evidence (no observation time, canonical encoding)."""

    model_config = FROZEN

    schema_version: Literal[1] = 1
    benchmark_id: str
    name: str
    digest: str
    axes: tuple[str, ...] = Field(strict=False)
    targets: AnalysisTargets
    evidence_digest: str = Field(description="sha256 of the evidence the analysis used (children's records).")
    complete: bool = Field(description="Every child succeeded and was measured.")
    children: tuple[ChildMeasurement, ...] = Field(strict=False)
    cases: tuple[CaseAnalysis, ...] = Field(strict=False)
    pareto: tuple[NonNegativeInt, ...] = Field(
        strict=False, description="Case indices on the Pareto front, by descending throughput per GPU."
    )
    best: NonNegativeInt | None = Field(default=None, description="The case with the lowest GPU-hours per 1,000.")


class AnalyzeResult(BaseModel):
    """The result of ``data-designer slurm benchmark analyze BENCH``: the analysis and how it was obtained."""

    model_config = FROZEN

    analysis: BenchmarkAnalysis
    analysis_file: str = Field(description="Where the analysis is persisted (benchmarks/<id>/analyses/...).")
    evidence: SchedulerEvidence
    observed_at: str | None = Field(default=None, description="When the scheduler evidence was taken.")
    scheduler_calls: NonNegativeInt
    scheduler_error: str | None = None
    unknown_children: NonNegativeInt = Field(
        description="Children left unknown because the scheduler could not be asked (status's exit 5 rule)."
    )
    plot: str | None = Field(default=None, description="The PNG written with --plot.")
