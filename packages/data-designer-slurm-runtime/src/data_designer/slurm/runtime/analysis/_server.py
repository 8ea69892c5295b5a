"""What the servers were doing, per alias, from attempts' ``server-metrics.json`` records (pure).

:func:`server_summary` folds the exact aggregates of every available replica of every record given (the attempts of
one run) into one :class:`ServerSummary` per alias; :func:`servers_total` folds every alias into one, a benchmark
child's ``queue_waiting_mean``, ``queue_waiting_peak``, ``kv_cache_usage_peak`` and ``preemptions``:

* ``queue_waiting_mean``: the mean of ``vllm:num_requests_waiting`` over every scrape of every replica (each
  replica's mean weighted by its scrapes), so a replica sampled twice as long counts twice;
* ``queue_waiting_peak`` and ``kv_cache_usage_peak``: the largest value any scrape saw;
* ``preemptions``: the sum of every replica's counter increase.

A metric no available replica of the alias exposed is None, and an alias none of whose replicas was available is
None throughout with ``available`` False and the reasons: never zeros. Rounded to 6 digits; the same records in any
order give the same summary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from data_designer.slurm.contracts.records import ReplicaServerSamples, ServerSamplesRecord

_DIGITS = 6


@dataclass(frozen=True)
class ServerSummary:
    """One alias's server-side figures (None: not available, see ``reasons``)."""

    alias: str
    available: bool
    replicas: int
    """Replica series folded in (available ones; the same replica in two attempts counts twice)."""
    scrapes: int
    queue_waiting_mean: float | None
    queue_waiting_peak: float | None
    kv_cache_usage_peak: float | None
    preemptions: float | None
    reasons: tuple[str, ...] = ()
    """Why replicas were not available (distinct, sorted)."""


def server_summary(records: Iterable[ServerSamplesRecord]) -> dict[str, ServerSummary]:
    """Per alias (sorted), the folded figures of every replica of ``records``."""
    by_alias: dict[str, list[ReplicaServerSamples]] = {}
    for record in records:
        for replica in record.replicas:
            by_alias.setdefault(replica.alias, []).append(replica)
    return {alias: _summarize(alias, by_alias[alias]) for alias in sorted(by_alias)}


def servers_total(records: Iterable[ServerSamplesRecord]) -> ServerSummary:
    """Every replica of every alias of ``records`` folded into one summary (``alias`` ``"*"``): a benchmark child's
    server figures, by the same rules as :func:`server_summary`."""
    return _summarize("*", [replica for record in records for replica in record.replicas])


def _summarize(alias: str, replicas: list[ReplicaServerSamples]) -> ServerSummary:
    found = [r.aggregates for r in replicas if r.available and r.aggregates is not None]
    reasons = tuple(sorted({r.reason for r in replicas if not r.available and r.reason}))
    weighted = [(a.waiting_mean, a.scrapes) for a in found if a.waiting_mean is not None and a.scrapes]
    total = sum(n for _, n in weighted)
    mean = _round(math.fsum(m * n for m, n in weighted) / total) if total else None
    return ServerSummary(
        alias=alias,
        available=bool(found),
        replicas=len(found),
        scrapes=sum(a.scrapes for a in found),
        queue_waiting_mean=mean,
        queue_waiting_peak=_peak(a.waiting_peak for a in found),
        kv_cache_usage_peak=_peak(a.kv_usage_peak for a in found),
        preemptions=_total(a.preemptions for a in found),
        reasons=reasons,
    )


def _peak(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _total(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return _round(math.fsum(present)) if present else None


def _round(value: float) -> float:
    return round(value, _DIGITS) + 0.0
