"""``merge --compact``: a run of 160 records in 32 parts of 5 rows re-encoded into analytics-sized row groups.

The default merge splices the parts' 5-row row groups as they are; ``--compact`` re-encodes the same rows (same
schema, same provenance columns, every part checked the same way) into row groups of ``--row-group-rows`` within
files of at most ``--max-rows-per-file`` rows. The manifest and the summary line state the layout; a reused merge
has the layout asked for; bad sizes are refused before the run is read (exit 2).
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any, get_type_hints

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.cli._merge_commands import render_merge
from data_designer.slurm.contracts import (
    DEFAULT_ROW_GROUP_ROWS,
    MAX_ROW_GROUP_ROWS,
    ConflictError,
    InvalidInputError,
    MergeLayout,
    MergeResult,
)
from data_designer.slurm.contracts.records import MERGE_JOB_SCHEMA, MERGE_MANIFEST_SCHEMA, MergeManifest
from data_designer.slurm.planner import ProfileTemplate, render_profile
from data_designer.slurm.runtime.store import RecordOk, RunLayout, merge_jobs_dir, read_record
from data_designer.slurm.runtime.testing import FakeSlurm, register_run_jobs, write_run_directory
from data_designer.slurm.services import merge_run

pq: Any = importlib.import_module("pyarrow.parquet")
SHARDS = 32
PER_SHARD = 5
RECORDS = SHARDS * PER_SHARD


class Run:
    """160 records in 32 succeeded shards of one 5-row part each (one 5-row row group per part)."""

    def __init__(self, root: Path) -> None:
        self.fake = FakeSlurm(accounts=("ddtest",))
        workspace = root / "ws"
        workspace.mkdir()
        self.layout: RunLayout = write_run_directory(
            workspace, shards=SHARDS, records_per_shard=PER_SHARD, clock=self.fake.clock, parquet_parts=True
        )
        register_run_jobs(self.fake, self.layout)
        template = ProfileTemplate(
            cluster="local",
            workspace_root=str(workspace),
            account="ddtest",
            gpu_partition="gpu",
            cpu_partition="cpu",
            python=sys.executable,
        )
        (workspace / "profile.yaml").write_text(render_profile(template), encoding="utf-8")
        self.ref = str(self.layout.run_dir)

    def merge(self, **kwargs: Any) -> MergeResult:
        return merge_run(self.ref, runner=self.fake, clock=self.fake.clock, environ={}, **kwargs)


def files_of(result: MergeResult) -> list[Path]:
    assert result.merge_dir is not None
    return sorted(Path(result.merge_dir).glob("part-*.parquet"))


def row_groups(result: MergeResult) -> list[list[int]]:
    """The rows of each row group of each file, as a reader sees them."""
    groups = []
    for path in files_of(result):
        metadata = pq.ParquetFile(path).metadata
        groups.append([metadata.row_group(k).num_rows for k in range(metadata.num_row_groups)])
    return groups


def table_of(result: MergeResult) -> pa.Table:
    return pa.concat_tables([pq.read_table(path) for path in files_of(result)])


def manifest_of(result: MergeResult) -> MergeManifest:
    assert result.manifest is not None
    found = read_record(Path(result.manifest), MERGE_MANIFEST_SCHEMA)
    assert isinstance(found, RecordOk)
    return found.payload


def test_the_default_merge_splices_the_parts_five_row_groups_and_says_so(tmp_path: Path) -> None:
    result = Run(tmp_path).merge()
    assert row_groups(result) == [[PER_SHARD] * SHARDS]
    assert result.layout == MergeLayout(
        kind="spliced", row_groups=SHARDS, min_row_group_rows=PER_SHARD, max_row_group_rows=PER_SHARD
    )
    manifest = manifest_of(result)
    assert manifest.layout == result.layout
    assert [f.row_groups for f in manifest.files] == [SHARDS]
    assert "160/160 records in 1 file(s) (spliced: 32 row group(s) of 5 rows)" in render_merge(result)


def test_compact_writes_one_row_group_of_all_160_rows_identical_to_the_splice(tmp_path: Path) -> None:
    run = Run(tmp_path)
    spliced = run.merge()
    compacted = run.merge(compact=True)

    assert compacted.outcome == "merged"
    assert compacted.merge_dir == str(run.layout.merge_dir / "0002")
    assert row_groups(compacted) == [[RECORDS]]
    assert table_of(compacted).equals(table_of(spliced))  # same rows, same order, same schema with provenance
    assert pq.read_schema(files_of(compacted)[0]) == pq.read_schema(files_of(spliced)[0])
    assert compacted.layout == MergeLayout(
        kind="compacted",
        row_group_rows=DEFAULT_ROW_GROUP_ROWS,
        row_groups=1,
        min_row_group_rows=RECORDS,
        max_row_group_rows=RECORDS,
    )
    manifest = manifest_of(compacted)
    assert manifest.layout == compacted.layout
    assert (manifest.records, manifest.complete, len(manifest.sources)) == (RECORDS, True, SHARDS)
    assert compacted.parts_read == SHARDS  # every part read and checked, as for the splice
    assert "(compacted: 1 row group(s) of 160 rows, target 131,072)" in render_merge(compacted)


def test_row_group_rows_cuts_row_groups_of_exactly_n_rows(tmp_path: Path) -> None:
    run = Run(tmp_path)
    result = run.merge(compact=True, row_group_rows=64)
    assert row_groups(result) == [[64, 64, 32]]
    assert result.layout == MergeLayout(
        kind="compacted", row_group_rows=64, row_groups=3, min_row_group_rows=32, max_row_group_rows=64
    )
    assert [f.row_groups for f in manifest_of(result).files] == [3]
    assert table_of(result).equals(table_of(run.merge(output=tmp_path / "spliced")))
    assert "(compacted: 3 row group(s) of 32-64 rows, target 64)" in render_merge(result)


def test_max_rows_per_file_splits_files_and_a_row_group_never_spans_two(tmp_path: Path) -> None:
    run = Run(tmp_path)
    result = run.merge(compact=True, max_rows_per_file=100)
    assert row_groups(result) == [[100], [60]]  # the default target is larger than a file: one group per file
    assert result.layout is not None
    assert result.layout.row_group_rows == 100
    manifest = manifest_of(result)
    assert [(f.records, f.first_index, f.row_groups) for f in manifest.files] == [(100, 0, 1), (60, 100, 1)]

    cut = run.merge(compact=True, max_rows_per_file=100, row_group_rows=64, output=tmp_path / "cut")
    assert row_groups(cut) == [[64, 36], [60]]
    assert table_of(cut).equals(table_of(result))
    assert table_of(cut).column("_dd_index").to_pylist() == list(range(RECORDS))


def test_a_merge_is_reused_only_for_the_layout_it_has(tmp_path: Path) -> None:
    run = Run(tmp_path)
    compacted = run.merge(compact=True)
    assert run.merge(compact=True).outcome == "reused"
    assert run.merge(compact=True, row_group_rows=DEFAULT_ROW_GROUP_ROWS).outcome == "reused"  # the same target

    spliced = run.merge()  # a splice request never reuses a compacted merge
    assert (spliced.outcome, spliced.merge_dir) == ("merged", str(run.layout.merge_dir / "0002"))
    assert spliced.layout is not None
    assert spliced.layout.kind == "spliced"
    assert run.merge().outcome == "reused"

    other = run.merge(compact=True, row_group_rows=64)  # nor a compact request a splice or another target
    assert (other.outcome, other.merge_dir) == ("merged", str(run.layout.merge_dir / "0003"))
    assert compacted.merge_dir == str(run.layout.merge_dir / "0001")

    out = tmp_path / "out"
    run.merge(compact=True, output=out)
    assert run.merge(compact=True, output=out).outcome == "reused"
    with pytest.raises(ConflictError) as taken:
        run.merge(output=out)  # the directory holds a compacted merge: not the splice asked for
    assert taken.value.info.code == "output_exists"


@pytest.mark.parametrize(
    ("options", "flag", "says", "fix"),
    [
        ({"row_group_rows": 64}, "--row-group-rows", "only a compacting merge", "add --compact"),
        ({"compact": True, "row_group_rows": 0}, "--row-group-rows", "at least 1, got 0", "N >= 1"),
        ({"compact": True, "row_group_rows": -5}, "--row-group-rows", "at least 1, got -5", "N >= 1"),
        (
            {"compact": True, "row_group_rows": MAX_ROW_GROUP_ROWS + 1, "max_rows_per_file": 2 * MAX_ROW_GROUP_ROWS},
            "--row-group-rows",
            "at most 1,048,576",
            f"--row-group-rows N <= {MAX_ROW_GROUP_ROWS}",
        ),
        (
            {"compact": True, "row_group_rows": 200, "max_rows_per_file": 100},
            "--row-group-rows",
            "200 is more than --max-rows-per-file 100",
            "raise --max-rows-per-file",
        ),
        ({"compact": True, "max_rows_per_file": 0}, "--max-rows-per-file", "at least 1", "N >= 1"),
    ],
)
def test_bad_sizes_are_refused_with_exit_2_before_the_run_is_read(
    tmp_path: Path, options: dict[str, Any], flag: str, says: str, fix: str
) -> None:
    run = Run(tmp_path)
    for as_job in (False, True):
        with pytest.raises(InvalidInputError) as refused:
            run.merge(as_job=as_job, **options)
        info = refused.value.info
        assert (info.exit_code, info.code, info.key_path) == (2, "invalid_merge_layout", (flag,))
        assert says in info.message
        assert fix in (info.hint or "")
        assert flag in (info.hint or "")
    assert not run.layout.merge_dir.exists()
    assert run.fake.calls == []  # no job submitted


def test_as_job_passes_compact_and_the_row_group_size_to_the_job_and_its_record(tmp_path: Path) -> None:
    run = Run(tmp_path)
    result = merge_run(
        run.ref,
        as_job=True,
        compact=True,
        row_group_rows=64,
        max_rows_per_file=100,
        runner=run.fake,
        clock=run.fake.clock,
        environ={},
    )
    assert result.outcome == "submitted"
    assert result.job_id is not None
    tail = run.fake.jobs[int(result.job_id)].script.splitlines()[-1]
    assert tail.endswith("--max-rows-per-file 100 --compact --row-group-rows 64")
    record = read_record(merge_jobs_dir(run.layout) / "0001.json", MERGE_JOB_SCHEMA)
    assert isinstance(record, RecordOk)
    assert (record.payload.compact, record.payload.row_group_rows) == (True, 64)


def test_the_cli_compacts_prints_the_layout_and_refuses_bad_sizes(tmp_path: Path, monkeypatch: Any) -> None:
    run = Run(tmp_path)
    import data_designer.slurm.services as services

    def patched(ref: str, **kwargs: Any) -> MergeResult:
        kwargs.pop("profile"), kwargs.pop("cluster")
        return merge_run(ref, runner=run.fake, clock=run.fake.clock, environ={}, **kwargs)

    monkeypatch.setattr(services, "merge_run", patched)
    merged = CliRunner().invoke(app, ["merge", run.ref, "--compact", "--row-group-rows", "64"])
    assert merged.exit_code == 0, merged.stderr
    assert "merged: 160/160 records in 1 file(s) (compacted: 3 row group(s) of 32-64 rows, target 64)" in (
        merged.stdout
    )
    again = CliRunner().invoke(app, ["merge", run.ref, "--compact", "--row-group-rows", "64", "--json"])
    assert again.exit_code == 0
    shown = json.loads(again.stdout)
    assert shown["outcome"] == "reused"
    assert shown["layout"] == {
        "kind": "compacted",
        "row_group_rows": 64,
        "row_groups": 3,
        "min_row_group_rows": 32,
        "max_row_group_rows": 64,
    }
    refused = CliRunner().invoke(app, ["merge", run.ref, "--row-group-rows", "64", "--json"])
    assert refused.exit_code == 2
    error = json.loads(refused.stderr)
    assert error["code"] == "invalid_merge_layout"
    assert error["key_path"] == ["--row-group-rows"]
    assert "--compact" in error["hint"]
    too_big = CliRunner().invoke(app, ["merge", run.ref, "--compact", "--row-group-rows", "2000000"])
    assert too_big.exit_code == 2
    assert "--row-group-rows" in too_big.stderr


def test_the_cli_help_states_the_contracts_default_and_cap() -> None:
    from data_designer.slurm.cli._merge_commands import merge

    option = get_type_hints(merge, include_extras=True)["row_group_rows"].__metadata__[0]
    assert f"default {DEFAULT_ROW_GROUP_ROWS};" in option.help
    assert f"at most {MAX_ROW_GROUP_ROWS} and --max-rows-per-file" in option.help
