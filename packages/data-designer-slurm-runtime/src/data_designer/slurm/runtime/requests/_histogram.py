"""Pure operations on request evidence: bucket of a latency, merging, percentiles, the tokens of an answer.

Merging adds integers (counts, sums, per-bucket counts) and takes the min of mins and the max of maxes, so it is
associative and order-independent; statuses beyond :data:`MAX_STATUS_CODES` keep the lowest codes one by one and
count the rest together, a rule that is associative too (a code folded away by one side is above all its kept
codes, hence above the lowest ones of the union).

A percentile p of ``count`` values is the value of rank ``ceil(p x count / 100)`` (nearest rank, integer
arithmetic); its bucket is found by the cumulative counts, and reported at the bucket's geometric midpoint clamped
to the observed min and max. Between the bounds that is within ``LATENCY_RELATIVE_ERROR`` (2^(1/8) - 1, about
9.05%) of the true value; below 1 ms the bucket's lower bound is the observed min, above the last bound its upper
bound is the observed max.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Mapping

from data_designer.slurm.contracts.records import (
    LATENCY_BOUNDS_US,
    LATENCY_BUCKETS,
    MAX_STATUS_CODES,
    AliasRequests,
    Histogram,
    StatusCount,
)

PERCENTILES = (50, 90, 95, 99)
"""The latency percentiles an analysis reports."""

_EMPTY = Histogram()
_TOKENS = re.compile(rb'"completion_tokens"\s*:\s*(\d{1,12})')


def latency_bucket(us: int) -> int:
    """The fixed bucket index of a latency in microseconds (0: below 1 ms; ``LATENCY_BUCKETS - 1``: 2^22 ms on)."""
    return bisect.bisect_right(LATENCY_BOUNDS_US, us)


def merge_histograms(histograms: Iterable[Histogram]) -> Histogram:
    """One histogram counting every value of ``histograms`` (the empty histogram for none)."""
    count = total = 0
    low: int | None = None
    high: int | None = None
    buckets: dict[int, int] = {}
    for item in histograms:
        if not item.count:
            continue
        count += item.count
        total += item.sum
        low = item.min if low is None or (item.min is not None and item.min < low) else low
        high = item.max if high is None or (item.max is not None and item.max > high) else high
        for index, n in item.buckets:
            buckets[index] = buckets.get(index, 0) + n
    if not count:
        return _EMPTY
    return Histogram(count=count, sum=total, min=low, max=high, buckets=tuple(sorted(buckets.items())))


def status_counts(counts: Mapping[int, int], other: int = 0) -> tuple[tuple[StatusCount, ...], int]:
    """Per status counts kept one by one for the lowest :data:`MAX_STATUS_CODES` statuses; the rest added to
    ``other``."""
    codes = sorted(code for code, n in counts.items() if n > 0)
    kept, folded = codes[:MAX_STATUS_CODES], codes[MAX_STATUS_CODES:]
    return tuple(StatusCount(status=code, count=counts[code]) for code in kept), other + sum(
        counts[code] for code in folded
    )


def merge_aliases(items: Iterable[AliasRequests]) -> AliasRequests:
    """One alias's evidence counting everything of ``items`` (several attempts, shards, repeats or aliases)."""
    items = list(items)
    statuses: dict[int, int] = {}
    for item in items:
        for status in item.failed_status:
            statuses[status.status] = statuses.get(status.status, 0) + status.count
    failed_status, other = status_counts(statuses, sum(item.failed_status_other for item in items))
    return AliasRequests(
        sent=sum(item.sent for item in items),
        succeeded=sum(item.succeeded for item in items),
        failed_timeout=sum(item.failed_timeout for item in items),
        failed_connection=sum(item.failed_connection for item in items),
        failed_status=failed_status,
        failed_status_other=other,
        retried=sum(item.retried for item in items),
        latency_us=merge_histograms(item.latency_us for item in items),
        output_tokens=merge_histograms(item.output_tokens for item in items),
    )


def percentile_us(histogram: Histogram, percent: int) -> float | None:
    """The ``percent``-th percentile (1..100) of a latency histogram in microseconds; None when it is empty."""
    if not 0 < percent <= 100:
        raise ValueError(f"a percentile is between 1 and 100, not {percent}")
    if not histogram.count or histogram.min is None or histogram.max is None:
        return None
    rank = -(-percent * histogram.count // 100)
    seen = 0
    for index, n in histogram.buckets:
        seen += n
        if seen >= rank:
            return _midpoint(index, histogram.min, histogram.max)
    return float(histogram.max)  # no buckets (a token histogram): only the extremes are known


def _midpoint(index: int, low: int, high: int) -> float:
    lower = low if index == 0 else LATENCY_BOUNDS_US[index - 1]
    upper = high if index == LATENCY_BUCKETS - 1 else LATENCY_BOUNDS_US[index]
    return min(max(math.sqrt(lower * upper), float(low)), float(high))


def completion_tokens(body: bytes) -> int | None:
    """``usage.completion_tokens`` of a JSON answer, found without parsing it (the last occurrence: usage comes at
    the end of an OpenAI answer; inside a JSON string a quote is escaped, so the key cannot be faked by content)."""
    at = body.rfind(b'"completion_tokens"')
    if at < 0:
        return None
    found = _TOKENS.match(body, at)
    return int(found.group(1)) if found else None
