"""``merge_run`` and ``data-designer slurm merge`` against run directories with real Parquet parts (fake Slurm)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import CheckFailedError, MergeResult
from data_designer.slurm.contracts.records import INDEX_COLUMN, IndexRange
from data_designer.slurm.runtime.store import RunLayout
from data_designer.slurm.runtime.testing import (
    FakeSlurm,
    ShardOutcome,
    outcome_cycle,
    register_run_jobs,
    write_run_directory,
)
from data_designer.slurm.services import merge_run

pq: Any = importlib.import_module("pyarrow.parquet")


class Run:
    def __init__(self, root: Path, outcomes: tuple[ShardOutcome, ...]) -> None:
        self.fake = FakeSlurm(accounts=("ddtest",))
        (root / "ws").mkdir()
        pick = outcome_cycle(outcomes)
        self.layout: RunLayout = write_run_directory(
            root / "ws", shards=len(outcomes), outcome=pick, clock=self.fake.clock, parquet_parts=True
        )
        register_run_jobs(self.fake, self.layout, outcome=pick)
        self.ref = str(self.layout.run_dir)

    def merge(self, **kwargs: Any) -> MergeResult:
        return merge_run(self.ref, runner=self.fake, clock=self.fake.clock, environ={}, **kwargs)


def test_a_succeeded_run_merges_without_asking_slurm(tmp_path: Path) -> None:
    run = Run(tmp_path, ("succeeded",) * 3)
    result = run.merge()
    assert result.outcome == "merged"
    assert result.complete
    assert (result.records, result.records_total, result.files, result.parts_read) == (30, 30, 1, 3)
    assert result.merge_dir == str(run.layout.merge_dir / "0001")
    table = pq.read_table(Path(result.merge_dir) / "part-00000.parquet")
    assert table.column(INDEX_COLUMN).to_pylist() == list(range(30))
    assert run.fake.calls == []  # a complete run needs no scheduler
    assert run.merge().outcome == "reused"


def test_shards_not_succeeded_are_refused_with_their_states(tmp_path: Path) -> None:
    run = Run(tmp_path, ("succeeded", "cancelled", "running", "failed_server"))
    with pytest.raises(CheckFailedError) as refused:
        run.merge()
    info = refused.value.info
    assert info.exit_code == 6
    assert info.code == "run_incomplete"
    assert "3 of 4 shard(s) are not succeeded" in info.message
    assert "1 (cancelled, cancelled)" in info.message
    assert "2 (running" in info.message
    assert "3 (failed, server_failed_to_start)" in info.message
    assert "wait for them" in (info.hint or "")  # a running shard: waiting is the fix
    assert not run.layout.merge_dir.exists()


def test_allow_partial_records_exactly_the_ranges_status_reports_missing(tmp_path: Path) -> None:
    run = Run(tmp_path, ("succeeded", "partial", "succeeded"))
    from data_designer.slurm.services import run_status

    status = run_status(run.ref, runner=run.fake, clock=run.fake.clock, environ={})
    expected = tuple(r for s in status.shards for r in s.missing)
    result = run.merge(allow_partial=True)
    assert not result.complete
    assert result.missing == expected == (IndexRange(15, 20),)
    assert result.missing_shards == (1,)
    assert result.records == 25


def test_cli_merge_json_human_and_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run(tmp_path, ("succeeded", "partial"))
    import data_designer.slurm.services as services

    def patched(ref: str, **kwargs: Any) -> MergeResult:
        kwargs.pop("profile"), kwargs.pop("cluster")
        return merge_run(ref, runner=run.fake, clock=run.fake.clock, environ={}, **kwargs)

    monkeypatch.setattr(services, "merge_run", patched)
    refused = CliRunner().invoke(app, ["merge", run.ref, "--json"])
    assert refused.exit_code == 6
    assert json.loads(refused.stderr)["code"] == "run_incomplete"
    out = tmp_path / "out"
    merged = CliRunner().invoke(
        app,
        ["merge", run.ref, "--allow-partial", "--output", str(out), "--max-rows-per-file", "4", "--drop-provenance"],
    )
    assert merged.exit_code == 0, merged.stderr
    assert "merged: 15/20 records in 4 file(s)" in merged.stdout
    assert "partial: missing indices 15-19 (shard(s) 1)" in merged.stdout
    assert pq.read_table(out / "part-00000.parquet").column_names == ["a"]
    again = CliRunner().invoke(
        app,
        [
            "merge",
            run.ref,
            "--allow-partial",
            "--output",
            str(out),
            "--json",
            "--max-rows-per-file",
            "4",
            "--drop-provenance",
        ],
    )
    assert again.exit_code == 0
    assert json.loads(again.stdout)["outcome"] == "reused"
    taken = CliRunner().invoke(app, ["merge", run.ref, "--allow-partial", "--output", str(out), "--json"])
    assert taken.exit_code == 4  # other options: other files; the directory is not empty
    assert json.loads(taken.stderr)["code"] == "output_exists"


def test_cli_merge_of_a_missing_run_exits_3(tmp_path: Path) -> None:
    missing = tmp_path / "ws" / "runs" / "reviews-20260101T000000Z-abcdef"
    result = CliRunner().invoke(app, ["merge", str(missing), "--json"])
    assert result.exit_code == 3
    assert json.loads(result.stderr)["code"] == "run_not_found"
