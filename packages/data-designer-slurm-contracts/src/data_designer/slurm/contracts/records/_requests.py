"""``requests.json``: what the client worker's routers saw of every request of one attempt, in a bounded size.

Per routed alias (every deployed alias goes through the worker's local router, ``runtime/worker/_router.py``;
an external alias is called directly and has no entry: not available, never zero): how many requests were sent,
how each ended (succeeded, failed by class: timeout, connection, an HTTP status per code), how many exchanges were
re-sent to another replica (``retried``: failovers), a histogram of the end-to-end latency of the successful ones,
and the output tokens of the answers whose ``usage`` reports them.

**Fixed buckets.** Latencies are kept in integer microseconds, so merging histograms is exact integer arithmetic
(associative and order-independent). Bucket 0 holds latencies below :data:`LATENCY_BOUNDS_US`\\[0] (1 ms), bucket
``i`` (1 <= i < :data:`LATENCY_BUCKETS` - 1) holds ``LATENCY_BOUNDS_US[i-1] <= t < LATENCY_BOUNDS_US[i]``, the last
bucket everything from ``LATENCY_BOUNDS_US[-1]`` (2^22 ms = 4194.304 s, about 70 minutes) on. Bounds grow by
:data:`LATENCY_BUCKET_RATIO` = 2^(1/4) (rounded to whole microseconds), so a percentile reported at a bucket's
geometric midpoint is within :data:`LATENCY_RELATIVE_ERROR` (2^(1/8) - 1, about 9.05%) of the true value, and
within the observed ``min_us``/``max_us`` in the two open-ended buckets.

**Size bound.** An alias holds at most :data:`LATENCY_BUCKETS` (90) bucket pairs and :data:`MAX_STATUS_CODES` (32)
status pairs (the rest counted in ``failed_status_other``), a dozen integers besides: under
:data:`MAX_ALIAS_BYTES` (16 KiB) of canonical JSON whatever the run's length (``benchmarks/bench_request_evidence.py``
records 10^6 requests).

Written by the worker through ``AttemptWriter.write_requests`` (replaced: every few seconds while it generates,
and once more before the manifest), so a valid manifest's attempt has the final counts.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt, model_validator

from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._schema import RecordSchema

LATENCY_BUCKET_RATIO = 2 ** (1 / 4)
"""Each latency bucket's upper bound over its lower bound."""
LATENCY_MIN_US = 1_000
"""The first bound: 1 ms."""
LATENCY_BOUNDS_US: tuple[int, ...] = tuple(round(LATENCY_MIN_US * 2 ** (i / 4)) for i in range(89))
"""The 89 bucket bounds in microseconds: 1 ms, 1.189 ms, ... 4194.304 s (2^22 ms)."""
LATENCY_BUCKETS = len(LATENCY_BOUNDS_US) + 1
"""90: one below 1 ms, 88 between the bounds, one from the last bound on."""
LATENCY_RELATIVE_ERROR = 2 ** (1 / 8) - 1
"""The most a percentile reported at its bucket's geometric midpoint can be off, relatively (between the bounds)."""
MAX_STATUS_CODES = 32
"""Distinct HTTP statuses counted one by one per alias; later ones are counted together."""
MAX_ALIAS_BYTES = 16 * 1024
"""The size bound of one alias's evidence in canonical JSON."""


class Histogram(BaseModel):
    """Counts per fixed bucket index (sparse: ascending indices, positive counts) with the exact count, sum, min
    and max, all integers (microseconds for latencies, tokens for tokens)."""

    model_config = FROZEN

    count: NonNegativeInt = 0
    sum: NonNegativeInt = 0
    min: NonNegativeInt | None = Field(default=None, description="None when count is 0.")
    max: NonNegativeInt | None = Field(default=None, description="None when count is 0.")
    buckets: tuple[tuple[NonNegativeInt, PositiveInt], ...] = Field(
        default=(), strict=False, description="(bucket index, count) pairs, indices ascending and below the scheme's."
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        indices = [index for index, _ in self.buckets]
        if indices != sorted(set(indices)):
            raise ValueError("bucket indices must be unique and ascending")
        if self.buckets and sum(n for _, n in self.buckets) != self.count:
            raise ValueError("bucket counts must sum to count")
        if (self.count == 0) != (self.min is None) or (self.min is None) != (self.max is None):
            raise ValueError("min and max are set exactly when count is positive")
        if self.min is not None and self.max is not None and not self.min <= self.max <= self.sum:
            raise ValueError("min <= max <= sum")
        return self


class StatusCount(BaseModel):
    model_config = FROZEN

    status: int = Field(ge=100, le=599)
    count: PositiveInt


class AliasRequests(BaseModel):
    """What one alias's router saw of this attempt's requests."""

    model_config = FROZEN

    sent: NonNegativeInt = Field(description="Requests admitted and sent upstream (held ones never are).")
    succeeded: NonNegativeInt = Field(description="Answered with a 2xx status.")
    failed_timeout: NonNegativeInt = Field(description="No replica answered and the last exchange timed out.")
    failed_connection: NonNegativeInt = Field(description="No replica answered (refused, reset, closed).")
    failed_status: tuple[StatusCount, ...] = Field(
        default=(), strict=False, description="Answered with a status other than 2xx, per status (ascending)."
    )
    failed_status_other: NonNegativeInt = Field(
        default=0, description=f"Non-2xx answers past the first {MAX_STATUS_CODES} distinct statuses."
    )
    retried: NonNegativeInt = Field(description="Exchanges re-sent to another replica after one failed (failovers).")
    latency_us: Histogram = Field(description="End-to-end time of each successful request, in microseconds.")
    output_tokens: Histogram = Field(
        description="usage.completion_tokens of each successful JSON answer that reports it (no buckets)."
    )

    @model_validator(mode="after")
    def _counts(self) -> Self:
        statuses = [item.status for item in self.failed_status]
        if statuses != sorted(set(statuses)) or len(statuses) > MAX_STATUS_CODES:
            raise ValueError(f"failed_status: at most {MAX_STATUS_CODES} unique statuses, ascending")
        if self.succeeded + self.failed > self.sent:
            raise ValueError("more requests ended than were sent")
        return self

    @property
    def failed(self) -> int:
        """Requests that ended without a 2xx answer."""
        status = sum(item.count for item in self.failed_status) + self.failed_status_other
        return self.failed_timeout + self.failed_connection + status


class RequestEvidence(BaseModel):
    """Per routed alias of one attempt (aliases without a router: no entry)."""

    model_config = FROZEN

    shard: NonNegativeInt
    attempt: PositiveInt
    final: bool = Field(description="Written at the worker's end (False: a periodic snapshot while it ran).")
    aliases: dict[str, AliasRequests]


REQUESTS_SCHEMA: RecordSchema[RequestEvidence] = RecordSchema("requests", 1, RequestEvidence)
