"""Per-request evidence of the client worker: a bounded record of counts and fixed-bucket histograms.

``RequestRecorder`` is what each alias's router feeds (one call per request, constant memory); the pure functions
merge histograms and aliases (exact integer arithmetic: associative and order-independent) and read percentiles
off a histogram with the bucket error stated (``contracts.records.LATENCY_RELATIVE_ERROR``). The record is
``requests.json`` (``contracts.records.RequestEvidence``), written through ``store.AttemptWriter.write_requests``.
"""

from data_designer.slurm.runtime.requests._histogram import (
    PERCENTILES,
    completion_tokens,
    latency_bucket,
    merge_aliases,
    merge_histograms,
    percentile_us,
    status_counts,
)
from data_designer.slurm.runtime.requests._recorder import Outcome, RequestRecorder

__all__ = [
    "PERCENTILES",
    "Outcome",
    "RequestRecorder",
    "completion_tokens",
    "latency_bucket",
    "merge_aliases",
    "merge_histograms",
    "percentile_us",
    "status_counts",
]
