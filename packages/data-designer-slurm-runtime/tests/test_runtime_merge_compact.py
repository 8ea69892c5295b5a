"""``runtime.merge`` compacting: ``MergeWriter`` cuts row groups of exactly N rows with bounded memory, the options
are checked, the merge job carries them, and a manifest written before layouts were recorded still reads."""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from data_designer.slurm.contracts import DEFAULT_ROW_GROUP_ROWS, InvalidInputError, MergeLayout
from data_designer.slurm.contracts.records import MANIFEST_SCHEMA, MERGE_MANIFEST_SCHEMA, MergeManifest
from data_designer.slurm.runtime.merge import (
    MergeOptions,
    MergeWriter,
    check_options,
    layout_matches,
    merge_job_argv,
    merge_snapshot,
)
from data_designer.slurm.runtime.merge._job_main import main, parser
from data_designer.slurm.runtime.store import PRIVATE_MODES, RecordOk, read_record, read_run, write_record_once
from data_designer.slurm.runtime.testing import write_run_directory

pq: Any = importlib.import_module("pyarrow.parquet")
SCHEMA = pa.schema([pa.field("_dd_index", pa.int64()), pa.field("a", pa.string())])


def rows(start: int, count: int) -> pa.Table:
    return pa.table(
        {"_dd_index": pa.array(range(start, start + count), pa.int64()), "a": [f"r{i}" for i in range(count)]},
        schema=SCHEMA,
    )


def write_slices(directory: Path, total: int, slice_rows: int, **options: Any) -> MergeWriter:
    directory.mkdir()
    writer = MergeWriter(directory, SCHEMA, provenance=True, modes=PRIVATE_MODES, **options)
    for start in range(0, total, slice_rows):
        writer.write(rows(start, min(slice_rows, total - start)), start)
    writer.close()
    return writer


def groups_of(directory: Path) -> list[list[int]]:
    found = []
    for path in sorted(directory.glob("part-*.parquet")):
        metadata = pq.ParquetFile(path).metadata
        found.append([metadata.row_group(k).num_rows for k in range(metadata.num_row_groups)])
    return found


def test_row_groups_hold_exactly_n_rows_whatever_the_slices_and_files(tmp_path: Path) -> None:
    writer = write_slices(tmp_path / "a", 1000, 7, max_rows_per_file=300, row_group_rows=128)
    assert groups_of(tmp_path / "a") == [[128, 128, 44], [128, 128, 44], [128, 128, 44], [100]]
    assert writer.row_group_sizes == [g for file in groups_of(tmp_path / "a") for g in file]
    assert [f.records for f in writer.files] == [300, 300, 300, 100]
    table = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / "a").glob("part-*.parquet")))
    assert table.column("_dd_index").to_pylist() == list(range(1000))


def test_the_rows_held_are_bounded_by_two_row_groups_and_one_slice_not_by_the_run(tmp_path: Path) -> None:
    n, slice_rows = 64, 5
    small = write_slices(tmp_path / "small", 1_000, slice_rows, max_rows_per_file=10**6, row_group_rows=n)
    large = write_slices(tmp_path / "large", 20_000, slice_rows, max_rows_per_file=10**6, row_group_rows=n)
    for writer in (small, large):
        # filling: fewer than n plus the slice that crossed it; encoding: n (counted until it is joined)
        assert n < writer.max_rows_held <= 2 * n + slice_rows - 1
    assert large.max_rows_held == small.max_rows_held  # 20x the rows, the same memory
    assert set(large.row_group_sizes[:-1]) == {n}


def test_one_slice_larger_than_many_row_groups_is_cut_at_once(tmp_path: Path) -> None:
    writer = write_slices(tmp_path / "a", 1000, 1000, max_rows_per_file=10**6, row_group_rows=100)
    assert groups_of(tmp_path / "a") == [[100] * 10]
    assert writer.max_rows_held == 1000  # the one slice (a part is held whole anyway)


def test_the_default_target_is_the_constant_or_the_file_size_if_smaller() -> None:
    assert DEFAULT_ROW_GROUP_ROWS == 128 * 1024
    assert MergeOptions(compact=True).group_rows == DEFAULT_ROW_GROUP_ROWS
    assert MergeOptions(compact=True, max_rows_per_file=100).group_rows == 100
    assert MergeOptions(compact=True, row_group_rows=64).group_rows == 64
    assert MergeOptions().group_rows is None


@pytest.mark.parametrize(
    "options",
    [
        MergeOptions(row_group_rows=10),
        MergeOptions(compact=True, row_group_rows=0),
        MergeOptions(compact=True, row_group_rows=2**21, max_rows_per_file=2**22),
        MergeOptions(compact=True, row_group_rows=11, max_rows_per_file=10),
        MergeOptions(max_rows_per_file=0),
    ],
)
def test_options_no_merge_honours_are_refused_with_exit_2(options: MergeOptions, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as refused:
        check_options(options)
    assert refused.value.info.exit_code == 2
    layout = write_run_directory(tmp_path, shards=1, records_per_shard=3, parquet_parts=True)
    with pytest.raises(InvalidInputError):
        merge_snapshot(read_run(layout), options)
    assert not layout.merge_dir.exists()


def test_the_job_argv_carries_the_layout_options_and_parses_back() -> None:
    options = MergeOptions(compact=True, row_group_rows=64, max_rows_per_file=100)
    argv = merge_job_argv(("python",), "/ws/runs/r", options)
    assert argv[-3:] == ("--compact", "--row-group-rows", "64")
    args = parser().parse_args(list(argv[3:]))
    assert (args.compact, args.row_group_rows, args.max_rows_per_file) == (True, 64, 100)
    assert "--compact" not in merge_job_argv(("python",), "/ws/runs/r", MergeOptions())


def test_the_job_compacts_and_prints_the_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = write_run_directory(tmp_path, shards=4, records_per_shard=5, parquet_parts=True)
    assert main(["--run-dir", str(layout.run_dir), "--compact", "--row-group-rows", "8"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["layout"]["kind"] == "compacted"
    assert groups_of(layout.merge_dir / "0001") == [[8, 8, 4]]
    assert main(["--run-dir", str(layout.run_dir), "--row-group-rows", "8"]) == 1  # without --compact
    assert "--row-group-rows" in capsys.readouterr().err


def test_a_manifest_from_before_layouts_reads_and_is_reused_by_a_default_merge_only(tmp_path: Path) -> None:
    layout = write_run_directory(tmp_path, shards=2, records_per_shard=5, parquet_parts=True)
    merged = merge_snapshot(read_run(layout), MergeOptions())
    found = read_record(merged.directory / "manifest.json", MERGE_MANIFEST_SCHEMA)
    assert isinstance(found, RecordOk)
    plain = found.payload.model_dump(mode="json")
    del plain["layout"]
    for file in plain["files"]:
        del file["row_groups"]
    old = MergeManifest.model_validate(plain)  # the payload an earlier version wrote: same schema version
    assert old.layout is None
    assert old.files[0].row_groups is None
    assert layout_matches(old, MergeOptions())
    assert not layout_matches(old, MergeOptions(compact=True))
    compacted = old.model_copy(
        update={
            "layout": MergeLayout(
                kind="compacted", row_group_rows=8, row_groups=2, min_row_group_rows=2, max_row_group_rows=8
            )
        }
    )
    assert layout_matches(compacted, MergeOptions(compact=True, row_group_rows=8))
    assert not layout_matches(compacted, MergeOptions(compact=True, row_group_rows=9))
    assert not layout_matches(compacted, MergeOptions())


def test_a_spliced_part_of_several_row_groups_counts_each(tmp_path: Path) -> None:
    layout = write_run_directory(tmp_path, shards=2, records_per_shard=10, parquet_parts=True)
    path = layout.output_part(0, 1, 0)
    table = pq.read_table(path)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=4)  # rows 0..9 in row groups of 4, 4, 2
    data = sink.getvalue().to_pybytes()
    path.write_bytes(data)
    found = read_record(layout.output_manifest(0, 1), MANIFEST_SCHEMA)
    assert isinstance(found, RecordOk)
    part = found.payload.parts[0].model_copy(update={"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)})
    layout.output_manifest(0, 1).unlink()
    write_record_once(
        layout.output_manifest(0, 1), MANIFEST_SCHEMA, found.payload.model_copy(update={"parts": (part,)})
    )

    merged = merge_snapshot(read_run(layout), MergeOptions(max_rows_per_file=12))
    assert merged.manifest.layout == MergeLayout(
        kind="spliced", row_groups=4, min_row_group_rows=2, max_row_group_rows=10
    )
    assert [f.row_groups for f in merged.manifest.files] == [3, 1]
    assert groups_of(merged.directory) == [[4, 4, 2], [10]]
