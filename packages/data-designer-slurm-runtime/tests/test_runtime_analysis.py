"""``runtime.analysis``: synthetic children with known numbers give the exact metrics, statistics, projections,
Pareto set and best case; incomplete cases are listed with why and never ranked; the encodings are deterministic.

The evidence is built from the contracts' models directly (attempt.json, status.json and the manifest of each
contributing attempt), with round numbers so every expected value is written out literally.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_designer.slurm.contracts import AnalysisTargets, BenchmarkAnalysis, ClusterFacts, Stat
from data_designer.slurm.contracts.records import (
    AliasRequests,
    AttemptRecord,
    BenchmarkChildEntry,
    BenchmarkRecord,
    IndexRange,
    ModelUsage,
    OutputManifest,
    ReplicaServerSamples,
    Requester,
    RequestEvidence,
    ServerAggregates,
    ServerSamplesRecord,
    StatusRecord,
    Timings,
)
from data_designer.slurm.runtime.analysis import (
    CSV_HEADER,
    STAT_METRICS,
    AttemptEvidence,
    Capacity,
    ChildEvidence,
    analysis_csv,
    analysis_json,
    analyze,
)
from data_designer.slurm.runtime.requests import RequestRecorder

T0 = datetime(2030, 1, 1, tzinfo=UTC)
DIGEST = "d" * 64


# -- builders -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One attempt's numbers: records and generation seconds (manifest), boot and wall seconds (attempt and
    status records), output tokens and successful requests (None: the server reported no usage)."""

    records: int
    generation_s: float
    wall_s: float
    boot_s: float | None = 10.0
    tokens: int | None = None
    requests: int | None = None


def attempt(number: int, run: Run, *, start: datetime = T0) -> AttemptEvidence:
    ready = None if run.boot_s is None else start + timedelta(seconds=run.boot_s)
    record = AttemptRecord(
        run_id="child-run",
        plan_digest=DIGEST,
        shard=0,
        attempt=number,
        chunk=0,
        array_task=0,
        job_id="100",
        restart_count=0,
        hostname="node1",
        nodes=("node1",),
        node_addresses=("10.0.0.1",),
        supervisor_pid=4242,
        supervisor_started_at=start,
        heartbeat_interval_s=5.0,
        servers_ready_at=ready,
        assigned=(IndexRange(0, run.records),),
    )
    status = StatusRecord(
        status="succeeded",
        exit_code=0,
        message="done",
        records=run.records,
        started_at=start,
        finished_at=start + timedelta(seconds=run.wall_s),
    )
    usage = run.tokens is not None and run.requests is not None
    models = {
        "writer": ModelUsage(
            kind="deployed",
            model="test-model",
            base_urls=("http://node1:8000/v1",),
            used_base_url="http://node1:8000/v1",
            successful_requests=run.requests,
            failed_requests=0 if usage else None,
            input_tokens=run.tokens if usage else None,
            output_tokens=run.tokens,
        )
    }
    manifest = OutputManifest(
        run_id="child-run",
        plan_digest=DIGEST,
        config_digest=DIGEST,
        shard=0,
        attempt=number,
        seed=1,
        assigned=(IndexRange(0, run.records),),
        ranges=(IndexRange(0, run.records),),
        complete=True,
        records=run.records,
        columns=(),
        arrow_schema="",
        parts=(),
        usage_source="host" if usage else "unavailable",
        models=models if usage else {},
        timings=Timings(
            worker_started_at=start,
            worker_finished_at=start + timedelta(seconds=run.wall_s),
            host_import_s=1.0,
            setup_s=1.0,
            generation_s=run.generation_s,
            write_s=0.1,
            records_per_s=run.records / run.generation_s,
        ),
        host_version="1.0.0",
        runtime_version="1.0.0",
        python="3.11",
    )
    return AttemptEvidence(number, record, status, manifest)


def child(index: int, gpus: int, *runs: Run) -> ChildEvidence:
    """A succeeded child whose attempts 1, 2, ... contributed ``runs``."""
    attempts = tuple(attempt(n, run, start=T0 + timedelta(hours=n)) for n, run in enumerate(runs, start=1))
    return ChildEvidence(index, f"run-{index}", "succeeded", None, attempts, gpus)


def benchmark(
    cases: list[tuple[tuple[str, object], ...]],
    *,
    repeats: int,
    nodes: int = 1,
    gpus: int = 1,
    exclusive: bool = False,
    targets: AnalysisTargets | None = None,
) -> BenchmarkRecord:
    entries = [
        BenchmarkChildEntry(
            index=case_index * repeats + repeat,
            child_id=f"{case_index * repeats + repeat:012x}",
            case=case,  # type: ignore[arg-type]
            repeat=repeat,
            records=200,
            plan_digest=DIGEST,
            nodes=nodes,
            gpus=gpus,
        )
        for case_index, case in enumerate(cases)
        for repeat in range(repeats)
    ]
    return BenchmarkRecord(
        benchmark_id="sweep-dddddddddddd",
        name="sweep",
        digest=DIGEST,
        created_at=T0,
        created_by=Requester(user="me", host="login", pid=1, time=T0),
        benchmark_file="/work/bench.yaml",
        profile_file="/work/profile.yaml",
        cluster="local",
        facts=ClusterFacts(),
        exclusive=exclusive,
        max_concurrent_children=2,
        cases=len(cases),
        repeats=repeats,
        axes=("replicas", "concurrency"),
        targets=targets or AnalysisTargets(),
        children=tuple(entries),
        inputs=(),
    )


CASES: list[tuple[tuple[str, object], ...]] = [
    (("replicas", 1), ("concurrency", 4)),
    (("replicas", 2), ("concurrency", 4)),
    (("replicas", 1), ("concurrency", 8)),
    (("replicas", 2), ("concurrency", 8)),
]


def sweep_children() -> list[ChildEvidence]:
    """Four cases x two repeats: 0 and 1 are both on the front, 2 is dominated by 0 (and reports no usage), 3 has a
    failed repeat."""
    return [
        child(0, 1, Run(200, 100.0, 360.0, boot_s=30.0, tokens=5000, requests=400)),
        child(1, 1, Run(200, 80.0, 288.0, boot_s=20.0, tokens=4000, requests=400)),
        child(2, 2, Run(200, 50.0, 180.0, boot_s=25.0, tokens=5000, requests=200)),
        child(3, 2, Run(200, 50.0, 180.0, boot_s=25.0, tokens=5000, requests=200)),
        child(4, 1, Run(200, 100.0, 720.0)),
        child(5, 1, Run(200, 100.0, 720.0)),
        child(6, 2, Run(200, 25.0, 90.0, tokens=100, requests=10)),
        ChildEvidence(7, "run-7", "failed", "shard 0: server_died (exit 11)", (), 2),
    ]


def sweep(targets: AnalysisTargets | None = None, capacity: Capacity | None = None) -> BenchmarkAnalysis:
    return analyze(benchmark(CASES, repeats=2, targets=targets), sweep_children(), capacity=capacity)


# -- measurements ---------------------------------------------------------------------------------------------------


def test_each_child_measures_exactly_what_its_records_say() -> None:
    analysis = sweep()
    first = analysis.children[0]
    assert first.measured
    assert (first.state, first.run_id, first.case_index, first.repeat, first.attempts) == (
        "succeeded",
        "run-0",
        0,
        0,
        (1,),
    )
    assert first.records == 200
    assert first.generation_s == 100.0
    assert first.records_per_s == 2.0
    assert first.output_tokens_per_s == 50.0
    assert first.requests_per_s == 4.0
    assert first.boot_s == 30.0
    assert first.wall_s == 360.0
    assert first.gpus == 1
    assert first.gpu_hours == 0.1  # 1 GPU x 360 s
    assert first.gpu_hours_per_1k == 0.5  # 0.1 GPU-h / 200 records x 1000

    two_gpus = analysis.children[2]
    assert (two_gpus.records_per_s, two_gpus.gpus, two_gpus.gpu_hours, two_gpus.gpu_hours_per_1k) == (
        4.0,
        2,
        0.1,  # 2 GPUs x 180 s
        0.5,
    )
    assert (two_gpus.output_tokens_per_s, two_gpus.requests_per_s) == (100.0, 4.0)
    assert [c.case_index for c in analysis.children] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_missing_usage_is_none_never_zero() -> None:
    no_usage = sweep().children[4]
    assert no_usage.measured
    assert no_usage.records_per_s == 2.0
    assert no_usage.output_tokens_per_s is None
    assert no_usage.requests_per_s is None
    case = sweep().cases[2]
    assert case.output_tokens_per_s == Stat(mean=None, std=None, n=0)
    assert case.requests_per_s == Stat(mean=None, std=None, n=0)
    assert case.records_per_s == Stat(mean=2.0, std=0.0, n=2)


def test_one_manifest_without_usage_makes_the_whole_child_none() -> None:
    record = benchmark(CASES[:1], repeats=1)
    retried = child(0, 1, Run(100, 50.0, 100.0, tokens=10, requests=1), Run(100, 50.0, 100.0))
    measured = analyze(record, [retried]).children[0]
    assert measured.records_per_s == 2.0
    assert (measured.output_tokens_per_s, measured.requests_per_s) == (None, None)


def test_a_retried_child_sums_its_contributing_attempts() -> None:
    record = benchmark(CASES[:1], repeats=1)
    retried = child(
        0,
        2,
        Run(120, 60.0, 180.0, boot_s=40.0, tokens=1200, requests=120),
        Run(80, 40.0, 90.0, boot_s=5.0, tokens=800, requests=80),
    )
    measured = analyze(record, [retried]).children[0]
    assert measured.attempts == (1, 2)
    assert measured.records == 200
    assert measured.generation_s == 100.0
    assert measured.records_per_s == 2.0
    assert measured.output_tokens_per_s == 20.0
    assert measured.requests_per_s == 2.0
    assert measured.boot_s == 40.0  # the first contributing attempt's
    assert measured.wall_s == 270.0  # 180 + 90
    assert measured.gpu_hours == 0.15  # 2 GPUs x 270 s
    assert measured.gpu_hours_per_1k == 0.75


def test_a_child_without_servers_ready_has_no_boot_time() -> None:
    record = benchmark(CASES[:1], repeats=1)
    measured = analyze(record, [child(0, 1, Run(100, 50.0, 100.0, boot_s=None))]).children[0]
    assert measured.measured
    assert measured.boot_s is None


def test_case_statistics_are_mean_sample_std_and_n_over_repeats() -> None:
    case = sweep().cases[0]
    assert case.complete
    assert case.children == (0, 1)
    assert case.gpus == 1
    assert case.case == (("replicas", 1), ("concurrency", 4))
    assert case.records_per_s == Stat(mean=2.25, std=0.353553, n=2)  # 2.0, 2.5
    assert case.records_per_s_per_gpu == Stat(mean=2.25, std=0.353553, n=2)
    assert case.output_tokens_per_s == Stat(mean=50.0, std=0.0, n=2)
    assert case.requests_per_s == Stat(mean=4.5, std=0.707107, n=2)  # 4.0, 5.0
    assert case.boot_s == Stat(mean=25.0, std=7.071068, n=2)  # 30, 20
    assert case.generation_s == Stat(mean=90.0, std=14.142136, n=2)
    assert case.wall_s == Stat(mean=324.0, std=50.911688, n=2)
    assert case.gpu_hours_per_1k == Stat(mean=0.45, std=0.070711, n=2)  # 0.5, 0.4
    assert sweep().cases[1].records_per_s_per_gpu == Stat(mean=2.0, std=0.0, n=2)  # 4.0 records/s on 2 GPUs


def test_a_single_repeat_has_no_std() -> None:
    analysis = analyze(benchmark(CASES[:1], repeats=1), [child(0, 1, Run(100, 50.0, 100.0))])
    assert analysis.cases[0].records_per_s == Stat(mean=2.0, std=None, n=1)


# -- incomplete cases -----------------------------------------------------------------------------------------------


def test_incomplete_cases_are_listed_with_why_and_never_ranked() -> None:
    analysis = sweep()
    assert analysis.complete is False
    failed = analysis.children[7]
    assert (failed.measured, failed.state, failed.reason) == (False, "failed", "shard 0: server_died (exit 11)")
    assert failed.records_per_s is None
    case = analysis.cases[3]
    assert case.complete is False
    assert case.reason == "child 7 (failed): shard 0: server_died (exit 11)"
    assert case.records_per_s == Stat(mean=8.0, std=None, n=1)  # what its measured repeat gives, for the listing
    assert (case.pareto, case.best, case.projection, case.time_to_target_s) == (False, False, None, None)
    assert 3 not in analysis.pareto
    assert analysis.best != 3


def test_not_bound_and_unreadable_children_say_why() -> None:
    record = benchmark(CASES[:3], repeats=1)
    partial = attempt(1, Run(100, 50.0, 100.0))
    no_status = ChildEvidence(
        1, "run-1", "succeeded", None, (AttemptEvidence(1, partial.record, None, partial.manifest),), 1
    )
    nothing = ChildEvidence(2, "run-2", "succeeded", None, (), 1)
    analysis = analyze(record, [no_status, nothing])  # child 0 is not bound: the service gives no evidence
    reasons = [(c.state, c.measured, c.reason) for c in analysis.children]
    assert reasons == [
        ("not_bound", False, "not bound to a run: run 'benchmark run'"),
        ("succeeded", False, "attempt 1 has no valid status.json"),
        ("succeeded", False, "succeeded, but no attempt's manifest contributes records"),
    ]
    assert analysis.children[0].run_id is None
    assert [c.complete for c in analysis.cases] == [False, False, False]
    assert (analysis.pareto, analysis.best, analysis.complete) == ((), None, False)
    assert analysis.cases[0].records_per_s == Stat(mean=None, std=None, n=0)


@pytest.mark.parametrize("state", ["running", "pending", "partial", "stale", "unknown", "scheduler_inconsistent"])
def test_a_child_not_succeeded_is_not_measured_even_with_records(state: str) -> None:
    record = benchmark(CASES[:1], repeats=1)
    evidence = ChildEvidence(0, "run-0", state, None, (attempt(1, Run(100, 50.0, 100.0)),), 1)
    measured = analyze(record, [evidence]).children[0]
    assert (measured.measured, measured.state, measured.reason, measured.records) == (
        False,
        state,
        f"the child is {state}",
        None,
    )


# -- recommendations ------------------------------------------------------------------------------------------------


def test_pareto_set_and_best_without_targets() -> None:
    analysis = sweep()
    zero, one, two = analysis.cases[:3]
    # time to target without targets: seconds per 1,000 records of one allocation
    assert zero.time_to_target_s == 444.444444  # 1000 / 2.25
    assert one.time_to_target_s == 250.0  # 1000 / 4.0
    assert two.time_to_target_s == 500.0
    # 0 is faster per GPU (2.25 vs 2.0), 1 reaches the target sooner: both on the front; 2 (2.0, 500 s) is
    # dominated by 0 (2.25, 444 s); the front is ordered by descending throughput per GPU
    assert analysis.pareto == (0, 1)
    assert [c.pareto for c in analysis.cases] == [True, True, False, False]
    # GPU-hours per 1,000: 0.45, 0.5, 1.0 (3 is not ranked)
    assert analysis.best == 0
    assert [c.best for c in analysis.cases] == [True, False, False, False]
    assert (zero.projection, one.projection) == (None, None)


def test_a_tie_is_on_the_front_twice_and_the_best_is_the_lower_index() -> None:
    record = benchmark(CASES[:3], repeats=1)
    children = [
        child(0, 1, Run(100, 100.0, 360.0)),  # 1.0 r/s/GPU, 1000 s, 1.0 GPU-h/1k
        child(1, 1, Run(100, 50.0, 180.0)),  # 2.0 r/s/GPU, 500 s, 0.5 GPU-h/1k
        child(2, 1, Run(100, 50.0, 180.0)),  # the same as 1
    ]
    analysis = analyze(record, children)
    assert analysis.pareto == (1, 2)  # equal points do not dominate each other
    assert analysis.best == 1
    assert [c.gpu_hours_per_1k.mean for c in analysis.cases] == [1.0, 0.5, 0.5]


def test_a_cpu_only_case_has_no_throughput_per_gpu_and_is_not_on_the_front() -> None:
    record = benchmark(CASES[:2], repeats=1)
    children = [child(0, 0, Run(100, 10.0, 100.0)), child(1, 1, Run(100, 50.0, 360.0))]
    analysis = analyze(record, children)
    cpu = analysis.cases[0]
    assert cpu.complete
    assert cpu.gpus == 0
    assert cpu.records_per_s == Stat(mean=10.0, std=None, n=1)
    assert cpu.records_per_s_per_gpu == Stat(mean=None, std=None, n=0)
    assert analysis.children[0].gpu_hours == 0.0  # it holds no GPU: it costs no GPU-hours
    assert cpu.gpu_hours_per_1k == Stat(mean=0.0, std=None, n=1)
    assert analysis.pareto == (1,)
    assert analysis.best == 0  # the lowest GPU-hours per 1,000 records, as documented


# -- projections ----------------------------------------------------------------------------------------------------


TARGETS = AnalysisTargets(total_records=10_000, gpu_budget_hours=5, target_runtime_per_job_s=600)


def test_projection_with_a_runtime_target_and_a_budget() -> None:
    analysis = sweep(TARGETS, Capacity(nodes=4, gpus=8))
    one = analysis.cases[1]  # 4.0 records/s, boot 25 s, 2 GPUs, 0.5 GPU-h per 1,000
    assert one.projection is not None
    assert one.projection.model_dump() == {
        "total_records": 10_000,
        "runtime_per_job_s": 600.0,
        "records_per_job": 2300,  # floor(4.0 x (600 - 25))
        "jobs": 5,  # ceil(10,000 / 2,300)
        "gpu_hours": 5.0,  # 0.5 x 10,000 / 1000
        "concurrent_jobs": 4,  # 8 GPUs // 2
        "wall_s": 1200.0,  # ceil(5 / 4) x 600
        "within_budget": True,  # 5.0 <= 5
        "records_in_budget": 10_000,  # 5 / 0.5 x 1000
    }
    zero = analysis.cases[0]  # 2.25 records/s, boot 25 s, 1 GPU, 0.45 GPU-h per 1,000
    assert zero.projection is not None
    assert (zero.projection.records_per_job, zero.projection.jobs, zero.projection.concurrent_jobs) == (1293, 8, 8)
    assert zero.projection.wall_s == 600.0
    assert zero.projection.gpu_hours == 4.5
    assert zero.projection.records_in_budget == 11_111
    two = analysis.cases[2]  # 1.0 GPU-h per 1,000: 10 GPU-hours, over the budget
    assert two.projection is not None
    assert (two.projection.gpu_hours, two.projection.within_budget) == (10.0, False)
    # the projection's wall time is the time to target: 0 takes one round of 8 jobs at once (600 s); 1 needs 5
    # jobs, 4 at once; 2 (2.0 records/s, boot 10 s) needs 9 jobs of floor(2.0 x 590) = 1,180 records, 8 at once
    assert (two.projection.records_per_job, two.projection.jobs) == (1180, 9)
    assert [c.time_to_target_s for c in analysis.cases] == [600.0, 1200.0, 1200.0, None]
    assert analysis.pareto == (0,)  # 0 is faster per GPU and as fast to the target as every other
    assert analysis.best == 0
    assert analysis.cases[3].projection is None  # not ranked: nothing projected


def test_projection_without_a_runtime_target_spreads_the_total_over_the_jobs_that_run_at_once() -> None:
    analysis = sweep(AnalysisTargets(total_records=10_000), Capacity(nodes=4, gpus=8))
    one = analysis.cases[1]
    assert one.projection is not None
    assert (one.projection.jobs, one.projection.concurrent_jobs, one.projection.records_per_job) == (4, 4, None)
    assert one.projection.wall_s == 650.0  # boot 25 + 10,000 / (4.0 x 4)
    assert one.projection.runtime_per_job_s is None
    assert (one.projection.within_budget, one.projection.records_in_budget) == (None, None)


def test_projection_without_capacity_has_no_wall_time() -> None:
    analysis = sweep(TARGETS)
    one = analysis.cases[1]
    assert one.projection is not None
    assert (one.projection.jobs, one.projection.concurrent_jobs, one.projection.wall_s) == (5, None, None)
    assert one.time_to_target_s == 250.0  # falls back to 1000 / records_per_s


def test_exclusive_children_run_as_many_at_once_as_their_nodes_fit() -> None:
    record = benchmark(CASES[:1], repeats=1, nodes=2, gpus=4, exclusive=True, targets=TARGETS)
    analysis = analyze(record, [child(0, 4, Run(200, 50.0, 180.0))], capacity=Capacity(nodes=5, gpus=10))
    projection = analysis.cases[0].projection
    assert projection is not None
    assert projection.concurrent_jobs == 2  # 5 nodes // 2 nodes per child (not 10 GPUs // 4)
    shared = benchmark(CASES[:1], repeats=1, nodes=2, gpus=4, exclusive=False, targets=TARGETS)
    projection = (
        analyze(shared, [child(0, 4, Run(200, 50.0, 180.0))], capacity=Capacity(nodes=5, gpus=10)).cases[0].projection
    )
    assert projection is not None
    assert projection.concurrent_jobs == 2  # 10 GPUs // 4 GPUs per child
    one_node = (
        analyze(shared, [child(0, 4, Run(200, 50.0, 180.0))], capacity=Capacity(nodes=5, gpus=16)).cases[0].projection
    )
    assert one_node is not None
    assert one_node.concurrent_jobs == 4


# -- determinism ----------------------------------------------------------------------------------------------------


def test_the_same_evidence_gives_byte_identical_json_and_csv() -> None:
    first, second = sweep(TARGETS, Capacity(4, 8)), sweep(TARGETS, Capacity(4, 8))
    assert analysis_json(first) == analysis_json(second)
    assert analysis_csv(first) == analysis_csv(second)
    assert first.evidence_digest == second.evidence_digest
    assert len(first.evidence_digest) == 64
    assert BenchmarkAnalysis.model_validate_json(analysis_json(first)) == first
    # the evidence digest follows the evidence
    children = sweep_children()
    children[0] = child(0, 1, Run(200, 100.0, 361.0, boot_s=30.0, tokens=5000, requests=400))
    changed = analyze(benchmark(CASES, repeats=2, targets=TARGETS), children, capacity=Capacity(4, 8))
    assert changed.evidence_digest != first.evidence_digest


def test_csv_has_the_fixed_header_and_one_row_per_case() -> None:
    text = analysis_csv(sweep(TARGETS, Capacity(4, 8)))
    assert text.endswith("\n")
    assert "\r" not in text
    rows = list(csv.reader(io.StringIO(text)))
    assert tuple(rows[0]) == CSV_HEADER
    assert len(CSV_HEADER) == len(set(CSV_HEADER)) == 6 + 3 * len(STAT_METRICS) + 7 + 15 + 2 + 4
    assert CSV_HEADER[6 + 3 * len(STAT_METRICS) + 5 :] == (  # the documented tail (issue 31), fixed
        "pareto",
        "best",
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
        "feasible",
        "infeasible_reason",
        "queue_waiting_mean",
        "queue_waiting_peak",
        "kv_cache_usage_peak",
        "preemptions",
    )
    cells = [dict(zip(CSV_HEADER, row, strict=True)) for row in rows[1:]]
    assert [c["case_index"] for c in cells] == ["0", "1", "2", "3"]
    one = cells[1]
    assert one["case"] == "replicas=2;concurrency=4"
    assert one["children"] == "2;3"
    assert (one["complete"], one["reason"], one["gpus"]) == ("true", "", "2")
    assert (one["records_per_s_mean"], one["records_per_s_std"], one["records_per_s_n"]) == ("4.0", "0.0", "2")
    assert (one["projected_jobs"], one["projected_gpu_hours"], one["projected_wall_s"]) == ("5", "5.0", "1200.0")
    assert (one["within_budget"], one["pareto"], one["best"]) == ("true", "false", "false")
    two = cells[2]
    assert (two["output_tokens_per_s_mean"], two["output_tokens_per_s_std"], two["output_tokens_per_s_n"]) == (
        "",
        "",
        "0",
    )
    three = cells[3]
    assert (three["complete"], three["reason"]) == ("false", "child 7 (failed): shard 0: server_died (exit 11)")
    assert (three["time_to_target_s"], three["projected_jobs"], three["within_budget"]) == ("", "", "")
    assert all(c["requests_sent"] == c["latency_p95_s"] == c["queue_waiting_peak"] == "" for c in cells)
    assert [c["feasible"] for c in cells] == ["true"] * 4, "no request evidence: not judged"


def test_json_holds_no_observation_time() -> None:
    text = analysis_json(sweep()).decode("utf-8")
    assert "observed_at" not in text
    assert "2030-" not in text  # no timestamp of the evidence either: only durations


@settings(max_examples=30, deadline=None)
@given(st.permutations(list(range(8))))
def test_the_analysis_does_not_depend_on_the_order_children_are_given(order: list[int]) -> None:
    children = sweep_children()
    record = benchmark(CASES, repeats=2, targets=TARGETS)
    reference = analysis_json(analyze(record, children, capacity=Capacity(4, 8)))
    shuffled = [children[i] for i in order]
    assert analysis_json(analyze(record, shuffled, capacity=Capacity(4, 8))) == reference


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=10_000),
            st.floats(min_value=0.5, max_value=10_000, allow_nan=False),
            st.floats(min_value=1.0, max_value=50_000, allow_nan=False),
            st.integers(min_value=0, max_value=8),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_the_front_is_exactly_the_undominated_ranked_cases(
    numbers: list[tuple[int, float, float, int]],
) -> None:
    cases: list[tuple[tuple[str, object], ...]] = [(("replicas", i), ("concurrency", 1)) for i in range(len(numbers))]
    record = benchmark(cases, repeats=1)
    children = [
        child(i, gpus, Run(records, generation, wall)) for i, (records, generation, wall, gpus) in enumerate(numbers)
    ]
    analysis = analyze(record, children)
    points = {
        c.case_index: (c.records_per_s_per_gpu.mean, c.time_to_target_s)
        for c in analysis.cases
        if c.records_per_s_per_gpu.mean is not None and c.time_to_target_s is not None
    }

    def dominated(i: int) -> bool:
        x, t = points[i]
        return any(x2 >= x and t2 <= t and (x2 > x or t2 < t) for j, (x2, t2) in points.items() if j != i)

    expected = sorted((i for i in points if not dominated(i)), key=lambda i: (-points[i][0], i))
    assert list(analysis.pareto) == expected
    costs = [(c.gpu_hours_per_1k.mean, c.case_index) for c in analysis.cases if c.gpu_hours_per_1k.mean is not None]
    assert analysis.best == min(costs)[1]
    for c in analysis.cases:
        assert c.records_per_s.mean is not None
        assert math.isclose(c.records_per_s.mean, round(numbers[c.case_index][0] / numbers[c.case_index][1], 6))


# -- request evidence (issue 31) ------------------------------------------------------------------------------------


def alias_requests(
    latencies_ms: list[float], *, failed: dict[int, int] | None = None, timeouts: int = 0, tokens: int = 10
) -> AliasRequests:
    """What a router records: each latency a successful request with ``tokens`` output tokens, then failures."""
    recorder = RequestRecorder()
    for ms in latencies_ms:
        recorder.sent()
        recorder.ended("succeeded", latency_ns=round(ms * 1_000_000), tokens=tokens)
    for status, n in (failed or {}).items():
        for _ in range(n):
            recorder.sent()
            recorder.ended("status", status=status)
    for _ in range(timeouts):
        recorder.sent()
        recorder.ended("timeout")
    return recorder.snapshot()


def with_requests(evidence: ChildEvidence, *per_attempt: AliasRequests | None) -> ChildEvidence:
    """``evidence`` whose attempts carry ``requests.json`` (one alias, ``writer``; None: the attempt has none)."""
    attempts = tuple(
        dataclasses.replace(
            a, requests=None if r is None else RequestEvidence(shard=0, attempt=a.number, final=True, aliases={"w": r})
        )
        for a, r in zip(evidence.attempts, per_attempt, strict=True)
    )
    return dataclasses.replace(evidence, attempts=attempts)


FAST = [10.0] * 9 + [100.0]  # ms: p50 and p90 in the 10 ms bucket, p95/p99 in the 100 ms one
SLOW = [200.0] * 9 + [2000.0]


def request_children() -> list[ChildEvidence]:
    """The sweep with request evidence: case 0 (the best and on the front without it) fails 2 of 20 requests,
    case 1 is slow, case 2 is fast, case 3 has a failed repeat."""
    children = sweep_children()
    evidence = {
        0: alias_requests(FAST[:8], failed={500: 2}),
        1: alias_requests(FAST),
        2: alias_requests(SLOW),
        3: alias_requests(SLOW),
        4: alias_requests(FAST),
        5: alias_requests(FAST),
        6: alias_requests(FAST),
    }
    return [with_requests(c, evidence[c.index]) if c.index in evidence else c for c in children]


def test_a_childs_requests_are_counted_with_exact_percentiles() -> None:
    analysis = analyze(benchmark(CASES, repeats=2), request_children())
    one = analysis.children[1].requests
    assert one is not None
    assert (one.sent, one.succeeded, one.failed, one.retried, one.error_rate) == (10, 10, 0, 0, 0.0)
    ten_ms = round(math.sqrt(9514 * 11314) / 1e6, 6)  # bucket [9.514, 11.314) ms
    hundred_ms = round(math.sqrt(90510 * 107635) / 1e6, 6)  # bucket [90.51, 107.635) ms: 98.702 ms
    assert (one.latency_p50_s, one.latency_p90_s) == (ten_ms, ten_ms)
    assert (one.latency_p95_s, one.latency_p99_s) == (hundred_ms, hundred_ms)
    assert one.latency_mean_s == 0.019  # exact: (9 x 10 + 100) / 10 ms
    assert one.latency_bucket_error == 0.090508
    assert one.output_tokens_per_request == 10.0
    assert one.latency_us.buckets == ((14, 9), (27, 1))
    failing = analysis.children[0].requests
    assert failing is not None
    assert (failing.sent, failing.failed, failing.error_rate) == (10, 2, 0.2)
    assert [(s.status, s.count) for s in failing.failed_status] == [(500, 2)]


def test_a_case_over_the_error_rate_or_the_p95_target_is_infeasible_and_never_best_nor_pareto() -> None:
    targets = AnalysisTargets(max_error_rate=0.05, max_p95_latency_s=1.0)
    analysis = analyze(benchmark(CASES, repeats=2, targets=targets), request_children())
    failing, slow, fast, incomplete = analysis.cases
    assert failing.requests is not None
    assert (failing.requests.sent, failing.requests.failed, failing.requests.error_rate) == (20, 2, 0.1)
    assert (failing.complete, failing.feasible) == (True, False)
    assert failing.infeasible_reason == ("error rate 0.1 (2 of 20 requests failed) exceeds max_error_rate 0.05")
    assert slow.requests is not None
    assert slow.requests.latency_p95_s == round(math.sqrt(1_722_156 * 2_048_000) / 1e6, 6)  # 1.878 s
    assert (slow.feasible, slow.infeasible_reason) == (
        False,
        f"p95 latency {slow.requests.latency_p95_s:g} s exceeds max_p95_latency_s 1 (bucket error ±9.05%)",
    )
    # bucket [181.019, 215.269) ms, its midpoint (197.4 ms) clamped to the observed min: higher than the fast's
    assert slow.requests.latency_p90_s == 0.2
    assert fast.requests is not None
    assert fast.requests.latency_p90_s == round(math.sqrt(9514 * 11314) / 1e6, 6)
    assert (fast.feasible, fast.infeasible_reason) == (True, None)
    assert (analysis.best, analysis.pareto) == (2, (2,))
    assert not failing.best
    assert not failing.pareto
    assert incomplete.requests is not None, "its measured repeat's requests"
    assert not incomplete.complete


def test_the_default_error_target_is_zero_failed_requests() -> None:
    analysis = analyze(benchmark(CASES, repeats=2), request_children())
    assert [c.feasible for c in analysis.cases] == [False, True, True, True]
    assert analysis.best == 1
    assert 0 not in analysis.pareto


def test_request_evidence_missing_in_any_attempt_is_none_never_zero() -> None:
    children = request_children()
    retried = child(1, 1, Run(100, 40.0, 144.0), Run(100, 40.0, 144.0))
    children[1] = with_requests(retried, alias_requests(FAST), None)
    analysis = analyze(benchmark(CASES, repeats=2), children)
    assert analysis.children[1].requests is None
    assert analysis.cases[0].requests is None, "not every repeat has request evidence"
    assert (analysis.cases[0].feasible, analysis.cases[0].infeasible_reason) == (True, None), "not judged"
    for case in analysis.cases:
        assert (case.queue_waiting_mean, case.queue_waiting_peak, case.kv_cache_usage_peak, case.preemptions) == (
            None,
            None,
            None,
            None,
        )


def test_a_retried_childs_attempts_and_a_cases_repeats_are_merged() -> None:
    children = request_children()
    retried = child(1, 1, Run(100, 40.0, 144.0), Run(100, 40.0, 144.0))
    children[1] = with_requests(retried, alias_requests(FAST[:5]), alias_requests(FAST[5:], timeouts=1))
    analysis = analyze(benchmark(CASES, repeats=2), children)
    merged = analysis.children[1].requests
    assert merged is not None
    assert (merged.sent, merged.succeeded, merged.failed_timeout, merged.latency_us.count) == (11, 10, 1, 10)
    case = analysis.cases[0].requests
    assert case is not None
    assert (case.sent, case.succeeded, case.failed, case.failed_timeout) == (21, 18, 3, 1)
    assert case.latency_us.count == 18


def test_request_columns_in_the_csv_and_histograms_in_the_json_are_deterministic() -> None:
    record = benchmark(CASES, repeats=2, targets=AnalysisTargets(max_error_rate=0.05, max_p95_latency_s=1.0))
    children = request_children()
    analysis = analyze(record, children)
    assert analysis_json(analyze(record, list(reversed(children)))) == analysis_json(analysis)
    rows = list(csv.reader(io.StringIO(analysis_csv(analysis))))
    cells = [dict(zip(CSV_HEADER, row, strict=True)) for row in rows[1:]]
    failing = cells[0]
    assert (failing["requests_sent"], failing["requests_succeeded"], failing["requests_failed"]) == ("20", "18", "2")
    assert (failing["requests_failed_status"], failing["requests_failed_timeout"]) == ("500=2", "0")
    assert (failing["error_rate"], failing["feasible"], failing["pareto"], failing["best"]) == (
        "0.1",
        "false",
        "false",
        "false",
    )
    assert failing["infeasible_reason"].startswith("error rate 0.1")
    assert (failing["latency_bucket_error"], failing["output_tokens_per_request"]) == ("0.090508", "10.0")
    assert cells[2]["latency_p50_s"] == repr(round(math.sqrt(9514 * 11314) / 1e6, 6))
    assert (cells[2]["feasible"], cells[2]["best"], cells[2]["queue_waiting_mean"], cells[2]["preemptions"]) == (
        "true",
        "true",
        "",
        "",
    )
    payload = json.loads(analysis_json(analysis))
    assert payload["cases"][2]["requests"]["latency_us"]["buckets"] == [[14, 18], [27, 2]]
    assert payload["children"][1]["requests"]["latency_us"]["count"] == 10


# -- server samples (issue 31) --------------------------------------------------------------------------------------


def servers(
    number: int, *replicas: tuple[int, float, float, float, float | None] | None, alias: str = "writer"
) -> ServerSamplesRecord:
    """An attempt's server-metrics.json: per replica (scrapes, waiting mean, waiting peak, KV peak, preemptions),
    or None for a replica that never answered /metrics."""
    return ServerSamplesRecord(
        shard=0,
        attempt=number,
        interval_s=5.0,
        started_at=T0,
        finished=True,
        replicas=tuple(
            ReplicaServerSamples(
                alias=alias,
                replica=i,
                url=f"http://node1:{8000 + i}/metrics",
                available=r is not None,
                reason=None if r is not None else "GET /metrics answered 404",
                aggregates=None
                if r is None
                else ServerAggregates(
                    scrapes=r[0],
                    running_mean=1.0,
                    running_peak=1.0,
                    waiting_mean=r[1],
                    waiting_peak=r[2],
                    kv_usage_peak=r[3],
                    preemptions=r[4],
                ),
            )
            for i, r in enumerate(replicas)
        ),
    )


def with_servers(evidence: ChildEvidence, *per_attempt: ServerSamplesRecord | None) -> ChildEvidence:
    attempts = tuple(
        dataclasses.replace(a, server_metrics=r) for a, r in zip(evidence.attempts, per_attempt, strict=True)
    )
    return dataclasses.replace(evidence, attempts=attempts)


def server_children() -> list[ChildEvidence]:
    """The request sweep with server samples: case 0 two replicas and a retried repeat, case 1 one replica without
    the preemption counter, case 2 a repeat without server-metrics.json, case 3 a failed repeat."""
    children = request_children()
    retried = child(1, 1, Run(100, 40.0, 144.0), Run(100, 40.0, 144.0))
    children[1] = with_requests(retried, alias_requests(FAST[:5]), alias_requests(FAST[5:]))
    records = {
        0: (servers(1, (3, 2.0, 4.0, 0.5, 1.0), (1, 6.0, 6.0, 0.25, 0.0)),),  # mean (3x2 + 1x6) / 4 = 3
        1: (servers(1, (2, 1.0, 2.0, 0.75, 2.0)), servers(2, (2, 0.0, 1.0, 1.0, 0.0), None)),  # mean 0.5
        2: (servers(1, (4, 0.25, 1.0, 0.5, None)),),
        3: (servers(1, (4, 0.75, 2.0, 0.25, None)),),
        4: (servers(1, (1, 5.0, 5.0, 1.0, 0.0)),),
        5: (None,),
        6: (servers(1, None),),
    }
    return [with_servers(c, *records[c.index]) if c.index in records else c for c in children]


def test_server_samples_fill_each_childs_and_cases_queue_kv_and_preemption_columns_exactly() -> None:
    analysis = analyze(benchmark(CASES, repeats=2), server_children())

    def figures(item: object) -> tuple[object, ...]:
        return tuple(getattr(item, f) for f in ("queue_waiting_mean", "queue_waiting_peak", "kv_cache_usage_peak"))

    children = analysis.children
    assert (*figures(children[0]), children[0].preemptions) == (3.0, 6.0, 0.5, 1)
    assert (*figures(children[1]), children[1].preemptions) == (0.5, 2.0, 1.0, 2), "both attempts folded"
    assert (*figures(children[2]), children[2].preemptions) == (0.25, 1.0, 0.5, None), "no counter: None, never 0"
    assert (*figures(children[5]), children[5].preemptions) == (None, None, None, None), "no server-metrics.json"
    assert (*figures(children[6]), children[6].preemptions) == (None, None, None, None), "no replica available"
    assert (*figures(children[7]), children[7].preemptions) == (None, None, None, None), "not measured"
    first, second, third, fourth = analysis.cases
    # mean of the repeats' means (3.0 and 0.5), the largest peaks, preemptions summed
    assert (*figures(first), first.preemptions) == (1.75, 6.0, 1.0, 3)
    assert (*figures(second), second.preemptions) == (0.5, 2.0, 0.5, None), "a repeat without the counter"
    assert (*figures(third), third.preemptions) == (None, None, None, None), "a repeat without the record"
    assert (*figures(fourth), fourth.preemptions) == (None, None, None, None), "its measured repeat has none"
    rows = list(csv.reader(io.StringIO(analysis_csv(analysis))))
    cells = [dict(zip(CSV_HEADER, row, strict=True)) for row in rows[1:]]
    assert [
        (c["queue_waiting_mean"], c["queue_waiting_peak"], c["kv_cache_usage_peak"], c["preemptions"]) for c in cells
    ] == [("1.75", "6.0", "1.0", "3"), ("0.5", "2.0", "0.5", ""), ("", "", "", ""), ("", "", "", "")]


def test_server_samples_are_deterministic_and_part_of_the_evidence_digest() -> None:
    record = benchmark(CASES, repeats=2, targets=TARGETS)
    children = server_children()
    analysis = analyze(record, children, capacity=Capacity(4, 8))
    again = analyze(record, list(reversed(server_children())), capacity=Capacity(4, 8))
    assert analysis_json(again) == analysis_json(analysis)
    assert analysis_csv(again) == analysis_csv(analysis)
    assert BenchmarkAnalysis.model_validate_json(analysis_json(analysis)) == analysis
    assert analyze(record, request_children(), capacity=Capacity(4, 8)).evidence_digest != analysis.evidence_digest
    children[0] = with_servers(children[0], servers(1, (3, 2.0, 4.0, 0.5, 1.0), (1, 6.0, 7.0, 0.25, 0.0)))
    assert analyze(record, children, capacity=Capacity(4, 8)).evidence_digest != analysis.evidence_digest
