"""Damaged parts through the services and the CLI: ``status`` (cheap check), ``status --verify``, ``retry`` of the
damaged ranges (parts set aside, named in the intent), and the degraded-evidence summary.

A succeeded three-shard run from ``runtime.testing.write_run_directory``, its jobs in the fake Slurm.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import ConflictError, RetryResult, RunStatus
from data_designer.slurm.contracts.records import RETRY_SCHEMA, IndexRange
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.testing import FakeSlurm, register_run_jobs, write_run_directory
from data_designer.slurm.services import retry_run, run_status

PART = "shards/00001/attempts/0001/output/part-00000.parquet"
LOST = IndexRange(10, 20)


class Run:
    def __init__(self, root: Path) -> None:
        self.fake = FakeSlurm(accounts=("ddtest",))
        (root / "ws").mkdir()
        self.layout: RunLayout = write_run_directory(root / "ws", shards=3, clock=self.fake.clock)
        register_run_jobs(self.fake, self.layout)
        self.ref = str(self.layout.run_dir)
        self.part = self.layout.run_dir / PART

    def status(self, **kwargs: Any) -> RunStatus:
        return run_status(self.ref, runner=self.fake, clock=self.fake.clock, environ={}, **kwargs)

    def retry(self, **kwargs: Any) -> RetryResult:
        return retry_run(self.ref, runner=self.fake, clock=self.fake.clock, environ={}, **kwargs)

    def flip(self) -> None:
        data = bytearray(self.part.read_bytes())
        data[len(data) // 2] ^= 0x01
        self.part.write_bytes(bytes(data))

    def cli(self, *args: str) -> tuple[int, str, str]:
        import data_designer.slurm.services as services

        def patched_status(ref: str, **kwargs: Any) -> RunStatus:
            kwargs.pop("profile"), kwargs.pop("cluster")
            return run_status(ref, runner=self.fake, clock=self.fake.clock, environ={}, **kwargs)

        def patched_retry(ref: str, **kwargs: Any) -> RetryResult:
            kwargs.pop("profile"), kwargs.pop("cluster")
            return retry_run(ref, runner=self.fake, clock=self.fake.clock, environ={}, **kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(services, "run_status", patched_status)
            patch.setattr(services, "retry_run", patched_retry)
            result = CliRunner().invoke(app, list(args))
        return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)


def intent(run: Run, generation: int = 1) -> Any:
    found = read_record(run.layout.retry_intent(generation), RETRY_SCHEMA)
    assert isinstance(found, RecordOk)
    return found.payload


def test_a_deleted_part_makes_the_shard_damaged_in_every_status_and_retry_regenerates_exactly_its_range(
    run: Run,
) -> None:
    run.part.unlink()
    status = run.status()
    assert (status.state, status.records_done) == ("damaged", 20)
    shard = status.shards[1]
    assert (shard.state, shard.reason, shard.missing) == ("damaged", "part_missing", (LOST,))

    dry = run.retry(dry_run=True)
    assert [(s.shard, s.state, s.ranges) for s in dry.shards] == [(1, "damaged", (LOST,))]
    assert not run.layout.retries_dir.exists()

    result = run.retry()
    assert (result.generation, result.records) == (1, 10)
    (aside,) = intent(run).shards[0].set_aside
    assert (aside.damage.path, aside.damage.problem, aside.moved_to) == (PART, "missing", None)
    assert run.status().shards[1].state == "pending"  # the retry's task holds it


def test_a_flipped_byte_is_found_by_verify_and_retry_of_the_named_shard_sets_the_part_aside(run: Run) -> None:
    run.flip()
    assert run.status().state == "succeeded"  # the cheap check cannot see it
    verified = run.status(verify=True, workers=2)
    assert verified.verify is not None
    assert (verified.verify.parts, verified.verify.damaged) == (3, 1)
    assert (verified.shards[1].state, verified.shards[1].reason) == ("damaged", "part_sha256")
    assert run.retry().shards == ()  # unnamed and unverified: nothing to retry

    corrupt = run.part.read_bytes()
    result = run.retry(shards=[1])
    assert [(s.shard, s.state, s.ranges) for s in result.shards] == [(1, "damaged", (LOST,))]
    (aside,) = result.shards[0].set_aside
    assert aside.moved_to == f"set-aside/0001/{PART}"
    assert intent(run).shards[0].set_aside == (aside,)
    assert not run.part.exists()
    assert (run.layout.run_dir / aside.moved_to).read_bytes() == corrupt


def test_retry_verify_finds_every_damaged_shard_and_a_healthy_named_shard_is_still_refused(run: Run) -> None:
    run.flip()
    with pytest.raises(ConflictError) as refused:
        run.retry(shards=[0])
    assert "shard 0 already succeeded" in refused.value.info.message
    result = run.retry(verify=True, dry_run=True)
    assert [s.shard for s in result.shards] == [1]
    assert run.part.exists()  # a dry run moves nothing


def test_cli_status_verify_names_the_part_and_check_exits_6(run: Run) -> None:
    run.flip()
    code, out, _ = run.cli("status", run.ref, "--verify", "--check")
    assert code == 6
    assert "damaged" in out
    assert "verified 3 part(s)" in out
    assert "1 damaged" in out
    assert "--shard 1" in out
    code, out, _ = run.cli("status", run.ref, "--verify", "--json")
    shown = json.loads(out)
    assert shown["verify"]["damaged"] == 1
    assert shown["shards"][1]["damaged"][0]["problem"] == "sha256"
    code, out, _ = run.cli("retry", run.ref, "--shard", "1")
    assert code == 0
    assert f"set aside {PART} -> set-aside/0001/{PART}" in out


def test_cli_status_names_a_failed_sacct_and_what_it_hides(run: Run) -> None:
    run.fake.fail("sacct")
    code, out, _ = run.cli("status", run.ref)
    assert code == 0  # every shard's verdict stands on its manifests
    assert "scheduler evidence live, partial: sacct failed" in out
    assert "jobs that ended and left squeue" in out
    assert "no shard's state depends on it now" in out
