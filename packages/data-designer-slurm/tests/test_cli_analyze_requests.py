"""``benchmark analyze``'s table: the Requests section (with the bucket error) and infeasible cases not ranked."""

from __future__ import annotations

from data_designer.slurm.cli._benchmark_commands import render_analysis
from data_designer.slurm.contracts import AnalysisTargets, AnalyzeResult, BenchmarkAnalysis, RequestSummary, Stat
from data_designer.slurm.contracts.records import Histogram


def summary(sent: int, failed: int, p95: float) -> RequestSummary:
    return RequestSummary(
        sent=sent,
        succeeded=sent - failed,
        failed=failed,
        failed_timeout=0,
        failed_connection=0,
        failed_status=(),
        failed_status_other=failed,
        retried=1,
        error_rate=failed / sent,
        latency_p50_s=0.01,
        latency_p90_s=0.02,
        latency_p95_s=p95,
        latency_p99_s=p95,
        latency_mean_s=0.015,
        output_tokens_per_request=None,
        latency_us=Histogram(count=1, sum=10_000, min=10_000, max=10_000, buckets=((14, 1),)),
        output_tokens=Histogram(),
    )


def test_the_table_shows_requests_and_names_the_infeasible_case() -> None:
    from data_designer.slurm.contracts import CaseAnalysis

    stat = Stat(mean=1.0, std=None, n=1)
    cases = tuple(
        CaseAnalysis(
            case_index=i,
            case=(("replicas", i + 1),),
            children=(i,),
            complete=True,
            records_per_s=stat,
            output_tokens_per_s=stat,
            requests_per_s=stat,
            records_per_s_per_gpu=stat,
            boot_s=stat,
            generation_s=stat,
            wall_s=stat,
            gpu_hours_per_1k=stat,
            requests=summary(10, failed, 0.5),
            feasible=not failed,
            infeasible_reason="error rate 0.2 (2 of 10 requests failed) exceeds max_error_rate 0" if failed else None,
            best=not failed,
        )
        for i, failed in enumerate((2, 0))
    )
    analysis = BenchmarkAnalysis(
        benchmark_id="b-dddddddddddd",
        name="b",
        digest="d" * 64,
        axes=("replicas",),
        targets=AnalysisTargets(),
        evidence_digest="e" * 64,
        complete=True,
        children=(),
        cases=cases,
        pareto=(1,),
        best=1,
    )
    text = render_analysis(
        AnalyzeResult(analysis=analysis, analysis_file="f", evidence="live", scheduler_calls=2, unknown_children=0)
    )
    assert "cases        2: 1 ranked, 1 not ranked" in text
    assert "Requests (every repeat merged; latency percentiles within ±9.05%, the bucket error):" in text
    assert "case 0 (replicas=1): infeasible: error rate 0.2 (2 of 10 requests failed) exceeds max_error_rate 0" in text
    assert "0.2000" in text
