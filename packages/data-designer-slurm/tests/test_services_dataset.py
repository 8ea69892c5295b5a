"""``load_dataset``: a merged run, or a run's validated parts, as a pandas DataFrame (real Parquet on disk)."""

from __future__ import annotations

import hashlib
import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts import CheckFailedError, InvalidInputError, NotFoundError
from data_designer.slurm.contracts.records import (
    ATTEMPT_COLUMN,
    INDEX_COLUMN,
    MANIFEST_SCHEMA,
    PROVENANCE_COLUMNS,
    IndexRange,
    OutputManifest,
    OutputPart,
)
from data_designer.slurm.runtime.merge import MergeOptions, merge_snapshot
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record, read_run, write_record_once
from data_designer.slurm.runtime.testing import ShardOutcome, outcome_cycle, parquet_part, write_run_directory
from data_designer.slurm.services import load_dataset

pq: Any = importlib.import_module("pyarrow.parquet")  # untyped
pd: Any = importlib.import_module("pandas")  # no stubs
SHARDS = 3
PER_SHARD = 10
TOTAL = SHARDS * PER_SHARD


def run_dir(tmp_path: Path, outcomes: tuple[ShardOutcome, ...] = ("succeeded",)) -> RunLayout:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    return write_run_directory(
        root, shards=SHARDS, records_per_shard=PER_SHARD, outcome=outcome_cycle(outcomes), parquet_parts=True
    )


def load(layout: RunLayout, **kwargs: Any) -> Any:
    return load_dataset(layout.run_dir, environ={}, **kwargs)


def add_attempt(layout: RunLayout, shard: int, attempt: int, rows: IndexRange) -> None:
    """A later attempt of ``shard`` that published ``rows``, as a retry leaves it."""
    first = read_record(layout.output_manifest(shard, 1), MANIFEST_SCHEMA)
    assert isinstance(first, RecordOk)
    data = parquet_part(str(layout.run_id), first.payload.plan_digest, shard, attempt, rows)
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
    manifest: OutputManifest = first.payload.model_copy(
        update={
            "attempt": attempt,
            "assigned": (rows,),
            "ranges": (rows,),
            "complete": True,
            "drained": None,
            "records": rows.records,
            "parts": (part,),
        }
    )
    write_record_once(layout.output_manifest(shard, attempt), MANIFEST_SCHEMA, manifest)


def test_without_a_merge_the_parts_are_read_in_index_order_and_nothing_is_written(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    before = sorted(p.relative_to(layout.run_dir) for p in layout.run_dir.rglob("*"))
    frame = load(layout)
    assert list(frame.columns) == ["a", *PROVENANCE_COLUMNS]
    assert frame[INDEX_COLUMN].tolist() == list(range(TOTAL))
    assert frame["a"].tolist() == [f"r{i}" for i in range(TOTAL)]
    assert sorted(p.relative_to(layout.run_dir) for p in layout.run_dir.rglob("*")) == before


def test_the_parts_give_the_frame_the_merge_gives(tmp_path: Path) -> None:
    layout = run_dir(tmp_path, ("succeeded", "partial", "succeeded"))
    add_attempt(layout, 1, 2, IndexRange(15, 20))  # a retry: shard 1 is two attempts over disjoint ranges
    from_parts = load(layout)
    assert from_parts[ATTEMPT_COLUMN].tolist()[10:20] == [1] * 5 + [2] * 5

    merged = merge_snapshot(read_run(layout), MergeOptions(max_rows_per_file=7))
    from_merge = load(layout)
    pd.testing.assert_frame_equal(from_merge, from_parts)
    expected = pd.concat([pq.read_table(merged.directory / f.path).to_pandas() for f in merged.manifest.files])
    pd.testing.assert_frame_equal(from_merge, expected.reset_index(drop=True))


def test_the_newest_merge_is_read(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    merge_snapshot(read_run(layout), MergeOptions())
    newest = merge_snapshot(read_run(layout), MergeOptions(provenance=False, max_rows_per_file=4))
    assert newest.directory.name == "0002"
    # the parts are no longer needed: a merge is read from its own files
    for shard in range(SHARDS):
        layout.output_part(shard, 1, 0).unlink()
    frame = load(layout, provenance=False)
    assert list(frame.columns) == ["a"]
    assert frame["a"].tolist() == [f"r{i}" for i in range(TOTAL)]


def test_columns_and_provenance_pick_what_is_returned(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    assert list(load(layout, columns=["a"], provenance=False).columns) == ["a"]
    assert list(load(layout, columns=["a", INDEX_COLUMN], provenance=False).columns) == ["a", INDEX_COLUMN]
    with pytest.raises(InvalidInputError) as unknown:
        load(layout, columns=["a", "b"])
    assert unknown.value.info.exit_code == 2
    assert unknown.value.info.code == "unknown_column"
    assert "'b'" in unknown.value.info.message


def test_provenance_is_refused_from_a_merge_that_dropped_it(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    merge_snapshot(read_run(layout), MergeOptions(provenance=False))
    with pytest.raises(InvalidInputError) as dropped:
        load(layout)
    assert dropped.value.info.code == "provenance_dropped"
    assert "merge/0001" in dropped.value.info.message


@pytest.mark.parametrize("damage", ["flip", "missing", "grow"])
def test_a_damaged_merge_file_is_refused_naming_it(tmp_path: Path, damage: str) -> None:
    layout = run_dir(tmp_path)
    merged = merge_snapshot(read_run(layout), MergeOptions(max_rows_per_file=12))
    path = merged.directory / merged.manifest.files[1].path
    if damage == "flip":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    elif damage == "missing":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(CheckFailedError) as failed:
        load(layout)
    assert failed.value.info.exit_code == 6
    assert failed.value.info.code == "merge_file_invalid"
    assert failed.value.info.file == str(path)
    assert "part-00001.parquet" in failed.value.info.message


def test_a_damaged_part_is_refused_naming_the_shard_and_the_file(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    part = layout.output_part(2, 1, 0)
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x01
    part.write_bytes(bytes(data))
    with pytest.raises(CheckFailedError) as failed:
        load(layout)
    assert failed.value.info.exit_code == 6
    assert "shard 2 attempt 1" in failed.value.info.message
    assert failed.value.info.file == "shards/00002/attempts/0001/output/part-00000.parquet"


def test_a_partial_run_is_refused_naming_the_shards_unless_allowed(tmp_path: Path) -> None:
    layout = run_dir(tmp_path, ("succeeded", "cancelled", "succeeded"))
    with pytest.raises(CheckFailedError) as refused:
        load(layout)
    assert refused.value.info.exit_code == 6
    assert refused.value.info.code == "run_incomplete"
    assert "shard(s) 1 " in refused.value.info.message
    frame = load(layout, allow_partial=True)
    assert frame[INDEX_COLUMN].tolist() == [*range(10), *range(20, 30)]


def test_a_partial_merge_is_refused_unless_allowed(tmp_path: Path) -> None:
    layout = run_dir(tmp_path, ("succeeded", "partial", "succeeded"))
    merge_snapshot(read_run(layout), MergeOptions(allow_partial=True))
    with pytest.raises(CheckFailedError) as refused:
        load(layout)
    assert refused.value.info.code == "run_incomplete"
    assert "merge/0001 is partial" in refused.value.info.message
    assert "shard(s) 1 " in refused.value.info.message
    assert load(layout, allow_partial=True)[INDEX_COLUMN].tolist() == [*range(15), *range(20, 30)]


def test_a_missing_run_is_not_found(tmp_path: Path) -> None:
    (tmp_path / "ws" / "runs").mkdir(parents=True)
    with pytest.raises(NotFoundError) as missing:
        load_dataset(tmp_path / "ws" / "runs" / "nope-20260101T000000Z-abcdef", environ={})
    assert missing.value.info.exit_code == 3


def test_importing_the_services_loads_no_pandas_pyarrow_or_numpy() -> None:
    # status, retry and runs ls import the services: a merge's or a dataset's libraries load only when one runs
    code = "import sys, data_designer.slurm.services; print([m for m in ('pandas', 'pyarrow', 'numpy') if m in sys.modules])"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
