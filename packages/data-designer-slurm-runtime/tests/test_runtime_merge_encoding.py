"""How a re-encoding merge encodes: dictionaries only where they pay, and no pandas on the way."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from data_designer.slurm.runtime.merge import ENCODERS, CompactWriter, MergeWriter, dictionary_columns
from data_designer.slurm.runtime.store import PRIVATE_MODES
from data_designer.slurm.runtime.testing import write_run_directory


def test_mostly_distinct_text_goes_without_a_dictionary_everything_else_keeps_one() -> None:
    rows = 1_000
    sample = pa.table(
        {
            "review": pa.array([f"review number {i} of many" for i in range(rows)]),
            "product": pa.array(["kettle", "lamp", "bike", "desk"] * (rows // 4)),
            "_dd_run_id": pa.array(["run-1"] * rows),
            "_dd_index": pa.array(range(rows), type=pa.int64()),
            "score": pa.array([float(i) for i in range(rows)]),
        }
    )
    assert dictionary_columns(sample) == ["product", "_dd_run_id", "_dd_index", "score"]
    half = pa.table({"a": pa.array([str(i % 500) for i in range(rows)])})  # exactly half distinct: kept
    assert dictionary_columns(half) == ["a"]
    assert dictionary_columns(pa.table({"a": pa.array([], type=pa.string())})) == ["a"]


def test_a_compacting_merge_never_imports_pandas(tmp_path: Path) -> None:
    """pyarrow 24 imports pandas (0.2 s, 50 MiB) on any Python-to-Arrow conversion; the merge makes none."""
    root = tmp_path / "ws"
    root.mkdir()
    layout = write_run_directory(root, shards=3, records_per_shard=20, parquet_parts=True)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from data_designer.slurm.runtime.merge import MergeOptions, merge_snapshot\n"
        "from data_designer.slurm.runtime.store import RunLayout, read_run\n"
        f"LAYOUT = RunLayout.of_run_dir(Path({str(layout.run_dir)!r}))\n"
        f"merge_snapshot(read_run(LAYOUT), MergeOptions(output=Path({str(tmp_path / 'out')!r}), compact=True))\n"
        f"merge_snapshot(read_run(LAYOUT), MergeOptions(output=Path({str(tmp_path / 'spliced')!r})))\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "False"


pq: Any = importlib.import_module("pyarrow.parquet")
SCHEMA = pa.schema([("a", pa.string()), ("_dd_index", pa.int64())])


def rows(start: int, count: int) -> pa.Table:
    return pa.table(
        {"a": [f"r{i % 7}" for i in range(start, start + count)], "_dd_index": list(range(start, start + count))},
        schema=SCHEMA,
    )


def write(cls: type[MergeWriter], directory: Path, total: int, slice_rows: int, **options: int) -> MergeWriter:
    directory.mkdir()
    writer = cls(directory, SCHEMA, provenance=True, modes=PRIVATE_MODES, **options)
    for start in range(0, total, slice_rows):
        writer.write(rows(start, min(slice_rows, total - start)), start)
    writer.close()
    return writer


def layout(directory: Path) -> list[list[int]]:
    found = []
    for path in sorted(directory.glob("part-*.parquet")):
        metadata = pq.ParquetFile(path).metadata
        found.append([metadata.row_group(k).num_rows for k in range(metadata.num_row_groups)])
    return found


def test_parallel_encoding_cuts_exactly_as_the_one_writer_and_its_bytes_do_not_depend_on_timing(tmp_path: Path) -> None:
    one = write(MergeWriter, tmp_path / "one", 1000, 7, max_rows_per_file=300, row_group_rows=128)
    many = write(CompactWriter, tmp_path / "many", 1000, 7, max_rows_per_file=300, row_group_rows=128)
    again = write(CompactWriter, tmp_path / "again", 1000, 7, max_rows_per_file=300, row_group_rows=128)
    assert layout(tmp_path / "many") == layout(tmp_path / "one") == [[128, 128, 44]] * 3 + [[100]]
    assert many.row_group_sizes == one.row_group_sizes
    assert [(f.records, f.first_index) for f in many.files] == [(f.records, f.first_index) for f in one.files]
    assert [f.sha256 for f in many.files] == [f.sha256 for f in again.files]  # the same rows, the same bytes
    for directory in ("one", "many"):
        table = pa.concat_tables(pq.read_table(p) for p in sorted((tmp_path / directory).glob("part-*.parquet")))
        assert table.column("_dd_index").to_pylist() == list(range(1000))
        assert table.column("a").to_pylist() == [f"r{i % 7}" for i in range(1000)]


def test_parallel_encoding_holds_at_most_the_encoders_row_groups_and_the_one_filling(tmp_path: Path) -> None:
    n, slice_rows = 64, 5
    small = write(CompactWriter, tmp_path / "small", 1_000, slice_rows, max_rows_per_file=10**6, row_group_rows=n)
    large = write(CompactWriter, tmp_path / "large", 20_000, slice_rows, max_rows_per_file=10**6, row_group_rows=n)
    for writer in (small, large):
        assert n < writer.max_rows_held <= (ENCODERS + 1) * n + slice_rows - 1
    assert large.max_rows_held == small.max_rows_held
