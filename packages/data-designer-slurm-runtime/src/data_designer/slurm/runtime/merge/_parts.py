"""Reading one source part for a merge, checked against its attempt's manifest before a row of it is used.

The part's bytes are read once: their size and sha256 must be the manifest's, the Parquet they hold must have
the manifest's row count and column types, and the provenance columns must say what the manifest says: run,
plan, shard, attempt, and global indices ``first_index .. first_index + records - 1`` in order. Anything else is
a :class:`CheckFailedError` (exit 6) naming the shard, the attempt and the file: a merge never guesses.
"""

from __future__ import annotations

import hashlib
import importlib
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import pyarrow as pa

from data_designer.slurm.contracts import CheckFailedError
from data_designer.slurm.contracts.records import (
    ATTEMPT_COLUMN,
    INDEX_COLUMN,
    PLAN_DIGEST_COLUMN,
    RUN_ID_COLUMN,
    SHARD_COLUMN,
)
from data_designer.slurm.runtime.merge._footer import FooterScan, scan_footer, schema_field
from data_designer.slurm.runtime.merge._sources import SourceSlice
from data_designer.slurm.runtime.merge._splice import footer_bytes
from data_designer.slurm.runtime.store import HASH_BUFFER_BYTES, RunFileRefused, open_run_file, stream_sha256

pq: Any = importlib.import_module("pyarrow.parquet")
numpy: Any = importlib.import_module("numpy")
_OPERATION = "merge"

SINGLE_READ_BYTES = 32 * 1024 * 1024
"""Parts up to this size are read once and hashed as they are read; larger ones are hashed first, then mapped."""

PartBytes: TypeAlias = bytes | bytearray | mmap.mmap
"""A verified part's bytes: read into memory, or mapped read-only."""


@dataclass(frozen=True)
class _Layout:
    """What the footers of one schema key share: the Arrow schema, ``_dd_index``'s field and the leaf columns."""

    schema: pa.Schema
    index: int
    leaves: dict[str, int]


class PartReader:
    """Reads and checks source parts; keeps the last one, since two slices may come from one part."""

    def __init__(self, run_dir: Path, *, run_id: str, plan_digest: str) -> None:
        self.run_dir = run_dir
        self.run_id = run_id
        self.plan_digest = plan_digest
        self.parts_read = 0
        self.bytes_read = 0
        self._last: tuple[str, pa.Table] | None = None
        self._known_schema = b""
        """The last footer's encoded schema: the next part's is most likely the same."""
        self._layouts: dict[bytes, _Layout] = {}
        self._hash_buffer: bytearray | None = None

    def rows(self, source: SourceSlice) -> pa.Table:
        """The slice's rows, from a part that passed every check."""
        if self._last is None or self._last[0] != source.path:
            self._last = (source.path, self._checked(source))
        return self._last[1].slice(source.offset, source.take.records)

    def whole(self, source: SourceSlice) -> tuple[PartBytes, FooterScan]:
        """The bytes and scanned footer of a part taken whole, after the same checks as :meth:`rows`, decoding only
        ``_dd_index`` (the data pages are covered by the sha256): what the splicing merge copies."""
        return self._whole(source, self._verified_bytes(source))

    def _whole(self, source: SourceSlice, data: PartBytes) -> tuple[PartBytes, FooterScan]:
        try:
            footer = scan_footer(footer_bytes(data), known_schema=self._known_schema)
            self._known_schema = schema_field(footer.schema_key)
            # pyarrow parses the footer again (about 25 us a part, a fifth of the walk): decoding ``_dd_index``
            # needs its reader, and statistics cannot prove the order (docs/architecture/runtime.md, "Merges")
            parquet = pq.ParquetFile(pa.BufferReader(pa.py_buffer(data)))
            layout = self._layout(footer, parquet)
            _check_shape(source, footer.num_rows, layout.schema)
            if layout.index < 0:
                raise _bad(source, f"it has no {INDEX_COLUMN} column")
            index = parquet.reader.read_column(layout.index)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _bad(source, f"it is not readable Parquet ({exc})") from exc
        self._index(source, index)
        self._constant_columns(source, footer, layout, parquet)
        self._count(data)
        return data, footer

    def _layout(self, footer: FooterScan, parquet: Any) -> _Layout:
        """The Arrow schema and column positions footers with this schema key have (read once per key, from the
        first such part's reader)."""
        found = self._layouts.get(footer.schema_key)
        if found is None:
            schema = parquet.schema_arrow
            leaves = {parquet.metadata.schema.column(i).path: i for i in range(parquet.metadata.num_columns)}
            names = schema.names
            found = _Layout(
                schema=schema,
                index=names.index(INDEX_COLUMN) if INDEX_COLUMN in names else -1,
                leaves=leaves,
            )
            self._layouts[footer.schema_key] = found
        return found

    def _checked(self, source: SourceSlice) -> pa.Table:
        data = self._verified_bytes(source)
        try:
            # ParquetFile, not read_table: no dataset machinery (nor its pandas import) for one in-memory file; one
            # thread, since the merge's writer encodes the previous row group on the other core meanwhile.
            table = pq.ParquetFile(pa.BufferReader(pa.py_buffer(data))).read(use_threads=False)
        except (pa.ArrowException, OSError) as exc:
            raise _bad(source, f"it is not readable Parquet ({exc})") from exc
        _check_shape(source, table.num_rows, table.schema)
        if INDEX_COLUMN not in table.column_names:
            raise _bad(source, f"it has no {INDEX_COLUMN} column")
        self._index(source, table.column(INDEX_COLUMN))
        for column, value in self._constants(source):
            _check_constant(source, column, table.column(column), value)
        self._count(data)
        return table

    def _verified_bytes(self, source: SourceSlice) -> PartBytes:
        """The part's bytes, whose size and sha256 are the manifest's, with memory bounded by a constant before the
        hash is proven: a part up to :data:`SINGLE_READ_BYTES` is read once into a buffer of its manifest size and
        hashed as it is read (the bytes checked are the bytes used); a larger one is hashed streamed through a
        fixed buffer first, then mapped read-only from the same descriptor (its pages are the page cache's, not
        this process's heap), so a part that claims gigabytes costs a megabyte until it is proven."""
        path = self.run_dir / source.path
        try:
            fd = open_run_file(path)
        except FileNotFoundError as exc:
            raise _bad(source, "it is missing") from exc
        except RunFileRefused as exc:
            raise _bad(source, f"it is {exc.kind}, not a regular file") from exc
        except OSError as exc:
            raise _bad(source, f"it cannot be opened: {exc.strerror}") from exc
        try:
            size = os.fstat(fd).st_size
            if size != source.part.bytes:
                raise _bad(source, f"it has {size} bytes, its manifest says {source.part.bytes}")
            data: PartBytes | None = None
            if size <= SINGLE_READ_BYTES:
                data, digest, read = _read_hashing(fd, size)
            else:
                digest, read = stream_sha256(fd, memoryview(self._buffer()))
                os.lseek(fd, 0, os.SEEK_SET)
            if read != size:
                raise _bad(source, f"it has {read} bytes, its manifest says {source.part.bytes}")
            if digest != source.part.sha256:
                raise _bad(source, "its sha256 is not the manifest's (the bytes changed after they were published)")
            if data is None:
                data = mmap.mmap(fd, size, prot=mmap.PROT_READ) if size else b""
        except OSError as exc:
            raise _bad(source, f"it cannot be read: {exc.strerror}") from exc
        finally:
            os.close(fd)
        return data

    def _buffer(self) -> bytearray:
        if self._hash_buffer is None:
            self._hash_buffer = bytearray(HASH_BUFFER_BYTES)
        return self._hash_buffer

    def _count(self, data: PartBytes) -> None:
        self.parts_read += 1
        self.bytes_read += len(data)

    def _constant_columns(self, source: SourceSlice, footer: FooterScan, layout: _Layout, parquet: Any) -> None:
        """Run, plan, shard and attempt of every row, from the column statistics (no null, exact min = max = the
        expected value's bytes, over all row groups); a column without such statistics is decoded and compared."""
        for column, value in self._constants(source):
            position = layout.leaves.get(column)
            expected = _plain(layout.schema.field(column).type, value) if column in layout.schema.names else None
            proven = position is not None and expected is not None and footer.groups > 0
            for group in range(footer.groups if proven else 0):
                assert position is not None
                stats = footer.statistics(group, position)
                if stats is None or stats.null_count != 0 or stats.min_value != expected:
                    proven = False
                    break
                if stats.max_value != expected:
                    raise _bad(source, f"its {column} is not {value!r} in every row")
            if not proven:
                _check_constant(source, column, parquet.read(columns=[column], use_threads=False).column(column), value)

    def _constants(self, source: SourceSlice) -> tuple[tuple[str, object], ...]:
        return (
            (RUN_ID_COLUMN, self.run_id),
            (PLAN_DIGEST_COLUMN, self.plan_digest),
            (SHARD_COLUMN, source.shard),
            (ATTEMPT_COLUMN, source.attempt),
        )

    def _index(self, source: SourceSlice, index: pa.ChunkedArray) -> None:
        first = source.part.first_index
        values = index.chunk(0) if index.num_chunks == 1 else pa.concat_arrays(index.chunks)
        if (
            index.null_count
            or values.type != pa.int64()
            or not numpy.array_equal(
                _int64s(values), numpy.arange(first, first + source.part.records, dtype=numpy.int64)
            )
        ):
            raise _bad(source, f"its {INDEX_COLUMN} is not {first}..{first + source.part.records - 1} in order")


def _read_hashing(fd: int, size: int) -> tuple[bytearray, str, int]:
    """The first ``size`` bytes of ``fd`` (one more proves the file grew), their sha256 and how many were read."""
    data = bytearray(size + 1)
    view = memoryview(data)
    digest = hashlib.sha256()
    done = 0
    while done <= size:
        n = os.readv(fd, [view[done : min(size + 1, done + HASH_BUFFER_BYTES * 16)]])
        if n == 0:
            break
        digest.update(view[done : done + n])
        done += n
    view.release()
    del data[size:]
    return data, digest.hexdigest(), done


def _check_shape(source: SourceSlice, rows: int, schema: pa.Schema) -> None:
    """The part's row count and columns (names and Arrow types) are its manifest's."""
    if rows != source.part.records:
        raise _bad(source, f"it holds {rows} rows, its manifest says {source.part.records}")
    found = [(field.name, str(field.type)) for field in schema]
    expected = [(column.name, column.type) for column in source.columns]
    if found != expected:
        raise _bad(source, f"its columns are {found}, its manifest says {expected}")


def _plain(kind: pa.DataType, value: object) -> bytes | None:
    """``value`` as Parquet's statistics hold it for a column of ``kind`` (None: not a type proven this way)."""
    if isinstance(value, str) and kind in (pa.string(), pa.large_string()):
        return value.encode()
    if isinstance(value, int) and kind == pa.int32() and -(2**31) <= value < 2**31:
        return struct.pack("<i", value)
    if isinstance(value, int) and kind == pa.int64() and -(2**63) <= value < 2**63:
        return struct.pack("<q", value)
    return None


def _check_constant(source: SourceSlice, column: str, values: pa.ChunkedArray, value: object) -> None:
    """Every row of ``values`` is ``value``: its distinct values, compared as Python values. Nothing here converts a
    Python object to Arrow (``pa.scalar``, ``pc.equal(values, value)``), which imports pandas in pyarrow 24: 0.2 s
    and 50 MiB for a merge that never needs it."""
    pc: Any = importlib.import_module("pyarrow.compute")  # only for a column its statistics do not prove
    if values.null_count:
        raise _bad(source, f"its {column} is not {value!r} in every row")
    if len(values) == 0:
        return
    distinct = pc.unique(values)
    if len(distinct) != 1 or distinct[0].as_py() != value:
        raise _bad(source, f"its {column} is not {value!r} in every row")


def _int64s(values: pa.Array) -> Any:
    """An int64 Arrow array without nulls as a numpy view of its data buffer (pyarrow's own conversions between
    numpy and Arrow import pandas, a fifth of a second)."""
    return numpy.frombuffer(values.buffers()[1], dtype=numpy.int64, count=len(values), offset=values.offset * 8)


def _bad(source: SourceSlice, why: str) -> CheckFailedError:
    return CheckFailedError(
        f"shard {source.shard} attempt {source.attempt}: part {source.path} cannot be merged: {why}",
        code="part_invalid",
        operation=_OPERATION,
        file=source.path,
        hint="the part no longer matches what its attempt published (edited, truncated or lost on disk): run "
        f"'data-designer slurm retry RUN --shard {source.shard}': it verifies the shard's parts, sets the "
        "damaged one aside (never deletes it) and generates exactly its records again. Nothing was written under "
        "the merge's final name",
    )
