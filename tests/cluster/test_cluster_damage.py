"""Damage and degradation on the real local Slurm cluster, each command a fresh ``data-designer`` process.

- A succeeded 3-shard run loses one part (deleted), then another gets one byte flipped: ``status`` (the cheap
  check) and ``status --verify`` show the shard ``damaged`` with its range, ``merge`` refuses naming ``retry
  --shard N``, ``retry`` regenerates exactly that range (the flipped part set aside, never deleted), and ``merge``
  then holds every index once.
- A node set DOWN (``scontrol update state=down``) under a running shard: the shard is ``failed`` / ``node_fail``
  naming the node, and ``retry`` completes the run.
- slurmdbd stopped (``scripts/local-slurm stop slurmdbd``) after a run ended: ``status`` names sacct as the
  missing source and what it hides; ``--check`` exits 5 for a run whose verdict depends on it (a job cancelled
  before it started, gone from squeue) and 0 for one whose manifests decide it.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from data_designer.slurm.contracts import ExecuteResult, MergeResult, RetryResult, RunStatus, WaitResult
from data_designer.slurm.contracts.records import ATTEMPT_SCHEMA, INDEX_COLUMN, PROGRESS_SCHEMA, RETRY_SCHEMA
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.testing import run_logs, writer_run

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

pq: Any = importlib.import_module("pyarrow.parquet")
DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
LOCAL_SLURM = Path(__file__).resolve().parents[2] / "scripts" / "local-slurm"
WAIT_S = 180
CLIENT = {"cpus": 1, "memory_gb": 1, "batch_size": 1, "concurrency": {"writer": 1}}
SUBMISSION = {"time_limit": "00:10:00", "warning_lead_s": 60, "drain_grace_s": 10}


@dataclass
class Call:
    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return f"{' '.join(self.argv)}: exit {self.code}\n{self.stdout}\n{self.stderr}"


@dataclass
class Run:
    directory: Path
    layout: RunLayout
    result: ExecuteResult
    slurm_env: dict[str, str]

    def cli(self, verb: str, *flags: str) -> Call:
        profile = str(self.directory / "profile.yaml")
        argv = (str(DATA_DESIGNER), "slurm", verb, self.result.run_id, "--profile", profile, *flags)
        env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
        env.update({**self.slurm_env, "HOME": str(self.directory / "home"), "COLUMNS": "250"})
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=WAIT_S + 120, check=False)
        return Call(argv, done.returncode, done.stdout, done.stderr)

    def status(self, *flags: str) -> RunStatus:
        call = self.cli("status", "--json", *flags)
        assert call.code in (0, 5), call.describe()
        return RunStatus.model_validate_json(call.stdout)

    def wait(self) -> RunStatus:
        call = self.cli("wait", "--timeout", str(WAIT_S), "--interval", "1", "--json")
        assert call.stdout, call.describe()
        return WaitResult.model_validate_json(call.stdout).status

    def retry(self, *flags: str) -> RetryResult:
        call = self.cli("retry", "--json", *flags)
        assert call.code == 0, call.describe() + run_logs(self.layout, tail_chars=1500)
        return RetryResult.model_validate_json(call.stdout)

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert time.monotonic() < deadline, f"{what} not within {timeout_s:.0f}s\n{run_logs(self.layout)}"
            time.sleep(0.5)

    def merged_indices(self, output: Path) -> list[int]:
        call = self.cli("merge", "--output", str(output), "--json")
        assert call.code == 0, call.describe()
        merged = MergeResult.model_validate_json(call.stdout)
        assert merged.complete, merged
        files = sorted(Path(output).glob("*.parquet"))
        return [i for path in files for i in pq.read_table(path, columns=[INDEX_COLUMN]).column(0).to_pylist()]


def execute(e2e: ModuleType, root: Path, local_slurm: dict[str, str], run: dict[str, Any]) -> Run:
    layout, result = e2e.execute(root, local_slurm, run, sys.executable)
    return Run(root, layout, result, e2e.slurm_env(local_slurm))


def slurm(local_slurm: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **local_slurm}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def succeeded(tmp_path_factory: pytest.TempPathFactory, local_slurm: dict[str, str], e2e: ModuleType) -> Run:
    run = execute(
        e2e,
        tmp_path_factory.mktemp("damage"),
        local_slurm,
        writer_run(
            "damaged", records=12, shards=3, replicas=1, gpus_per_replica=0, client=CLIENT, submission=SUBMISSION
        ),
    )
    ended = run.wait()
    assert ended.state == "succeeded", ended.model_dump_json(indent=1) + run_logs(run.layout)
    return run


def test_a_deleted_then_a_flipped_part_is_damaged_retried_exactly_and_merged_once(succeeded: Run) -> None:
    run = succeeded
    lost = run.layout.output_part(0, 1, 0)
    lost.unlink()
    status = run.status()
    shard = status.shards[0]
    assert (status.state, shard.state, shard.reason) == ("damaged", "damaged", "part_missing")
    (damage,) = shard.damaged
    assert (damage.path, tuple(damage.range)) == (str(lost.relative_to(run.layout.run_dir)), (0, 1))
    assert [tuple(r) for r in shard.missing] == [(0, 1)]  # one record a part (batch_size 1): exactly the lost one
    refused = run.cli("merge", "--json")
    assert refused.code == 6, refused.describe()
    assert f"retry {run.result.run_id} --shard 0" in json.loads(refused.stderr)["hint"]

    retried = run.retry()
    assert [(s.shard, [tuple(r) for r in s.ranges]) for s in retried.shards] == [(0, [(0, 1)])]
    assert run.wait().state == "succeeded"
    assert run.merged_indices(run.directory / "merged-1") == list(range(12))
    assignment = read_record(run.layout.attempt_record(0, 2), ATTEMPT_SCHEMA)
    assert isinstance(assignment, RecordOk)
    assert [tuple(r) for r in assignment.payload.assigned or ()] == [(0, 1)]

    corrupt = run.layout.output_part(2, 1, 0)
    flip(corrupt)
    assert run.status().state == "succeeded"  # the cheap check cannot see a flipped byte
    verified = run.status("--verify")
    assert verified.verify is not None
    assert verified.verify.damaged == 1
    assert (verified.shards[2].state, verified.shards[2].reason) == ("damaged", "part_sha256")
    assert [tuple(r) for r in verified.shards[2].missing] == [(8, 9)]
    bytes_before = corrupt.read_bytes()
    retried = run.retry("--shard", "2")
    (aside,) = retried.shards[0].set_aside
    assert aside.moved_to is not None
    assert (run.layout.run_dir / aside.moved_to).read_bytes() == bytes_before  # set aside, never deleted
    intent = read_record(run.layout.retry_intent(retried.generation or 0), RETRY_SCHEMA)
    assert isinstance(intent, RecordOk)
    assert intent.payload.shards[0].set_aside == (aside,)
    assert run.wait().state == "succeeded"
    assert run.status("--verify").verify.damaged == 0  # type: ignore[union-attr]
    assert run.merged_indices(run.directory / "merged-2") == list(range(12))


@pytest.fixture
def down_node(local_slurm: dict[str, str]) -> Iterator[list[str]]:
    nodes: list[str] = []
    yield nodes
    for node in nodes:
        slurm(local_slurm, "scontrol", "update", f"nodename={node}", "state=resume")


def test_a_node_set_down_under_a_running_shard_is_failed_node_fail_and_retry_completes(
    tmp_path: Path, local_slurm: dict[str, str], e2e: ModuleType, down_node: list[str]
) -> None:
    document = writer_run(
        "nodedown",
        records=8,
        shards=2,
        replicas=1,
        gpus_per_replica=0,
        server_flags=("--latency-s", "1.5"),
        client=CLIENT,
        submission=SUBMISSION,
    )
    run = execute(e2e, tmp_path, local_slurm, document)

    def generating() -> bool:
        progress = read_record(run.layout.progress(0, 1), PROGRESS_SCHEMA)
        return isinstance(progress, RecordOk) and progress.payload.records_done >= 1

    run.wait_for("shard 0's first record", generating)
    record = read_record(run.layout.attempt_record(0, 1), ATTEMPT_SCHEMA)
    assert isinstance(record, RecordOk)
    node = record.payload.nodes[0]
    down_node.append(node)
    done = slurm(local_slurm, "scontrol", "update", f"nodename={node}", "state=down", "reason=ddslurm-damage-test")
    assert done.returncode == 0, done.stderr
    ended = run.wait()
    shard = ended.shards[0]
    assert (shard.state, shard.reason) == ("failed", "node_fail"), shard.model_dump_json(indent=1)
    assert node in (shard.message or ""), shard.message
    slurm(local_slurm, "scontrol", "update", f"nodename={node}", "state=resume")
    down_node.clear()

    retried = run.retry()
    assert 0 in [s.shard for s in retried.shards]
    final = run.wait()
    assert final.state == "succeeded", final.model_dump_json(indent=1) + run_logs(run.layout)


@pytest.fixture
def accounting_down(local_slurm: dict[str, str]) -> Iterator[Callable[[], None]]:
    def stop() -> None:
        done = subprocess.run([str(LOCAL_SLURM), "stop", "slurmdbd"], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr

    try:
        yield stop
    finally:
        done = subprocess.run(
            [str(LOCAL_SLURM), "start", "slurmdbd"], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr


def test_with_slurmdbd_stopped_status_names_sacct_and_check_exits_5_when_the_verdict_needs_it(
    succeeded: Run,
    tmp_path: Path,
    local_slurm: dict[str, str],
    e2e: ModuleType,
    accounting_down: Callable[[], None],
) -> None:
    later = dict(SUBMISSION, sbatch_options=["--begin=now+1hour"])  # it never starts: cancelled while pending
    held = execute(
        e2e,
        tmp_path,
        local_slurm,
        writer_run("unseen", records=2, shards=1, replicas=1, gpus_per_replica=0, client=CLIENT, submission=later),
    )
    cancelled = held.cli("cancel", "--json")
    assert cancelled.code == 0, cancelled.describe()
    gone = float(local_slurm.get("DDSLURM_MIN_JOB_AGE", "10")) + 5
    time.sleep(gone)  # past MinJobAge: squeue no longer shows it, only sacct can
    accounting_down()

    call = held.cli("status")
    assert call.code == 5, call.describe()
    assert "partial: sacct failed" in call.stdout
    assert "jobs that ended and left squeue" in call.stdout
    assert "shard(s) 0 depend on it" in call.stdout
    assert held.cli("status", "--check").code == 5
    shown = held.status()
    assert [(d.source, d.shards) for d in shown.degraded] == [("sacct", (0,))]

    decided = succeeded.cli("status", "--check")  # its manifests decide it: sacct is not needed
    assert decided.code == 0, decided.describe()
    assert "partial: sacct failed" in decided.stdout
    assert "no shard's state depends on it now" in decided.stdout
