"""The client worker's request evidence (issue 31): 10^6 requests recorded, its size and per-request cost, beside a
naive list of latencies.

One ``runtime.requests.RequestRecorder`` (what each alias's router feeds) records 10^6 requests (quick: 10^5) whose
latencies are log-uniform over 5 ms .. 100 s (a fixed seed), 1% of them failing with a 500 and 0.5% timing out,
each success with its output tokens; the record is then ``RequestEvidence`` (``requests.json``'s payload) of that
alias, serialized as the store writes it (``store.AttemptWriter.write_requests``'s canonical JSON). Beside it, the
naive alternative: the same latencies appended to a list and written as a JSON array of seconds.

Figures: the evidence's **serialized size** (target: under ``MAX_ALIAS_BYTES``, 16 KiB, whatever the count),
**recording cost per request** (``sent`` + ``ended`` under the recorder's lock, target under 10 us), the time to
**snapshot and serialize** it, and the naive list's size and per-request cost. Percentiles read back from the
histogram are checked against the exact ones of the sorted list: within ``LATENCY_RELATIVE_ERROR`` (9.05%).
"""

from __future__ import annotations

import json
import math
import random
import time

from benchmarks._harness import Benchmark, Figure, RunContext, Target

SIZE_TARGET_BYTES = 16 * 1024
COST_TARGET_US = 10.0


def run(ctx: RunContext) -> list[Figure]:
    from data_designer.slurm.contracts.records import LATENCY_RELATIVE_ERROR, MAX_ALIAS_BYTES, RequestEvidence
    from data_designer.slurm.planner import canonical_json
    from data_designer.slurm.runtime.requests import RequestRecorder, percentile_us

    count = 100_000 if ctx.quick else 1_000_000
    rnd = random.Random(31)
    low, high = math.log(5_000_000), math.log(100_000_000_000)  # ns
    latencies = [int(math.exp(rnd.uniform(low, high))) for _ in range(count)]
    fates = [rnd.random() for _ in range(count)]
    tokens = [rnd.randrange(1, 4096) for _ in range(count)]

    recorder = RequestRecorder()
    start = time.perf_counter()
    for latency, fate, n in zip(latencies, fates, tokens, strict=True):
        recorder.sent()
        if fate < 0.01:
            recorder.ended("status", status=500)
        elif fate < 0.015:
            recorder.ended("timeout")
        else:
            recorder.ended("succeeded", latency_ns=latency, tokens=n)
    record_s = time.perf_counter() - start
    start = time.perf_counter()
    evidence = RequestEvidence(shard=0, attempt=1, final=True, aliases={"writer": recorder.snapshot()})
    data = canonical_json(evidence.model_dump(mode="json"))
    snapshot_s = time.perf_counter() - start

    start = time.perf_counter()
    naive: list[float] = []
    for latency, fate in zip(latencies, fates, strict=True):
        if fate >= 0.015:
            naive.append(latency / 1e9)
    naive_data = json.dumps(naive).encode()
    naive_s = time.perf_counter() - start

    alias = evidence.aliases["writer"]
    exact = sorted(naive)
    worst = 0.0
    for percent in (50, 90, 95, 99):
        estimate = percentile_us(alias.latency_us, percent)
        assert estimate is not None
        truth = exact[-(-percent * len(exact) // 100) - 1]
        worst = max(worst, abs(estimate / 1e6 / truth - 1))
    if worst > LATENCY_RELATIVE_ERROR + 1e-3:
        raise RuntimeError(f"a percentile is {worst:.2%} off, over the stated {LATENCY_RELATIVE_ERROR:.2%}")
    if alias.sent != count or alias.latency_us.count != len(naive):
        raise RuntimeError("the recorder lost requests")
    note = f"{count:,} requests, {len(alias.latency_us.buckets)} buckets filled; percentiles within {worst:.2%}"
    return [
        Figure("evidence size", len(data), "B", Target.at_most(min(SIZE_TARGET_BYTES, MAX_ALIAS_BYTES)), note=note),
        Figure("recording cost per request", record_s / count * 1e6, "us", Target.at_most(COST_TARGET_US)),
        Figure("snapshot and serialize", snapshot_s * 1000, "ms"),
        Figure("naive latency list size", len(naive_data), "B", note="a JSON array of seconds, one per success"),
        Figure("naive list cost per request", naive_s / count * 1e6, "us", note="append + json.dumps"),
        Figure("naive / evidence size", len(naive_data) / len(data), "x"),
    ]


BENCHMARK = Benchmark(
    summary="request evidence of 10^6 requests: bounded size and per-request cost beside a naive latency list",
    run=run,
)
