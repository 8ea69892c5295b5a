"""``runtime.requests``: fixed latency buckets, exact merging, percentiles with their stated error, the size bound.

Every expected number is written out: the bounds are ``round(1000 x 2^(i/4))`` microseconds, a percentile is
the geometric midpoint of its bucket clamped to the observed min and max.
"""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_designer.slurm.contracts.records import (
    LATENCY_BOUNDS_US,
    LATENCY_BUCKET_RATIO,
    LATENCY_BUCKETS,
    LATENCY_RELATIVE_ERROR,
    MAX_ALIAS_BYTES,
    MAX_STATUS_CODES,
    AliasRequests,
    Histogram,
    StatusCount,
)
from data_designer.slurm.planner import canonical_json
from data_designer.slurm.runtime.requests import (
    RequestRecorder,
    completion_tokens,
    latency_bucket,
    merge_aliases,
    merge_histograms,
    percentile_us,
)


def histogram(values_us: list[int]) -> Histogram:
    """The latency histogram of ``values_us`` as the recorder keeps it."""
    recorder = RequestRecorder()
    for value in values_us:
        recorder.sent()
        recorder.ended("succeeded", latency_ns=value * 1000)
    return recorder.snapshot().latency_us


def test_the_bounds_are_fixed_quarter_octaves_from_1_ms_to_2_to_the_22_ms() -> None:
    assert LATENCY_BUCKETS == 90
    assert LATENCY_BOUNDS_US[:6] == (1000, 1189, 1414, 1682, 2000, 2378)
    assert LATENCY_BOUNDS_US[40] == 1_024_000
    assert LATENCY_BOUNDS_US[-1] == 4_194_304_000  # about 70 minutes
    assert LATENCY_BUCKET_RATIO == 2 ** (1 / 4)
    assert round(LATENCY_RELATIVE_ERROR, 6) == 0.090508


@pytest.mark.parametrize(
    ("us", "index"),
    [
        (0, 0),
        (999, 0),
        (1000, 1),
        (1188, 1),
        (1189, 2),
        (1_000_000, 40),
        (1_024_000, 41),
        (4_194_303_999, 88),
        (4_194_304_000, 89),
        (10**15, 89),
    ],
)
def test_each_latency_falls_in_one_fixed_bucket(us: int, index: int) -> None:
    assert latency_bucket(us) == index


def test_merging_adds_counts_per_bucket_and_keeps_the_extremes() -> None:
    first = histogram([500, 1000, 2000])
    second = histogram([2000, 1_000_000])
    merged = merge_histograms([first, second])
    assert merged == Histogram(
        count=5, sum=1_005_500, min=500, max=1_000_000, buckets=((0, 1), (1, 1), (5, 2), (40, 1))
    )
    assert merged == histogram([500, 1000, 2000, 2000, 1_000_000])
    assert merge_histograms([]) == merge_histograms([Histogram(), Histogram()]) == Histogram()
    assert merge_histograms([Histogram(), first]) == first


def test_percentiles_are_bucket_midpoints_clamped_to_the_observed_range() -> None:
    values = [10_000] * 90 + [1_000_000] * 10  # 90 requests of 10 ms, 10 of 1 s
    merged = histogram(values)
    assert merged.buckets == ((14, 90), (40, 10))
    fast = math.sqrt(9514 * 11314)  # bucket 14: [9514, 11314) us
    slow = math.sqrt(861_078 * 1_024_000)  # bucket 40: [861078, 1024000) us
    assert percentile_us(merged, 50) == fast == pytest.approx(10375.1, abs=0.1)
    assert percentile_us(merged, 90) == fast  # rank 90 is the last fast one
    assert percentile_us(merged, 95) == slow == pytest.approx(939012.18, abs=0.01)
    assert percentile_us(merged, 99) == percentile_us(merged, 100) == slow
    assert abs(percentile_us(merged, 95) / 1_000_000 - 1) <= LATENCY_RELATIVE_ERROR  # type: ignore[operator]


def test_the_open_buckets_are_bounded_by_the_observed_min_and_max() -> None:
    assert percentile_us(histogram([7_000]), 50) == 7_000  # one value: exact
    assert percentile_us(histogram([100, 200]), 50) == 200  # below 1 ms: sqrt(100 x 1000) clamped to the max
    assert percentile_us(histogram([400, 900]), 50) == math.sqrt(400 * 1000)
    huge = histogram([5_000_000_000, 6_000_000_000])  # over 70 minutes
    assert percentile_us(huge, 50) == math.sqrt(4_194_304_000 * 6_000_000_000)
    assert percentile_us(Histogram(), 50) is None
    with pytest.raises(ValueError, match="between 1 and 100"):
        percentile_us(huge, 0)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1000, max_value=4_194_303_999))
def test_a_percentile_between_the_bounds_is_within_the_stated_relative_error(value: int) -> None:
    estimate = percentile_us(histogram([1, value, 10**13]), 50)  # the extremes do not clamp the middle value
    assert estimate is not None
    assert abs(estimate / value - 1) <= LATENCY_RELATIVE_ERROR + 1e-3  # + the bounds' rounding to whole us


latencies = st.lists(st.integers(min_value=0, max_value=10**11), max_size=30)


@settings(max_examples=150, deadline=None)
@given(st.lists(latencies, min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_merging_is_associative_and_order_independent(groups: list[list[int]], rnd: random.Random) -> None:
    parts = [histogram(group) for group in groups]
    whole = histogram([value for group in groups for value in group])
    assert merge_histograms(parts) == whole
    shuffled = parts[:]
    rnd.shuffle(shuffled)
    assert merge_histograms(shuffled) == whole
    cut = rnd.randrange(len(parts) + 1)
    assert merge_histograms([merge_histograms(parts[:cut]), merge_histograms(parts[cut:])]) == whole


def alias(statuses: dict[int, int], *, sent: int | None = None, other: int = 0) -> AliasRequests:
    failed = sum(statuses.values()) + other
    return AliasRequests(
        sent=failed + 1 if sent is None else sent,
        succeeded=1,
        failed_timeout=0,
        failed_connection=0,
        failed_status=tuple(StatusCount(status=code, count=n) for code, n in sorted(statuses.items())),
        failed_status_other=other,
        retried=0,
        latency_us=histogram([5_000]),
        output_tokens=Histogram(count=1, sum=7, min=7, max=7),
    )


codes = st.dictionaries(st.integers(min_value=400, max_value=599), st.integers(min_value=1, max_value=5), max_size=20)


@settings(max_examples=150, deadline=None)
@given(st.lists(codes, min_size=1, max_size=5), st.randoms(use_true_random=False))
def test_merging_aliases_is_associative_and_order_independent_with_capped_statuses(
    groups: list[dict[int, int]], rnd: random.Random
) -> None:
    parts = [merge_aliases([alias(dict(list(group.items())[:MAX_STATUS_CODES]))]) for group in groups]
    whole = merge_aliases(parts)
    shuffled = parts[:]
    rnd.shuffle(shuffled)
    assert merge_aliases(shuffled) == whole
    cut = rnd.randrange(len(parts) + 1)
    assert merge_aliases([merge_aliases(parts[:cut]), merge_aliases(parts[cut:])]) == whole
    assert len(whole.failed_status) <= MAX_STATUS_CODES
    assert whole.failed == sum(sum(group.values()) for group in groups)


def test_statuses_past_the_cap_are_counted_together_lowest_codes_kept() -> None:
    merged = merge_aliases([alias({400 + i: 1 for i in range(30)}), alias({450 + i: 2 for i in range(10)})])
    assert [item.status for item in merged.failed_status] == [*range(400, 430), 450, 451]
    assert merged.failed_status_other == 8 * 2
    assert (merged.sent, merged.succeeded, merged.failed) == (52, 2, 50)
    assert merged.output_tokens == Histogram(count=2, sum=14, min=7, max=7)


def test_the_recorder_counts_every_outcome() -> None:
    recorder = RequestRecorder()
    for _ in range(6):
        recorder.sent()
    recorder.ended("succeeded", latency_ns=2_500_000, tokens=12)
    recorder.ended("succeeded", latency_ns=3_000_000)
    recorder.ended("status", status=500)
    recorder.ended("status", status=429)
    recorder.ended("timeout")
    recorder.retried()
    snapshot = recorder.snapshot()
    assert (snapshot.sent, snapshot.succeeded, snapshot.failed_timeout, snapshot.failed_connection) == (6, 2, 1, 0)
    assert [(s.status, s.count) for s in snapshot.failed_status] == [(429, 1), (500, 1)]
    assert (snapshot.failed, snapshot.retried) == (3, 1)  # one still in flight
    assert snapshot.latency_us == Histogram(count=2, sum=5500, min=2500, max=3000, buckets=((6, 1), (7, 1)))
    assert snapshot.output_tokens == Histogram(count=1, sum=12, min=12, max=12)


def test_an_alias_stays_under_the_size_bound_whatever_it_counted() -> None:
    full = Histogram(
        count=10**15 * LATENCY_BUCKETS,
        sum=10**18 * LATENCY_BUCKETS,
        min=0,
        max=10**18,
        buckets=tuple((index, 10**15) for index in range(LATENCY_BUCKETS)),
    )
    worst = AliasRequests(
        sent=10**17,
        succeeded=10**15,
        failed_timeout=10**15,
        failed_connection=10**15,
        failed_status=tuple(StatusCount(status=400 + i, count=10**15) for i in range(MAX_STATUS_CODES)),
        failed_status_other=10**15,
        retried=10**15,
        latency_us=full,
        output_tokens=Histogram(count=10**15, sum=10**18, min=0, max=10**6),
    )
    size = len(canonical_json(worst.model_dump(mode="json")))
    assert size < MAX_ALIAS_BYTES
    assert size < 4096, size


@pytest.mark.parametrize(
    ("body", "tokens"),
    [
        (b'{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":17,"total_tokens":26}}', 17),
        (b'{"usage": {"completion_tokens" : 3}}', 3),
        (b'{"choices":[{"message":{"content":"say \\"completion_tokens\\": 99"}}]}', None),
        (b'{"choices":[]}', None),
        (b'{"usage":{"completion_tokens":null}}', None),
        (json.dumps({"usage": {"completion_tokens": 5}}).encode(), 5),
    ],
)
def test_output_tokens_are_read_from_usage_without_parsing(body: bytes, tokens: int | None) -> None:
    assert completion_tokens(body) == tokens
