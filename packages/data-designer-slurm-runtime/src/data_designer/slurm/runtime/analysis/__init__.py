"""The benchmark analysis: pure measurement of children's validated evidence (``analyze``) and its encodings."""

from data_designer.slurm.runtime.analysis._analyze import (
    DIGITS,
    AttemptEvidence,
    Capacity,
    ChildEvidence,
    analyze,
    evidence_digest,
    summarize,
)
from data_designer.slurm.runtime.analysis._encode import (
    CSV_HEADER,
    REQUEST_COLUMNS,
    SERVER_COLUMNS,
    STAT_METRICS,
    analysis_csv,
    analysis_json,
)
from data_designer.slurm.runtime.analysis._server import ServerSummary, server_summary, servers_total

__all__ = [
    "CSV_HEADER",
    "DIGITS",
    "REQUEST_COLUMNS",
    "SERVER_COLUMNS",
    "STAT_METRICS",
    "AttemptEvidence",
    "Capacity",
    "ChildEvidence",
    "ServerSummary",
    "analysis_csv",
    "analysis_json",
    "analyze",
    "evidence_digest",
    "server_summary",
    "servers_total",
    "summarize",
]
