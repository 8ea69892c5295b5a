"""A sweep over test-server settings on the real local Slurm cluster, every call a fresh CLI process (issue 31).

No benchmark axis varies a ``command`` engine's argv (``engine_arg`` is for vLLM deployments), so the sweep is four
single-case benchmarks submitted together, one child each (one shard, one replica), differing only in the test
server's flags:

- fast: ``--latency-s 0.01``; slow: ``--latency-s 0.3``;
- failing: ``--fail-fraction 0.2`` (every fifth request answered 500);
- limited: ``--max-num-seqs 1`` at ``--latency-s 0.4`` while the client sends 4 at once, long enough (about 10 s) for
  the supervisor's 5 s scrapes of ``/metrics`` to find requests waiting.

``benchmark analyze --format json`` of each then shows the failing case infeasible with its error rate and reason,
the slow case's p90 above the fast one's, and queue depth for the limited one; every child attempt wrote
``requests.json`` (the real worker's request evidence).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from data_designer.slurm.contracts import BenchmarkAnalysis, BenchmarkRunResult, BenchmarkStatus
from data_designer.slurm.contracts.records import REQUESTS_SCHEMA
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.testing import writer_run

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
CLI_TIMEOUT_S = 120
WAIT_S = 150.0
ENDED = frozenset({"succeeded", "partial", "failed", "cancelled", "attention"})
CASES: dict[str, tuple[tuple[str, ...], int, int]] = {
    # name: (test-server flags, records, client concurrency)
    "fast": (("--latency-s", "0.01"), 10, 2),
    "slow": (("--latency-s", "0.3"), 10, 2),
    "failing": (("--latency-s", "0.01", "--fail-fraction", "0.2"), 10, 2),
    "limited": (("--latency-s", "0.4", "--max-num-seqs", "1"), 24, 4),
}


def bench_document(name: str, flags: tuple[str, ...], records: int, concurrency: int) -> dict[str, Any]:
    client = {"cpus": 1, "memory_gb": 1, "batch_size": records}
    base = writer_run("base", replicas=1, records=records, server_flags=flags, client=client)
    return {
        "schema_version": 1,
        "name": name,
        "base": {"inline": base},
        "axes": [{"axis": "concurrency", "alias": "writer", "values": [concurrency]}],
        "records": {"policy": "fixed", "records": records},
        "exclusive": False,
    }


def test_a_sweep_over_test_server_settings_explains_itself(
    tmp_path: Path, local_slurm: dict[str, str], e2e: ModuleType
) -> None:
    started = time.monotonic()
    (tmp_path / "home").mkdir()
    profile = e2e.write_profile(tmp_path, local_slurm, sys.executable)
    slurm_env: dict[str, str] = e2e.slurm_env(local_slurm)

    def cli(*words: str) -> subprocess.CompletedProcess[str]:
        argv = (str(DATA_DESIGNER), "slurm", *words, "--profile", str(profile))
        env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
        env.update({**slurm_env, "HOME": str(tmp_path / "home"), "COLUMNS": "200"})
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)

    tag = secrets.token_hex(3)
    benches: dict[str, str] = {}
    run_ids: dict[str, str] = {}
    jobs: list[str] = []
    try:
        for name, (flags, records, concurrency) in CASES.items():
            path = tmp_path / f"{name}.json"
            path.write_text(json.dumps(bench_document(f"ddsweep-{name}-{tag}", flags, records, concurrency)))
            done = cli("benchmark", "run", str(path), "--json")
            assert done.returncode == 0, (done.stdout, done.stderr)
            submitted = BenchmarkRunResult.model_validate_json(done.stdout)
            (child,) = submitted.children
            jobs += list(child.jobs)
            benches[name] = submitted.benchmark_id
            run_ids[name] = str(child.run_id)

        deadline = time.monotonic() + WAIT_S
        pending = set(benches)
        while pending:
            for name in sorted(pending):
                done = cli("benchmark", "status", benches[name], "--json")
                status = BenchmarkStatus.model_validate_json(done.stdout)
                if all(c.state in ENDED for c in status.children):
                    pending.discard(name)
            assert not pending or time.monotonic() < deadline, f"not ended after {WAIT_S}s: {sorted(pending)}"
            time.sleep(2)

        analyses: dict[str, BenchmarkAnalysis] = {}
        for name, bench in benches.items():
            done = cli("benchmark", "analyze", bench, "--format", "json")
            assert done.returncode == 0, (name, done.stdout, done.stderr)
            analyses[name] = BenchmarkAnalysis.model_validate_json(done.stdout)
            (measured,) = analyses[name].children
            assert measured.measured, (name, measured)
            assert measured.attempts, (name, measured)
            for number in measured.attempts:  # the real worker wrote its request evidence
                path = RunLayout.of(tmp_path / "ws", run_ids[name]).requests(0, number)
                assert isinstance(read_record(path, REQUESTS_SCHEMA), RecordOk), (name, path)
        cases = {name: analysis.cases[0] for name, analysis in analyses.items()}
        requests = {name: case.requests for name, case in cases.items()}
        for name, summary in requests.items():
            assert summary is not None, (name, cases[name])
            assert summary.sent > 0, (name, summary)

        failing = cases["failing"]
        assert failing.requests is not None
        assert failing.requests.failed > 0, failing.requests
        assert failing.requests.error_rate is not None
        assert failing.requests.error_rate > 0, failing.requests
        assert not failing.feasible, failing
        assert failing.infeasible_reason is not None
        assert "exceeds max_error_rate 0" in failing.infeasible_reason, failing.infeasible_reason
        assert not failing.best, failing
        assert analyses["failing"].best is None

        fast, slow = requests["fast"], requests["slow"]
        assert fast is not None
        assert slow is not None
        assert fast.failed == slow.failed == 0, (fast, slow)
        assert cases["fast"].feasible
        assert cases["slow"].feasible
        assert fast.latency_p90_s is not None
        assert slow.latency_p90_s is not None
        assert slow.latency_p90_s > fast.latency_p90_s, (slow.latency_p90_s, fast.latency_p90_s)

        limited = cases["limited"]
        assert limited.queue_waiting_peak is not None, analyses["limited"].children
        assert limited.queue_waiting_peak > 0, limited
        assert limited.queue_waiting_mean is not None
        assert limited.kv_cache_usage_peak == 1.0, limited
        assert limited.preemptions == 0, limited
        print(f"sweep: {time.monotonic() - started:.1f} s")
    finally:
        SlurmScheduler(SubprocessRunner(overrides=slurm_env)).cancel(jobs, confirm_timeout_s=60)
