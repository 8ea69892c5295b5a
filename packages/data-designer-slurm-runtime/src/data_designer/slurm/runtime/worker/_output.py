"""The client worker's output: Parquet parts with provenance columns, published write-once, and progress.

The host writes each create call's dataset as ``batch_NNNNN.parquet`` files (one per batch, the
run config's buffer size). Each becomes one part, in batch order, numbered on from the previous
range's parts, its rows given consecutive global indices. Parts are cast to one schema (the host's
batches can differ where a batch saw only nulls) and published with ``link(2)``, never replaced.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from data_designer.slurm.contracts.records import (
    ATTEMPT_COLUMN,
    INDEX_COLUMN,
    PLAN_DIGEST_COLUMN,
    PROVENANCE_COLUMNS,
    RUN_ID_COLUMN,
    SHARD_COLUMN,
    ColumnType,
    OutputPart,
    WorkerError,
    WorkerProgress,
    WorkerState,
)
from data_designer.slurm.runtime.store import AttemptWriter, RunLayout

pq: Any = importlib.import_module("pyarrow.parquet")
"""pyarrow.parquet (its functions carry no annotations, so it is used as Any)."""


class OutputConflict(Exception):
    """A part of this attempt already exists: somebody else writes this attempt."""


@dataclass(frozen=True)
class Provenance:
    run_id: str
    plan_digest: str
    shard: int
    attempt: int


def host_batch_files(dataset_dir: Path) -> list[Path]:
    """The host's batch files of one create call, in batch order (names are zero-padded)."""
    return sorted(path for path in dataset_dir.glob("*.parquet") if not path.name.startswith("."))


def unified_schema(files: Sequence[Path]) -> pa.Schema:
    """One schema for every batch (permissive promotion, as the host does when it loads a dataset)."""
    schemas = [pq.read_schema(path) for path in files]
    if not schemas:  # a drain before any batch completed: no data columns
        return pa.schema([])
    return pa.unify_schemas(schemas, promote_options="permissive").remove_metadata()


def with_provenance(table: pa.Table, first_index: int, provenance: Provenance) -> pa.Table:
    rows = table.num_rows
    columns = {
        INDEX_COLUMN: pa.array(range(first_index, first_index + rows), type=pa.int64()),
        RUN_ID_COLUMN: pa.array([provenance.run_id] * rows, type=pa.string()),
        PLAN_DIGEST_COLUMN: pa.array([provenance.plan_digest] * rows, type=pa.string()),
        SHARD_COLUMN: pa.array([provenance.shard] * rows, type=pa.int32()),
        ATTEMPT_COLUMN: pa.array([provenance.attempt] * rows, type=pa.int32()),
    }
    for name, column in columns.items():
        table = table.append_column(name, column)
    return table


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns, in order: cast, or all null where a batch lacks one."""
    columns = []
    for item in schema:
        if item.name in table.column_names:
            columns.append(table.column(item.name).cast(item.type))
        else:
            columns.append(pa.nulls(table.num_rows, type=item.type))
    return pa.Table.from_arrays(columns, schema=schema)


def clashing_columns(names: Sequence[str]) -> list[str]:
    return [name for name in names if name in PROVENANCE_COLUMNS]


def write_parts(
    layout: RunLayout,
    batches: Sequence[tuple[Path, int]],
    *,
    schema: pa.Schema,
    first_part: int,
    provenance: Provenance,
) -> list[OutputPart]:
    """Publish one part per host batch file, given as (file, global index of its first row); parts numbered
    from ``first_part``. Empty batches publish nothing."""
    parts: list[OutputPart] = []
    writer = AttemptWriter(layout, provenance.shard, provenance.attempt)
    for source, first_index in batches:
        table = conform(pq.read_table(source), schema)
        if table.num_rows == 0:
            continue
        table = with_provenance(table, first_index, provenance)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        number = first_part + len(parts)
        part = writer.publish_part(
            number, sink.getvalue().to_pybytes(), records=table.num_rows, first_index=first_index
        )
        if part is None:
            path = layout.output_part(provenance.shard, provenance.attempt, number)
            raise OutputConflict(f"output part {str(path)!r} already exists")
        parts.append(part)
    return parts


def consecutive(files: Sequence[Path], first_index: int) -> list[tuple[Path, int]]:
    """``files`` paired with the global index of their first row when their rows follow each other from
    ``first_index`` (one create call's batch files, all of them present)."""
    out: list[tuple[Path, int]] = []
    index = first_index
    for path in files:
        out.append((path, index))
        index += batch_rows(path)
    return out


def output_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of every part: the data columns, then the provenance columns."""
    empty = with_provenance(schema.empty_table(), 0, Provenance("", "", 0, 1))
    return empty.schema


def column_types(schema: pa.Schema) -> tuple[ColumnType, ...]:
    return tuple(ColumnType(name=item.name, type=str(item.type)) for item in schema)


def batch_number(path: Path) -> int | None:
    """The host's batch (row group) number from its file name ``batch_NNNNN.parquet``; None for other names."""
    stem = path.name.removesuffix(".parquet")
    digits = stem.removeprefix("batch_")
    if stem == path.name or digits == stem or not digits.isascii() or not digits.isdigit():
        return None
    return int(digits)


def batch_rows(path: Path) -> int:
    """Rows in one Parquet file (from its footer)."""
    rows: int = pq.read_metadata(path).num_rows
    return rows


class ProgressWriter:
    """Replaces ``progress.json`` of one attempt; remembers records done."""

    def __init__(self, layout: RunLayout, shard: int, attempt: int, records_total: int) -> None:
        self.writer = AttemptWriter(layout, shard, attempt)
        self.records_total = records_total
        self.records_done = 0

    def publish(self, state: WorkerState, error: WorkerError | None = None) -> bool:
        """Replace the record; a failure is logged, never raised: progress is not evidence of anything."""
        try:
            self._write(state, error)
        except Exception as exc:
            print(f"ddslurm-worker: progress.json not written: {exc}", file=sys.stderr)
            return False
        return True

    def _write(self, state: WorkerState, error: WorkerError | None) -> None:
        self.writer.write_progress(
            WorkerProgress(
                shard=self.writer.shard,
                attempt=self.writer.attempt,
                state=state,
                records_total=self.records_total,
                records_done=self.records_done,
                error=error,
            )
        )
