"""``data-designer slurm benchmark analyze`` on the real local Slurm cluster, every call a fresh CLI process.

A benchmark of 8 children (concurrency 1 and 2 by replicas 1 and 2 of the test server, 2 repeats, 4 records a
child, ``max_concurrent_children: 4``: children 4-7 wait for 0-3 in their dependency lanes) lives through three
troubles at once:

- failed at start: every server gets ``--fail-once-at-start CLAIM`` (one path for the whole benchmark), so the
  first server to start, in one of children 0-3, exits at start; every later server (its retry too) serves;
- held: child 7 (no lane successor) is held with ``scontrol hold`` right after ``benchmark run`` returns, while
  its dependency still keeps it pending;
- cancelled while running: the first of children 4-6 whose supervisor has started is cancelled with
  ``data-designer slurm cancel RUN`` (by then the claim is taken: its lane predecessor's servers started).

Once every other child ended, ``benchmark analyze --format json`` lists the failed, cancelled and held children with
their state and why, ranks exactly the cases whose children all succeeded, and ``--check`` exits 6 with the table
naming every case not ranked. After ``retry`` of the failed and cancelled runs and ``scontrol release`` of the held
job, ``analyze --check`` exits 0: every case ranked from validated evidence, the retried children measured over
their contributing attempts.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from data_designer.slurm.contracts import (
    BenchmarkAnalysis,
    BenchmarkRunResult,
    BenchmarkStatus,
    CancelResult,
    RetryResult,
)
from data_designer.slurm.contracts.records import ATTEMPT_SCHEMA
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.testing import writer_run

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
CHILDREN = 8
CAP = 4
HELD = 7
CANCEL_CANDIDATES = (4, 5, 6)
CLI_TIMEOUT_S = 120
WAIT_S = 150.0
EXIT_CHECK_FAILED = 6
ENDED = frozenset({"succeeded", "partial", "failed", "cancelled", "attention"})


def bench_document(name: str, claim: Path) -> dict[str, Any]:
    """Two axes (2 x 2 cases), 2 repeats; one answer a second per request keeps a child running for seconds."""
    flags = ("--fail-once-at-start", str(claim), "--latency-s", "1")
    return {
        "schema_version": 1,
        "name": name,
        "base": {"inline": writer_run("base", replicas=1, records=4, server_flags=flags)},
        "axes": [
            {"axis": "concurrency", "alias": "writer", "values": [1, 2]},
            {"axis": "replicas", "alias": "writer", "values": [1, 2]},
        ],
        "repeats": 2,
        "records": {"policy": "fixed", "records": 4},
        "max_concurrent_children": CAP,
    }


@dataclass
class Call:
    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return f"{' '.join(self.argv)}: exit {self.code}\n{self.stdout}\n{self.stderr}"


@dataclass
class Workdir:
    """A profile for the local cluster and a HOME; the CLI run as a user runs it."""

    directory: Path
    local_slurm: Mapping[str, str]
    e2e: ModuleType
    profile: Path = field(init=False)

    def __post_init__(self) -> None:
        (self.directory / "home").mkdir(parents=True, exist_ok=True)
        self.profile = self.e2e.write_profile(self.directory, self.local_slurm, sys.executable)

    def slurm_env(self) -> dict[str, str]:
        env: dict[str, str] = self.e2e.slurm_env(self.local_slurm)
        return env

    def cli(self, *words: str) -> Call:
        argv = (str(DATA_DESIGNER), "slurm", *words, "--profile", str(self.profile))
        env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
        env.update({**self.slurm_env(), "HOME": str(self.directory / "home"), "COLUMNS": "200"})
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)
        return Call(argv, done.returncode, done.stdout, done.stderr)

    def scontrol(self, *words: str) -> None:
        done = SubprocessRunner(overrides=self.slurm_env()).run(["scontrol", *words], timeout_s=30)
        assert done.ok, done.describe()

    def analyze(self, bench: str, *flags: str) -> tuple[Call, BenchmarkAnalysis]:
        call = self.cli("benchmark", "analyze", bench, "--format", "json", *flags)
        assert call.stdout.strip(), call.describe()
        return call, BenchmarkAnalysis.model_validate_json(call.stdout)

    def status(self, bench: str) -> BenchmarkStatus:
        call = self.cli("benchmark", "status", bench, "--json")
        assert call.code in (0, EXIT_CHECK_FAILED), call.describe()
        return BenchmarkStatus.model_validate_json(call.stdout)

    def wait(self, bench: str, until: str, done: Any) -> BenchmarkStatus:
        """``benchmark status`` every 2 s until ``done(status)`` (bounded by :data:`WAIT_S`)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            status = self.status(bench)
            if done(status):
                return status
            states = {child.index: child.state for child in status.children}
            assert time.monotonic() < deadline, f"not {until} after {WAIT_S}s: {states}"
            time.sleep(2)


def supervisor_started(workspace: Path, run_id: str) -> bool:
    """The child's first attempt has its record: the allocation runs and the supervisor started serving."""
    found = read_record(RunLayout.of(workspace, run_id).attempt_record(0, 1), ATTEMPT_SCHEMA)
    return isinstance(found, RecordOk)


def test_analyze_lists_a_failed_a_cancelled_and_a_held_child_then_is_complete_after_retry_and_release(
    tmp_path: Path, local_slurm: dict[str, str], e2e: ModuleType
) -> None:
    workdir = Workdir(tmp_path, local_slurm, e2e)
    claim = tmp_path / "start.claim"
    bench_file = tmp_path / "bench.json"
    bench_file.write_text(json.dumps(bench_document(f"ddanalyze-{secrets.token_hex(3)}", claim)), encoding="utf-8")

    call = workdir.cli("benchmark", "run", str(bench_file), "--json")
    assert call.code == 0, call.describe()
    submitted = BenchmarkRunResult.model_validate_json(call.stdout)
    jobs = [job for child in submitted.children for job in child.jobs]
    children = {child.index: child for child in submitted.children}
    bench = submitted.benchmark_id
    try:
        assert submitted.counts == {"submitted": CHILDREN}, submitted.counts
        assert children[HELD].after, "the held child still waits for its lane predecessor"
        assert not any(children[HELD].jobs[0] in child.after for child in submitted.children), "no successor"
        workdir.scontrol("hold", children[HELD].jobs[0])

        # Cancel the first of children 4-6 seen running (its predecessor's servers took the claim already).
        workspace = tmp_path / "ws"
        deadline = time.monotonic() + WAIT_S
        cancelled = None
        while cancelled is None:
            cancelled = next(
                (i for i in CANCEL_CANDIDATES if supervisor_started(workspace, str(children[i].run_id))), None
            )
            assert cancelled is not None or time.monotonic() < deadline, "no child of 4-6 started"
            time.sleep(0.5)
        cancel = workdir.cli("cancel", str(children[cancelled].run_id), "--json")
        assert cancel.code == 0, cancel.describe()
        cancel_result = CancelResult.model_validate_json(cancel.stdout)
        assert cancel_result.confirmed, cancel.describe()
        assert cancel_result.targets, cancel.describe()
        assert not cancel_result.already_ended, "cancelled while running"
        assert claim.exists(), "a server started before any child of 4-6 did"

        status = workdir.wait(
            bench,
            "ended but the held child",
            lambda s: all(c.state in ENDED for c in s.children if c.index != HELD),
        )
        states = {child.index: child.state for child in status.children}
        failed = [index for index, state in states.items() if state == "failed"]
        assert len(failed) == 1, states
        assert failed[0] < CAP, states
        expected = dict.fromkeys(range(CHILDREN), "succeeded") | {
            failed[0]: "failed",
            cancelled: "cancelled",
            HELD: "pending",
        }
        assert states == expected, status.model_dump_json(indent=1)

        # The first analysis: each trouble listed with its state and why; only complete cases ranked.
        first_call, first = workdir.analyze(bench)
        assert first_call.code == 0, first_call.describe()
        assert not first.complete
        by_index = {child.index: child for child in first.children}
        assert {i: c.state for i, c in by_index.items()} == expected
        for index in (failed[0], cancelled, HELD):
            child = by_index[index]
            assert not child.measured, child
            assert child.reason, child
            assert child.records is None, child
            assert child.records_per_s is None, child
        assert "Held" in str(by_index[HELD].reason), by_index[HELD]
        troubled = {index // 2 for index in (failed[0], cancelled, HELD)}  # case = index // repeats
        ranked = {case.case_index for case in first.cases if case.complete}
        assert ranked == set(range(CHILDREN // 2)) - troubled, first.model_dump_json(indent=1)
        for case in first.cases:
            if case.case_index in troubled:
                assert not case.pareto, case
                assert not case.best, case
                assert case.reason is not None, case
                for index in (failed[0], cancelled, HELD):
                    if index // 2 == case.case_index:
                        assert f"child {index} ({expected[index]})" in case.reason, case.reason
            else:
                assert case.records_per_s.n == 2, case
                assert case.records_per_s.mean, case
        assert set(first.pareto) <= ranked, first.pareto
        assert first.best in ranked, first.best

        check = workdir.cli("benchmark", "analyze", bench, "--check")
        assert check.code == EXIT_CHECK_FAILED, check.describe()
        assert "Not ranked:" in check.stdout, check.stdout
        for case_index in sorted(troubled):
            assert f"  case {case_index} (" in check.stdout.split("Not ranked:")[1], check.stdout
        print(check.stdout)

        # Retry the failed and the cancelled child, release the held one: the analysis becomes complete.
        for index in (failed[0], cancelled):
            retry = workdir.cli("retry", str(children[index].run_id), "--json")
            assert retry.code == 0, retry.describe()
            retried_jobs = RetryResult.model_validate_json(retry.stdout).jobs
            assert retried_jobs, retry.describe()
            jobs += [job.job_id for job in retried_jobs]
        workdir.scontrol("release", children[HELD].jobs[0])
        workdir.wait(bench, "succeeded", lambda s: all(c.state in ENDED for c in s.children))

        final_call, final = workdir.analyze(bench, "--check")
        assert final_call.code == 0, final_call.describe()
        assert final.complete, final.model_dump_json(indent=1)
        assert all(child.measured and child.state == "succeeded" for child in final.children), final.children
        assert all(case.complete for case in final.cases), final.cases
        assert final.best is not None, final
        assert final.pareto, final
        retried = {child.index: child.attempts for child in final.children if child.index in (failed[0], cancelled)}
        assert retried[failed[0]] == (2,), retried  # the attempt that failed at start published nothing
        assert max(retried[cancelled]) == 2, retried
        assert final.evidence_digest != first.evidence_digest
        again_call, _ = workdir.analyze(bench, "--no-refresh")
        assert again_call.code == 0, again_call.describe()
        assert again_call.stdout == final_call.stdout, "the same evidence gives the same bytes"
    finally:
        SlurmScheduler(SubprocessRunner(overrides=workdir.slurm_env())).cancel(jobs, confirm_timeout_s=60)
