"""What every service call stands on: its resolved context, counted scheduler calls, cluster facts, claim liveness,
and the one classification of a run with an observation (``classify_observed``)."""

from data_designer.slurm.services.context._calls import CountingRunner
from data_designer.slurm.services.context._context import (
    SelectedCluster,
    ServiceContext,
    classify_observed,
    collector_paused,
)
from data_designer.slurm.services.context._facts import DEFAULT_MAX_ARRAY_SIZE, cluster_facts, refuse_misfit
from data_designer.slurm.services.context._liveness import Alive, default_alive
from data_designer.slurm.services.context._status_text import (
    BENCHMARK_COLUMNS,
    RUN_COLUMNS,
    benchmark_rows,
    benchmark_summary,
    counts_text,
    duration_text,
    evidence_text,
    html_table,
    run_rows,
    run_summary,
    safe,
    text_table,
)

__all__ = [
    "BENCHMARK_COLUMNS",
    "DEFAULT_MAX_ARRAY_SIZE",
    "RUN_COLUMNS",
    "Alive",
    "CountingRunner",
    "SelectedCluster",
    "ServiceContext",
    "benchmark_rows",
    "benchmark_summary",
    "classify_observed",
    "cluster_facts",
    "collector_paused",
    "counts_text",
    "default_alive",
    "duration_text",
    "evidence_text",
    "html_table",
    "refuse_misfit",
    "run_rows",
    "run_summary",
    "safe",
    "text_table",
]
