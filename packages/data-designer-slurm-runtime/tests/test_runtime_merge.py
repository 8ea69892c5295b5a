"""``runtime.merge``: which parts a merge takes, how each is checked, and what it writes (real Parquet on disk)."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from data_designer.slurm.contracts import CheckFailedError, ConflictError
from data_designer.slurm.contracts.records import (
    INDEX_COLUMN,
    MANIFEST_SCHEMA,
    MERGE_MANIFEST_SCHEMA,
    ColumnType,
    IndexRange,
    OutputManifest,
    OutputPart,
)
from data_designer.slurm.runtime.merge import (
    MergeOptions,
    SpliceWriter,
    footer_bytes,
    latest_merge,
    merge_snapshot,
    merge_sources,
    scan_footer,
    splices,
    unified_columns,
)
from data_designer.slurm.runtime.merge import _writer as merge_writer
from data_designer.slurm.runtime.store import (
    PRIVATE_MODES,
    RecordOk,
    RunLayout,
    read_record,
    read_run,
    write_record_once,
)
from data_designer.slurm.runtime.testing import ShardOutcome, outcome_cycle, parquet_part, write_run_directory

pq: Any = importlib.import_module("pyarrow.parquet")
SHARDS = 3
PER_SHARD = 10


def run_dir(tmp_path: Path, outcomes: tuple[ShardOutcome, ...] = ("succeeded",)) -> RunLayout:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    return write_run_directory(
        root, shards=SHARDS, records_per_shard=PER_SHARD, outcome=outcome_cycle(outcomes), parquet_parts=True
    )


def table_of(directory: Path) -> pa.Table:
    files = sorted(directory.glob("part-*.parquet"))
    return pa.concat_tables([pq.read_table(path) for path in files])


def add_attempt(layout: RunLayout, shard: int, attempt: int, rows: IndexRange, *, a_type: str = "string") -> None:
    """A later attempt of ``shard`` that published ``rows`` (as a retry would), with its part and manifest."""
    first = read_record(layout.output_manifest(shard, 1), MANIFEST_SCHEMA)
    assert isinstance(first, RecordOk)
    data = parquet_part(str(layout.run_id), first.payload.plan_digest, shard, attempt, rows)
    if a_type == "null":  # a batch that saw only nulls: the host wrote the column as Arrow null
        table = pq.read_table(pa.BufferReader(data))
        table = table.set_column(0, pa.field("a", pa.null()), pa.nulls(rows.records))
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        data = sink.getvalue().to_pybytes()
    path = layout.output_part(shard, attempt, 0)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    part = OutputPart(
        path=path.name,
        records=rows.records,
        first_index=rows.start,
        sha256=hashlib.sha256(data).hexdigest(),
        bytes=len(data),
    )
    columns = tuple(ColumnType(name=c.name, type=a_type if c.name == "a" else c.type) for c in first.payload.columns)
    manifest: OutputManifest = first.payload.model_copy(
        update={
            "attempt": attempt,
            "assigned": (rows,),
            "ranges": (rows,),
            "complete": True,
            "drained": None,
            "records": rows.records,
            "parts": (part,),
            "columns": columns,
        }
    )
    write_record_once(layout.output_manifest(shard, attempt), MANIFEST_SCHEMA, manifest)


def test_a_complete_run_merges_every_record_once_in_index_order(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    merged = merge_snapshot(read_run(layout), MergeOptions())

    assert merged.outcome == "merged"
    assert merged.directory == layout.merge_dir / "0001"
    table = table_of(merged.directory)
    assert table.column(INDEX_COLUMN).to_pylist() == list(range(SHARDS * PER_SHARD))
    assert table.column("a").to_pylist() == [f"r{i}" for i in range(SHARDS * PER_SHARD)]
    manifest = read_record(merged.directory / "manifest.json", MERGE_MANIFEST_SCHEMA)
    assert isinstance(manifest, RecordOk)
    assert manifest.payload.complete
    assert manifest.payload.records == SHARDS * PER_SHARD
    assert manifest.payload.ranges == (IndexRange(0, SHARDS * PER_SHARD),)
    assert manifest.payload.missing == ()
    assert [s.shard for s in manifest.payload.sources] == [0, 1, 2]
    assert merged.parts_read == SHARDS
    assert [p.name for p in layout.merge_dir.iterdir()] == ["0001"]  # no temporary directory left


def test_merging_the_same_evidence_again_reuses_it_and_gives_the_same_bytes(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    first = merge_snapshot(read_run(layout), MergeOptions())
    again = merge_snapshot(read_run(layout), MergeOptions())
    assert again.outcome == "reused"
    assert again.directory == first.directory
    assert again.manifest == first.manifest

    elsewhere = merge_snapshot(read_run(layout), MergeOptions(output=tmp_path / "out"))
    assert elsewhere.directory == tmp_path / "out"
    for file in first.manifest.files:
        assert (tmp_path / "out" / file.path).read_bytes() == (first.directory / file.path).read_bytes()
    assert elsewhere.manifest.files == first.manifest.files


def test_files_hold_at_most_max_rows_each_and_say_where_they_start(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    merged = merge_snapshot(read_run(layout), MergeOptions(max_rows_per_file=7))
    assert [f.records for f in merged.manifest.files] == [7, 7, 7, 7, 2]
    assert [f.first_index for f in merged.manifest.files] == [0, 7, 14, 21, 28]
    for file in merged.manifest.files:
        data = (merged.directory / file.path).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (file.bytes, file.sha256)
        assert pq.read_table(merged.directory / file.path).column(INDEX_COLUMN)[0].as_py() == file.first_index


def test_row_groups_encoded_in_the_background_keep_order_files_and_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(merge_writer, "ROW_GROUP_ROWS", 4)  # a background encoding every few rows
    layout = run_dir(tmp_path)
    merged = merge_snapshot(read_run(layout), MergeOptions(max_rows_per_file=7))
    assert [f.records for f in merged.manifest.files] == [7, 7, 7, 7, 2]
    table = table_of(merged.directory)
    assert table.column(INDEX_COLUMN).to_pylist() == list(range(SHARDS * PER_SHARD))
    assert table.column("a").to_pylist() == [f"r{i}" for i in range(SHARDS * PER_SHARD)]
    groups = [pq.ParquetFile(merged.directory / f.path).metadata.num_row_groups for f in merged.manifest.files]
    assert groups == [1, 2, 2, 1, 1]  # flushed at rows 10, 20, 30: files 7..13 and 14..20 straddle a flush
    again = merge_snapshot(read_run(layout), MergeOptions(max_rows_per_file=7, output=tmp_path / "again"))
    assert again.manifest.files == merged.manifest.files


def test_a_failed_background_encoding_fails_the_merge_and_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(merge_writer, "ROW_GROUP_ROWS", 4)
    layout = run_dir(tmp_path)

    def refuse(self: merge_writer.HashingSink, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(merge_writer.HashingSink, "write", refuse)
    with pytest.raises(OSError, match="No space left"):
        merge_snapshot(read_run(layout), MergeOptions())
    assert [p.name for p in layout.merge_dir.iterdir()] == []


def test_without_provenance_only_the_data_columns_are_written(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    merged = merge_snapshot(read_run(layout), MergeOptions(provenance=False))
    table = table_of(merged.directory)
    assert table.column_names == ["a"]
    assert [c.name for c in merged.manifest.columns] == ["a"]
    assert not merged.manifest.provenance


def test_a_missing_shard_is_refused_unless_partial_which_records_the_missing_ranges(tmp_path: Path) -> None:
    layout = run_dir(tmp_path, ("succeeded", "partial", "succeeded"))
    snapshot = read_run(layout)
    with pytest.raises(CheckFailedError) as refused:
        merge_snapshot(snapshot, MergeOptions())
    assert refused.value.info.code == "run_incomplete"
    assert "shard(s) 1" in refused.value.info.message
    assert not layout.merge_dir.exists()

    merged = merge_snapshot(snapshot, MergeOptions(allow_partial=True))
    assert not merged.manifest.complete
    assert merged.manifest.missing == snapshot.shards[1].missing == (IndexRange(15, 20),)
    assert merged.manifest.missing_shards == (1,)
    assert merged.manifest.ranges == (IndexRange(0, 15), IndexRange(20, 30))
    assert table_of(merged.directory).column(INDEX_COLUMN).to_pylist() == [*range(15), *range(20, 30)]


def test_a_retried_shard_is_the_union_of_its_attempts_over_disjoint_ranges(tmp_path: Path) -> None:
    layout = run_dir(tmp_path, ("succeeded", "partial", "succeeded"))
    add_attempt(layout, 1, 2, IndexRange(15, 20))
    merged = merge_snapshot(read_run(layout), MergeOptions())
    assert merged.manifest.complete
    assert [(s.shard, s.attempt, s.range) for s in merged.manifest.sources] == [
        (0, 1, IndexRange(0, 10)),
        (1, 1, IndexRange(10, 15)),
        (1, 2, IndexRange(15, 20)),
        (2, 1, IndexRange(20, 30)),
    ]
    table = table_of(merged.directory)
    assert table.column(INDEX_COLUMN).to_pylist() == list(range(30))
    assert table.column("_dd_attempt").to_pylist()[15:20] == [2] * 5


def test_a_column_null_in_one_shard_takes_the_others_type(tmp_path: Path) -> None:
    layout = run_dir(tmp_path, ("succeeded", "partial", "succeeded"))
    add_attempt(layout, 1, 2, IndexRange(15, 20), a_type="null")
    merged = merge_snapshot(read_run(layout), MergeOptions())
    table = table_of(merged.directory)
    assert table.schema.field("a").type == pa.string()
    assert table.column("a").to_pylist()[15:20] == [None] * 5


_TEMPLATE = OutputManifest.model_validate_json(
    json.dumps(
        {
            "run_id": "r",
            "plan_digest": "p",
            "config_digest": "c",
            "shard": 0,
            "attempt": 1,
            "seed": 0,
            "assigned": [[0, 1]],
            "ranges": [[0, 1]],
            "complete": True,
            "records": 1,
            "columns": [],
            "arrow_schema": "",
            "parts": [],
            "usage_source": "unavailable",
            "models": {},
            "timings": {
                "worker_started_at": "2026-01-01T00:00:00Z",
                "worker_finished_at": "2026-01-01T00:00:01Z",
                "host_import_s": 0,
                "setup_s": 0,
                "generation_s": 1,
                "write_s": 0,
                "records_per_s": 1,
            },
            "host_version": "h",
            "runtime_version": "r",
            "python": "3.11",
        }
    )
)


def test_type_drift_is_refused_naming_the_column_the_shards_and_the_types() -> None:
    base = [ColumnType(name="a", type="string"), ColumnType(name="b", type="int64")]
    one = _manifest(0, base)
    two = _manifest(1, [base[0], ColumnType(name="b", type="double")])
    with pytest.raises(CheckFailedError) as drift:
        unified_columns([one, two])
    message = drift.value.info.message
    assert drift.value.info.code == "schema_drift"
    assert "column 'b'" in message
    assert "double in shard(s) 1" in message
    assert "int64 in shard(s) 0" in message
    null = _manifest(2, [base[0], ColumnType(name="b", type="null")])
    assert unified_columns([one, null]) == tuple(base)


def _manifest(shard: int, columns: list[ColumnType]) -> OutputManifest:
    """A manifest that differs only in its shard and columns (unified_columns reads nothing else)."""
    return _TEMPLATE.model_copy(update={"shard": shard, "columns": tuple(columns)})


@pytest.mark.parametrize("damage", ["flip", "missing", "truncate"])
def test_a_damaged_part_fails_the_merge_naming_shard_and_file_and_nothing_is_published(
    tmp_path: Path, damage: str
) -> None:
    layout = run_dir(tmp_path)
    part = layout.output_part(2, 1, 0)
    if damage == "flip":
        data = bytearray(part.read_bytes())
        data[len(data) // 2] ^= 0x01
        part.write_bytes(bytes(data))
    elif damage == "missing":
        part.unlink()
    else:
        part.write_bytes(part.read_bytes()[:-3])
    with pytest.raises(CheckFailedError) as failed:
        merge_snapshot(read_run(layout), MergeOptions())
    assert failed.value.info.exit_code == 6
    assert failed.value.info.code == "part_invalid"
    assert "shard 2 attempt 1" in failed.value.info.message
    assert failed.value.info.file == "shards/00002/attempts/0001/output/part-00000.parquet"
    assert latest_merge(layout.merge_dir) is None
    assert list(layout.merge_dir.iterdir()) == [] if layout.merge_dir.exists() else True


def test_an_output_directory_with_other_files_is_refused(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("x")
    with pytest.raises(ConflictError):
        merge_snapshot(read_run(layout), MergeOptions(output=out))
    assert os.listdir(out) == ["mine.txt"]


def test_sources_come_from_the_snapshot_alone(tmp_path: Path) -> None:
    layout = run_dir(tmp_path, ("succeeded", "cancelled", "succeeded"))
    sources = merge_sources(read_run(layout))
    assert sources.missing_shards == (1,)
    assert sources.records == 20
    assert sources.records_total == 30


# -- splicing whole parts -----------------------------------------------------------------------------------------


def test_whole_parts_are_spliced_into_files_without_reencoding(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    snapshot = read_run(layout)
    assert splices(merge_sources(snapshot), MergeOptions(max_rows_per_file=25))
    merged = merge_snapshot(snapshot, MergeOptions(max_rows_per_file=25))
    assert [(f.records, f.first_index) for f in merged.manifest.files] == [(20, 0), (10, 20)]
    first = pq.ParquetFile(merged.directory / "part-00000.parquet")
    assert first.metadata.num_row_groups == 2  # one per source part: the pages are the parts' own
    assert first.metadata.num_rows == 20
    table = table_of(merged.directory)
    assert table.column(INDEX_COLUMN).to_pylist() == list(range(30))
    assert table.column("a").to_pylist() == [f"r{i}" for i in range(30)]
    source = pq.read_table(layout.output_part(0, 1, 0))
    assert table.slice(0, 10).equals(source)  # column values and types exactly the part's
    stats = first.metadata.row_group(1).column(1).statistics  # _dd_index of the second part
    assert (stats.min, stats.max) == (10, 19)


def test_a_part_whose_footer_schema_differs_falls_back_to_reencoding(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    part = layout.output_part(1, 1, 0)
    table = pq.read_table(part).replace_schema_metadata({"note": "written by another writer"})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = sink.getvalue().to_pybytes()
    part.write_bytes(data)
    manifest = read_record(layout.output_manifest(1, 1), MANIFEST_SCHEMA)
    assert isinstance(manifest, RecordOk)
    moved = manifest.payload.parts[0].model_copy(
        update={"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    )
    layout.output_manifest(1, 1).unlink()
    write_record_once(
        layout.output_manifest(1, 1), MANIFEST_SCHEMA, manifest.payload.model_copy(update={"parts": (moved,)})
    )
    merged = merge_snapshot(read_run(layout), MergeOptions())
    assert pq.ParquetFile(merged.directory / "part-00000.parquet").metadata.num_row_groups == 1  # re-encoded
    assert table_of(merged.directory).column(INDEX_COLUMN).to_pylist() == list(range(30))


def test_a_spliced_file_with_page_indexes_reads_back_equal(tmp_path: Path) -> None:
    parts = []
    for start in (0, 3):
        table = pa.table({"v": pa.array(range(start, start + 3), type=pa.int64()), "s": pa.array(["p", "q", "r"])})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, write_page_index=True)
        parts.append((table, sink.getvalue().to_pybytes()))
    writer = SpliceWriter(tmp_path, max_rows_per_file=100, modes=PRIVATE_MODES)
    for number, (_, data) in enumerate(parts):
        writer.add(data, scan_footer(footer_bytes(data)), rows=3, first_index=3 * number)
    (file,) = writer.close()
    spliced = pq.ParquetFile(tmp_path / file.path)
    assert spliced.read().equals(pa.concat_tables([t for t, _ in parts]))
    assert spliced.metadata.row_group(1).column(0).statistics.min == 3
    assert (tmp_path / file.path).stat().st_size == file.bytes


def test_a_spliced_file_equals_the_parts_read_back_and_is_the_same_bytes_twice(tmp_path: Path) -> None:
    parts = []
    for start in (0, 4, 8):
        table = pa.table({"v": pa.array(range(start, start + 4), type=pa.int64()), "s": pa.array(list("wxyz"))})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=2)
        parts.append((table, sink.getvalue().to_pybytes()))
    written = []
    for run in ("one", "two"):
        (tmp_path / run).mkdir()
        writer = SpliceWriter(tmp_path / run, max_rows_per_file=8, modes=PRIVATE_MODES)
        for number, (_, data) in enumerate(parts):
            writer.add(data, scan_footer(footer_bytes(data)), rows=4, first_index=4 * number)
        written.append(writer.close())
    assert written[0] == written[1]
    first, second = (pq.ParquetFile(tmp_path / "one" / file.path) for file in written[0])
    assert first.read().equals(pa.concat_tables([parts[0][0], parts[1][0]]))
    assert second.read().equals(parts[2][0])
    assert [first.metadata.row_group(g).column(0).statistics.min for g in range(4)] == [0, 2, 4, 6]
    for file in written[0]:
        data = (tmp_path / "one" / file.path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == file.sha256
        assert len(data) == file.bytes


def _republish(layout: RunLayout, table: pa.Table, **options: Any) -> None:
    """Shard 1's part rewritten from ``table`` (and its manifest's size and sha256 with it)."""
    part = layout.output_part(1, 1, 0)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **options)
    data = sink.getvalue().to_pybytes()
    part.write_bytes(data)
    manifest = read_record(layout.output_manifest(1, 1), MANIFEST_SCHEMA)
    assert isinstance(manifest, RecordOk)
    moved = manifest.payload.parts[0].model_copy(
        update={"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    )
    layout.output_manifest(1, 1).unlink()
    write_record_once(
        layout.output_manifest(1, 1), MANIFEST_SCHEMA, manifest.payload.model_copy(update={"parts": (moved,)})
    )


def test_provenance_without_statistics_is_decoded_and_a_wrong_value_refused(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    table = pq.read_table(layout.output_part(1, 1, 0))
    _republish(layout, table, write_statistics=False)
    merged = merge_snapshot(read_run(layout), MergeOptions())
    assert table_of(merged.directory).column(INDEX_COLUMN).to_pylist() == list(range(30))
    position = table.schema.get_field_index("_dd_shard")
    wrong = table.set_column(position, "_dd_shard", pa.array([1] * 9 + [2], type=pa.int32()))
    _republish(layout, wrong, write_statistics=False)
    with pytest.raises(CheckFailedError, match="_dd_shard is not 1 in every row") as raised:
        merge_snapshot(read_run(layout), MergeOptions(output=tmp_path / "out"))
    assert raised.value.exit_code == 6
    assert "part-00000.parquet" in str(raised.value)
    assert not (tmp_path / "out").exists()
