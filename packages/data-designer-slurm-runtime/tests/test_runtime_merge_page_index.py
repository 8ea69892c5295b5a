"""Spliced merges of parts that carry page indexes: every PageLocation points at its page, and readers that prune
pages by the page index (DataFusion, with pushdown) read back exactly the rows asked for.

The parts are written with ``write_page_index=True``, small row groups and small data pages, so each part has
several row groups of several pages per column; a part's OffsetIndex holds absolute file offsets, which the splice
must move with the part (a copied OffsetIndex would send a page-pruning reader to the wrong bytes).
"""

from __future__ import annotations

import hashlib
import importlib
import re
import struct
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from data_designer.slurm.contracts.records import INDEX_COLUMN, MANIFEST_SCHEMA
from data_designer.slurm.runtime.merge import (
    MergeOptions,
    SpliceMismatch,
    SpliceWriter,
    ThriftError,
    footer_bytes,
    merge_snapshot,
    merge_sources,
    scan_footer,
    splices,
)
from data_designer.slurm.runtime.merge._page_index import index_tail, shift_offset_index
from data_designer.slurm.runtime.store import (
    PRIVATE_MODES,
    RecordOk,
    RunLayout,
    read_record,
    read_run,
    write_record_once,
)
from data_designer.slurm.runtime.testing import write_run_directory
from thrift_oracle import Struct, ThriftList, decode_struct, decode_struct_at

pq: Any = importlib.import_module("pyarrow.parquet")
datafusion: Any = importlib.import_module("datafusion")

SHARDS = 3
PER_SHARD = 60
WRITE_OPTIONS = {"write_page_index": True, "row_group_size": 20, "data_page_size": 64, "write_batch_size": 5}
"""Three row groups of 20 rows per part, pages of a few rows each."""
RANGES = ((67, 71), (163, 166), (45, 95), (0, 179), (119, 120))
"""Inside a later part's first row group, inside the last part's last row group, across a part boundary, all, one
row group boundary."""

# parquet.thrift field ids
_FMD_ROW_GROUPS = 4
_RG_COLUMNS = 1
_CC_OFFSET_INDEX_OFFSET, _CC_OFFSET_INDEX_LENGTH, _CC_COLUMN_INDEX_OFFSET, _CC_COLUMN_INDEX_LENGTH = 4, 5, 6, 7
_OI_PAGE_LOCATIONS = 1
_PL_OFFSET, _PL_COMPRESSED_PAGE_SIZE, _PL_FIRST_ROW_INDEX = 1, 2, 3
_PH_COMPRESSED_PAGE_SIZE = 3


def _run(tmp_path: Path) -> RunLayout:
    root = tmp_path / "ws"
    root.mkdir()
    return write_run_directory(
        root, shards=SHARDS, records_per_shard=PER_SHARD, parquet_parts=True, part_write_options=WRITE_OPTIONS
    )


def _struct(value: object) -> Struct:
    assert isinstance(value, Struct)
    return value


def _list(value: object) -> list[object]:
    assert isinstance(value, ThriftList)
    return value.values


def _int(value: object) -> int:
    assert isinstance(value, int)
    return value


def _chunks(data: bytes) -> list[Struct]:
    """Every column chunk of a Parquet file, row group by row group."""
    footer = decode_struct(footer_bytes(data))
    return [
        _struct(chunk)
        for group in _list(footer.get(_FMD_ROW_GROUPS))
        for chunk in _list(_struct(group).get(_RG_COLUMNS))
    ]


def _block(data: bytes, chunk: Struct, offset_field: int, length_field: int) -> bytes:
    offset, length = _int(chunk.get(offset_field)), _int(chunk.get(length_field))
    assert offset >= 4
    assert offset + length <= len(data) - 8
    return data[offset : offset + length]


def _pages(data: bytes, chunk: Struct) -> list[tuple[int, int, int]]:
    """(offset, compressed_page_size, first_row_index) of every page the chunk's OffsetIndex lists."""
    index = decode_struct(_block(data, chunk, _CC_OFFSET_INDEX_OFFSET, _CC_OFFSET_INDEX_LENGTH))
    return [
        (
            _int(_struct(location).get(_PL_OFFSET)),
            _int(_struct(location).get(_PL_COMPRESSED_PAGE_SIZE)),
            _int(_struct(location).get(_PL_FIRST_ROW_INDEX)),
        )
        for location in _list(index.get(_OI_PAGE_LOCATIONS))
    ]


def _merged(tmp_path: Path, max_rows_per_file: int) -> tuple[RunLayout, list[Path]]:
    layout = _run(tmp_path)
    snapshot = read_run(layout)
    options = MergeOptions(max_rows_per_file=max_rows_per_file)
    assert splices(merge_sources(snapshot), options)
    merged = merge_snapshot(snapshot, options)
    return layout, [merged.directory / file.path for file in merged.manifest.files]


def _expected(layout: RunLayout) -> pa.Table:
    return pa.concat_tables([pq.read_table(layout.output_part(shard, 1, 0)) for shard in range(SHARDS)])


@pytest.mark.parametrize("max_rows_per_file", [1000, 120])
def test_every_page_location_of_a_spliced_file_points_at_its_page(tmp_path: Path, max_rows_per_file: int) -> None:
    layout, files = _merged(tmp_path, max_rows_per_file)
    sources = [layout.output_part(shard, 1, 0).read_bytes() for shard in range(SHARDS)]
    source_chunks = [(part, chunk) for part in sources for chunk in _chunks(part)]
    merged_chunks = [(data, chunk) for path in files for data in [path.read_bytes()] for chunk in _chunks(data)]
    assert len(merged_chunks) == len(source_chunks) == SHARDS * 3 * 6
    pages = 0
    for (data, chunk), (part, original) in zip(merged_chunks, source_chunks, strict=True):
        located, expected = _pages(data, chunk), _pages(part, original)
        assert len(located) == len(expected)
        for (offset, size, first_row), (source_offset, source_size, source_first_row) in zip(
            located, expected, strict=True
        ):
            header, end = decode_struct_at(data, offset)
            assert end - offset + _int(header.get(_PH_COMPRESSED_PAGE_SIZE)) == size == source_size
            assert data[offset : offset + size] == part[source_offset : source_offset + source_size]
            assert first_row == source_first_row  # relative to its row group: unchanged
            pages += 1
        # the ColumnIndex holds no offsets: the same bytes, wherever they now are
        assert _block(data, chunk, _CC_COLUMN_INDEX_OFFSET, _CC_COLUMN_INDEX_LENGTH) == _block(
            part, original, _CC_COLUMN_INDEX_OFFSET, _CC_COLUMN_INDEX_LENGTH
        )
    assert pages > len(merged_chunks)  # several pages per column chunk
    for path in files:  # laid out as one writer would: column chunks, all column indexes, all offset indexes, footer
        data = path.read_bytes()
        chunks = _chunks(data)
        column_indexes = [(_int(c.get(_CC_COLUMN_INDEX_OFFSET)), _int(c.get(_CC_COLUMN_INDEX_LENGTH))) for c in chunks]
        offset_indexes = [(_int(c.get(_CC_OFFSET_INDEX_OFFSET)), _int(c.get(_CC_OFFSET_INDEX_LENGTH))) for c in chunks]
        cursor = column_indexes[0][0]
        assert all(offset + size <= cursor for chunk in chunks for offset, size, _ in _pages(data, chunk))
        for offset, length in column_indexes + offset_indexes:
            assert offset == cursor
            cursor += length
        assert cursor == len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]


def _datafusion(files: list[Path], where: str) -> tuple[list[dict[str, object]], list[tuple[int, int]]]:
    """The rows DataFusion reads with page-index pruning and filter pushdown on, and its page pruning counts
    (total, matched) per file scan."""
    config = (
        datafusion.SessionConfig()
        .set("datafusion.execution.parquet.enable_page_index", "true")
        .set("datafusion.execution.parquet.pushdown_filters", "true")
        .set("datafusion.execution.parquet.reorder_filters", "true")
    )
    context = datafusion.SessionContext(config)
    context.register_parquet("merged", str(files[0].parent), file_extension=".parquet")
    query = f"SELECT * FROM merged {where} ORDER BY {INDEX_COLUMN}"
    rows: list[dict[str, object]] = context.sql(query).to_arrow_table().to_pylist()
    plan = "\n".join(str(row["plan"]) for row in context.sql(f"EXPLAIN ANALYZE {query}").to_arrow_table().to_pylist())
    pruned = [(int(a), int(b)) for a, b in re.findall(r"page_index_pages_pruned=(\d+) total → (\d+) matched", plan)]
    return rows, pruned


@pytest.mark.parametrize("max_rows_per_file", [1000, 120])
def test_a_spliced_file_reads_back_identically_with_page_index_pruning_on(
    tmp_path: Path, max_rows_per_file: int
) -> None:
    layout, files = _merged(tmp_path, max_rows_per_file)
    expected = _expected(layout)
    merged = pa.concat_tables([pq.read_table(path) for path in files])
    assert merged.equals(expected)
    rows, _ = _datafusion(files, "")
    assert rows == expected.to_pylist()
    for low, high in RANGES:
        wanted = expected.slice(low, high - low + 1).to_pylist()
        rows, pruned = _datafusion(files, f"WHERE {INDEX_COLUMN} BETWEEN {low} AND {high}")
        assert rows == wanted
        if high - low < 20:
            assert any(matched < total for total, matched in pruned), pruned  # pages were skipped by the index
        filtered = pa.concat_tables(
            [pq.read_table(path, filters=[(INDEX_COLUMN, ">=", low), (INDEX_COLUMN, "<=", high)]) for path in files]
        )
        assert filtered.to_pylist() == wanted
        paths = [str(path) for path in files]
        found = duckdb.execute(
            f"SELECT * FROM read_parquet(?) WHERE {INDEX_COLUMN} BETWEEN ? AND ? ORDER BY {INDEX_COLUMN}",
            [paths, low, high],
        ).to_arrow_table()
        assert found.to_pylist() == wanted


def test_a_part_whose_page_index_is_not_its_tail_is_re_encoded_instead(tmp_path: Path) -> None:
    layout = _run(tmp_path)
    part = layout.output_part(1, 1, 0)
    data = part.read_bytes()
    end = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]
    odd = data[:end] + bytes(7) + data[end:]  # bytes between the page indexes and the footer: still valid Parquet
    with pytest.raises(SpliceMismatch, match="page index"):
        SpliceWriter(tmp_path, max_rows_per_file=1000, modes=PRIVATE_MODES).add(
            odd, scan_footer(footer_bytes(odd)), rows=PER_SHARD, first_index=PER_SHARD
        )
    part.write_bytes(odd)
    manifest = read_record(layout.output_manifest(1, 1), MANIFEST_SCHEMA)
    assert isinstance(manifest, RecordOk)
    moved = manifest.payload.parts[0].model_copy(update={"sha256": hashlib.sha256(odd).hexdigest(), "bytes": len(odd)})
    layout.output_manifest(1, 1).unlink()
    write_record_once(
        layout.output_manifest(1, 1), MANIFEST_SCHEMA, manifest.payload.model_copy(update={"parts": (moved,)})
    )
    merged = merge_snapshot(read_run(layout), MergeOptions())
    (file,) = merged.manifest.files
    written = pq.ParquetFile(merged.directory / file.path)
    assert written.metadata.num_row_groups != SHARDS * 3  # re-encoded, not spliced
    assert written.read().equals(_expected(layout))


def test_the_page_index_walkers_refuse_what_they_cannot_move(tmp_path: Path) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"v": pa.array(range(40), type=pa.int64())}), sink, **WRITE_OPTIONS)
    data = sink.getvalue().to_pybytes()
    scan = scan_footer(footer_bytes(data))
    end = len(data) - 8 - len(footer_bytes(data))
    start = index_tail(scan.page_indexes, end)
    with pytest.raises(ThriftError, match="footer starts"):
        index_tail(scan.page_indexes, end + 1)
    (first, *_) = scan.page_indexes
    assert first.offset_index is not None
    offset, length = first.offset_index
    block = data[offset : offset + length]
    assert shift_offset_index(block, 0, limit=start) == block
    moved = shift_offset_index(block, 1 << 40, limit=start)  # every offset's varint grows
    assert len(moved) > len(block)
    locations = _list(decode_struct(moved).get(_OI_PAGE_LOCATIONS))
    assert [_int(_struct(x).get(_PL_OFFSET)) for x in locations] == [
        _int(_struct(x).get(_PL_OFFSET)) + (1 << 40) for x in _list(decode_struct(block).get(_OI_PAGE_LOCATIONS))
    ]
    with pytest.raises(ThriftError, match="outside the column chunks"):
        shift_offset_index(block, 0, limit=4)
    with pytest.raises(ThriftError):
        shift_offset_index(block[:-2], 0, limit=start)
