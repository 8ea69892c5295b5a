"""The allocation supervisor: runs one shard's attempt inside its Slurm allocation (see ``_main``).

``python -m data_designer.slurm.runtime.supervisor --plan plan.json`` is what every batch script execs. The
records it writes are in :mod:`data_designer.slurm.contracts.records`.
"""

from data_designer.slurm.runtime.supervisor._attempt import DEFAULT_POLL_S
from data_designer.slurm.runtime.supervisor._client_ending import client_failure_message, read_client_error
from data_designer.slurm.runtime.supervisor._containers import LAUNCHER_FILE
from data_designer.slurm.runtime.supervisor._heartbeat import DEFAULT_HEARTBEAT_S
from data_designer.slurm.runtime.supervisor._main import main
from data_designer.slurm.runtime.supervisor._replicas import LOOPBACK, bind_host, log_step, step_name
from data_designer.slurm.runtime.supervisor._server_metrics import (
    SCRAPE_INTERVAL_S,
    MetricsReading,
    MetricsUnavailable,
    SampleSeries,
    ScrapeTarget,
    ServerScraper,
    fetch_metrics,
    metrics_url,
    parse_metrics,
)

__all__ = [
    "DEFAULT_HEARTBEAT_S",
    "DEFAULT_POLL_S",
    "LAUNCHER_FILE",
    "LOOPBACK",
    "SCRAPE_INTERVAL_S",
    "MetricsReading",
    "MetricsUnavailable",
    "SampleSeries",
    "ScrapeTarget",
    "ServerScraper",
    "bind_host",
    "client_failure_message",
    "fetch_metrics",
    "log_step",
    "main",
    "metrics_url",
    "parse_metrics",
    "read_client_error",
    "step_name",
]
