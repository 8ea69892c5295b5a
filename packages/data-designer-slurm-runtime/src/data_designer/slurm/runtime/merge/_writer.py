"""Streaming rows into the merge's Parquet files, with memory bounded by one row group, never by the run.

Rows arrive in global index order, a slice at a time. They are cast to the unified schema (a column that is null
in one shard takes the others' type), buffered up to one row group, and written to ``part-<k:05d>.parquet`` files
of at most ``max_rows_per_file`` rows each. The default merge's buffer is flushed at ``ROW_GROUP_ROWS`` rows or
``ROW_GROUP_BYTES``, whichever comes first; a compacting merge (``row_group_rows=N``, ``merge --compact``) cuts
the buffer at exactly N rows, or at the end of a file, so every row group holds N rows but a file's last, whatever
the parts' sizes. Both hold at most the row group filling (fewer than its target plus the slice that crossed it)
and the one being encoded: ``max_rows_held`` counts them, the encoding one until it is joined.
Every file is written through a hashing sink (its sha256 and size are known when it closes, without reading it
back), fsynced, and given the workspace's file mode. The writer options are fixed, so the same rows give the same
bytes.

A full buffer is encoded on one background thread while the caller reads and checks the next parts (Arrow and
hashlib release the GIL, so the two overlap on two cores); at most one row group is being encoded while the next
one fills, in order, so memory stays bounded by two row groups and the bytes do not depend on the timing. An
error of the encoding is raised by the ``write`` that fills the next buffer, or by ``close``. A compacting merge
goes further (``_compact.CompactWriter``): its row groups are encoded on two threads at once and spliced in order.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

from data_designer.slurm.contracts.records import PROVENANCE_COLUMNS, MergeFile
from data_designer.slurm.runtime.store import FileModes

pq: Any = importlib.import_module("pyarrow.parquet")

ROW_GROUP_ROWS = 65_536
ROW_GROUP_BYTES = 16 * 1024 * 1024
"""A row group is written once either bound is reached: a merge holds two (one filling, one being encoded) and
one part in memory."""
COMPRESSION = "zstd"
PART_NAME = "part-{:05d}.parquet"


class HashingSink:
    """A binary file that hashes what is written to it (pyarrow writes through ``write``)."""

    def __init__(self, path: Path, mode: int) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self._mode = mode
        self._hash = hashlib.sha256()
        self.size = 0
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data)
        self._hash.update(view)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self.size += len(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        return None

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            os.fchmod(self._fd, self._mode)
            os.fsync(self._fd)
        finally:
            os.close(self._fd)

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()

    def finish(self, *, records: int, first_index: int) -> MergeFile:
        """Close the file and describe it for the merge manifest (its name, size and sha256 are this sink's)."""
        self.close()
        return MergeFile(
            path=self.path.name, records=records, first_index=first_index, bytes=self.size, sha256=self.sha256
        )


class MergeWriter:
    """Writes rows (in global index order) into the files of one merge directory."""

    def __init__(
        self,
        directory: Path,
        schema: pa.Schema,
        *,
        max_rows_per_file: int,
        provenance: bool,
        modes: FileModes,
        row_group_rows: int | None = None,
    ) -> None:
        """``row_group_rows``: None for the default merge's row groups (``ROW_GROUP_ROWS`` rows or
        ``ROW_GROUP_BYTES``); N (at most ``max_rows_per_file``) for row groups of exactly N rows but a file's last."""
        self.directory = directory
        self.source_schema = schema
        self.schema = schema if provenance else pa.schema([f for f in schema if f.name not in PROVENANCE_COLUMNS])
        self.max_rows_per_file = max_rows_per_file
        self.provenance = provenance
        self.modes = modes
        self.row_group_rows = row_group_rows
        self.files: list[MergeFile] = []
        self.row_group_sizes: list[int] = []
        """The rows of every row group written, in order (read once ``close`` returned)."""
        self.max_rows_held = 0
        """The most rows buffered and being encoded at once: the writer's memory, in rows."""
        self._buffer: deque[tuple[pa.Table, int]] = deque()
        self._buffered_rows = 0
        self._buffered_bytes = 0
        self._sink: HashingSink | None = None
        self._writer: Any = None
        self._file_rows = 0
        self._file_first = 0
        self._cut = 0
        """Rows handed to the encoder so far (where the next compacted row group starts)."""
        self._encoding_rows = 0
        self._encoder: ThreadPoolExecutor | None = None
        self._encoding: Future[None] | None = None
        self._dictionary: list[str] | None = None
        """The columns written dictionary-encoded, chosen once from the first rows (:func:`dictionary_columns`)."""

    def write(self, table: pa.Table, first_index: int) -> None:
        """Rows whose first one has global index ``first_index`` (consecutive within ``table``)."""
        if table.num_rows == 0:
            return
        table = _conform(table, self.source_schema)
        if not self.provenance:
            table = table.select([field.name for field in self.schema])
        self._buffer.append((table, first_index))
        self._buffered_rows += table.num_rows
        self._buffered_bytes += table.nbytes
        self.max_rows_held = max(self.max_rows_held, self._buffered_rows + self._encoding_rows)
        if self.row_group_rows is None:
            if self._buffered_rows >= ROW_GROUP_ROWS or self._buffered_bytes >= ROW_GROUP_BYTES:
                self._submit(self._take_buffer())
            return
        while self._buffered_rows >= (size := self._next_group_rows(self.row_group_rows)):
            self._submit(self._take_rows(size))

    def _next_group_rows(self, target: int) -> int:
        """The rows of the next compacted row group: ``target``, or what is left of the current file."""
        return min(target, self.max_rows_per_file - self._cut % self.max_rows_per_file)

    def _submit(self, pending: list[tuple[pa.Table, int]]) -> None:
        self._wait()  # the previous row group is written: one at a time, in order
        if self._encoder is None:
            self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="merge-writer")
        rows = sum(table.num_rows for table, _ in pending)
        self._cut += rows
        self._encoding_rows = rows
        self._encoding = self._encoder.submit(self._flush, pending)

    def close(self) -> list[MergeFile]:
        """Write what is buffered and close the last file; the files written, in order."""
        self._wait()
        self._flush(self._take_buffer())
        self._close_file()
        self._stop()
        return self.files

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self._wait()
        self._stop()
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        if self._sink is not None:
            self._sink.close()

    def _take_buffer(self) -> list[tuple[pa.Table, int]]:
        pending, self._buffer = list(self._buffer), deque()
        self._buffered_rows = self._buffered_bytes = 0
        return pending

    def _take_rows(self, rows: int) -> list[tuple[pa.Table, int]]:
        """The buffer's first ``rows`` rows (the last slice taken split), the rest left buffered."""
        pending: list[tuple[pa.Table, int]] = []
        wanted = rows
        while wanted:
            table, first_index = self._buffer[0]
            if table.num_rows <= wanted:
                pending.append(self._buffer.popleft())
                wanted -= table.num_rows
                continue
            pending.append((table.slice(0, wanted), first_index))
            self._buffer[0] = (table.slice(wanted), first_index + wanted)
            wanted = 0
        self._buffered_rows -= rows  # (the bytes bound only the default merge's row groups: not counted here)
        return pending

    def _wait(self) -> None:
        """Wait for the row group being encoded; raises what its encoding raised."""
        encoding, self._encoding = self._encoding, None
        if encoding is not None:
            encoding.result()
        self._encoding_rows = 0

    def _stop(self) -> None:
        if self._encoder is not None:
            self._encoder.shutdown(wait=True)
            self._encoder = None

    def _flush(self, pending: list[tuple[pa.Table, int]]) -> None:
        """Write ``pending`` as row groups, starting a new file wherever the current one is full."""
        group: list[pa.Table] = []
        grouped = 0
        for table, first_index in pending:
            offset = 0
            while offset < table.num_rows:
                if self._writer is None:
                    if self._dictionary is None:
                        self._dictionary = dictionary_columns(table)
                    self._open_file(first_index + offset)
                room = self.max_rows_per_file - self._file_rows - grouped
                piece = table.slice(offset, min(room, table.num_rows - offset))
                group.append(piece)
                grouped += piece.num_rows
                offset += piece.num_rows
                if self._file_rows + grouped >= self.max_rows_per_file:
                    self._write_group(group)
                    group, grouped = [], 0
                    self._close_file()
        if group:
            self._write_group(group)

    def _write_group(self, pieces: list[pa.Table]) -> None:
        table = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self._file_rows += table.num_rows
        self.row_group_sizes.append(table.num_rows)

    def _open_file(self, first_index: int) -> None:
        path = self.directory / PART_NAME.format(len(self.files))
        self._sink = HashingSink(path, self.modes.file)
        self._writer = pq.ParquetWriter(
            self._sink,
            self.schema,
            compression=COMPRESSION,
            use_dictionary=self._dictionary if self._dictionary is not None else True,
            write_statistics=True,
            store_schema=True,
        )
        self._file_rows = 0
        self._file_first = first_index

    def _close_file(self) -> None:
        if self._writer is None or self._sink is None:
            return
        self._writer.close()
        self.files.append(self._sink.finish(records=self._file_rows, first_index=self._file_first))
        self._writer = None
        self._sink = None


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` cast to the unified schema (only null columns change type: the sources decided it is lossless)."""
    if table.schema.equals(schema):
        return table
    return pa.Table.from_arrays([table.column(field.name).cast(field.type) for field in schema], schema=schema)


DICTIONARY_MAX_DISTINCT_SHARE = 0.5
"""A text column is dictionary-encoded when at most this share of its first rows are distinct values."""


def dictionary_columns(sample: pa.Table) -> list[str]:
    """The columns worth a dictionary, judged from ``sample`` (the first rows the writer encodes): every column but
    text or binary whose values are mostly distinct. A dictionary of generated prose is built up to its page limit
    and then abandoned for plain pages, which costs a fifth of the encoding time and saves no bytes under zstd;
    the provenance columns and categorical columns keep theirs."""
    pc: Any = importlib.import_module("pyarrow.compute")
    chosen: list[str] = []
    for field, column in zip(sample.schema, sample.columns, strict=True):
        kind = field.type
        textual = pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
        textual = textual or pa.types.is_large_binary(kind) or pa.types.is_string_view(kind)
        if not textual or sample.num_rows == 0:
            chosen.append(field.name)
            continue
        if pc.count_distinct(column).as_py() <= DICTIONARY_MAX_DISTINCT_SHARE * sample.num_rows:
            chosen.append(field.name)
    return chosen
