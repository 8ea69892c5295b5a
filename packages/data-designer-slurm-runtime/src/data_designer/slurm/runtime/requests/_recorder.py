"""The per-alias accumulator a router feeds: constant memory whatever the number of requests."""

from __future__ import annotations

import threading
from typing import Literal

from data_designer.slurm.contracts.records import LATENCY_BUCKETS, AliasRequests, Histogram
from data_designer.slurm.runtime.requests._histogram import latency_bucket, status_counts

Outcome = Literal["succeeded", "status", "timeout", "connection"]
"""How a sent request ended: a 2xx answer, another status, or no answer (the last exchange timed out, or failed
to connect or was cut)."""


class RequestRecorder:
    """Counts and histograms of one alias's requests (thread-safe; :meth:`snapshot` gives the record's value)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent = self._succeeded = self._timeout = self._connection = self._retried = 0
        self._statuses: dict[int, int] = {}  # at most the 500 HTTP statuses
        self._buckets = [0] * LATENCY_BUCKETS
        self._latency = [0, 0, -1, -1]  # count, sum, min, max (-1: none yet)
        self._tokens = [0, 0, -1, -1]

    def sent(self) -> None:
        with self._lock:
            self._sent += 1

    def retried(self) -> None:
        with self._lock:
            self._retried += 1

    def ended(self, outcome: Outcome, *, latency_ns: int = 0, status: int = 0, tokens: int | None = None) -> None:
        """One sent request ended; a successful one's latency (ns) and output tokens are kept."""
        with self._lock:
            if outcome == "succeeded":
                self._succeeded += 1
                us = latency_ns // 1000
                self._buckets[latency_bucket(us)] += 1
                _add(self._latency, us)
                if tokens is not None:
                    _add(self._tokens, tokens)
            elif outcome == "status":
                self._statuses[status] = self._statuses.get(status, 0) + 1
            elif outcome == "timeout":
                self._timeout += 1
            else:
                self._connection += 1

    def snapshot(self) -> AliasRequests:
        with self._lock:
            failed_status, other = status_counts(self._statuses)
            buckets = tuple((index, n) for index, n in enumerate(self._buckets) if n)
            return AliasRequests(
                sent=self._sent,
                succeeded=self._succeeded,
                failed_timeout=self._timeout,
                failed_connection=self._connection,
                failed_status=failed_status,
                failed_status_other=other,
                retried=self._retried,
                latency_us=_histogram(self._latency, buckets),
                output_tokens=_histogram(self._tokens, ()),
            )


def _add(stats: list[int], value: int) -> None:
    stats[0] += 1
    stats[1] += value
    if stats[2] < 0 or value < stats[2]:
        stats[2] = value
    if value > stats[3]:
        stats[3] = value


def _histogram(stats: list[int], buckets: tuple[tuple[int, int], ...]) -> Histogram:
    if not stats[0]:
        return Histogram()
    return Histogram(count=stats[0], sum=stats[1], min=stats[2], max=stats[3], buckets=buckets)
