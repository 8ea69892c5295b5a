"""Server-side samples on the local Slurm cluster: a real run whose one test-server replica runs one request at a time
(``--max-num-seqs 1``) while the client sends four at once, so vLLM's ``vllm:num_requests_waiting`` is above zero in
the ``server-metrics.json`` the supervisor recorded, and the per-alias summary says so."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from data_designer.slurm.contracts.records import SERVER_METRICS_SCHEMA
from data_designer.slurm.runtime.analysis import server_summary
from data_designer.slurm.runtime.testing import writer_run

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_a_queue_behind_max_num_seqs_1_is_in_the_recorded_samples(
    tmp_path: Path, local_slurm: dict[str, str], e2e: ModuleType
) -> None:
    # 30 requests of 0.5 s one at a time: ~15 s of generation, so the scrapes at 5 s and 10 s find 3 waiting
    flags = ("--max-num-seqs", "1", "--latency-s", "0.5")
    client = {"cpus": 1, "memory_gb": 1, "concurrency": {"writer": 4}, "batch_size": 30}
    run = writer_run("metrics", server_flags=flags, records=30, replicas=1, client=client)
    finished = e2e.execute_and_wait(tmp_path, local_slurm, run, sys.executable)

    assert finished.statuses[0].status == "succeeded", finished.diagnosis()
    record = finished.read(finished.layout.server_metrics(0, 1), SERVER_METRICS_SCHEMA)
    assert record.finished
    (replica,) = record.replicas
    assert replica.available, (replica.reason, finished.diagnosis())
    assert replica.aggregates is not None
    assert replica.aggregates.scrapes >= 2, finished.diagnosis()
    assert any((s.waiting or 0) > 0 for s in replica.samples), replica.samples
    assert all(s.running is not None and s.running <= 1 for s in replica.samples)
    assert replica.aggregates.kv_usage_peak == 1.0  # one running of --max-num-seqs 1: the whole cache
    assert replica.aggregates.preemptions == 0.0
    summary = server_summary([record])["writer"]
    assert summary.queue_waiting_peak is not None
    assert summary.queue_waiting_peak > 0
    assert summary.queue_waiting_mean is not None
    assert summary.queue_waiting_mean > 0
