"""``merge --compact``: row groups of exactly N rows, encoded on every core, spliced into the files in order.

One Parquet writer encodes its row groups one after another on one thread, and encoding (dictionaries, zstd) is
most of a compacting merge's work. So :class:`CompactWriter` encodes each row group on its own, as a one-row-group
Parquet file in memory, on ``ENCODERS`` threads at once (Arrow and zstd release the GIL), while the caller reads
and checks the next parts; the encoded row groups are then appended to the merge's files strictly in order by the
splice (:class:`~data_designer.slurm.runtime.merge._splice.SpliceWriter`: their column chunks copied, one footer
per file), exactly as whole parts are spliced. Row groups are cut as :class:`MergeWriter` cuts them (exactly N rows,
or what is left of a file), every encoding uses the same writer options and the same dictionary choice (made once,
from the first row group), and the order of appends is the order of the rows: the bytes do not depend on timing.

Memory: the row group filling (fewer than N rows plus the slice that crossed it) and at most ``ENCODERS`` row groups
being encoded, so about ``(ENCODERS + 1) * N`` rows; ``max_rows_held`` counts them until each is appended.
"""

from __future__ import annotations

import contextlib
import importlib
import io
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

from data_designer.slurm.contracts.records import MergeFile
from data_designer.slurm.runtime.merge._footer import scan_footer, schema_field
from data_designer.slurm.runtime.merge._splice import SpliceWriter, footer_bytes
from data_designer.slurm.runtime.merge._writer import COMPRESSION, MergeWriter, dictionary_columns
from data_designer.slurm.runtime.store import FileModes

pq: Any = importlib.import_module("pyarrow.parquet")

ENCODERS = 2
"""Row groups encoded at once."""


class CompactWriter(MergeWriter):
    """:class:`MergeWriter`'s compacting cut, with the row groups encoded in parallel and spliced in order."""

    def __init__(
        self,
        directory: Path,
        schema: pa.Schema,
        *,
        max_rows_per_file: int,
        provenance: bool,
        modes: FileModes,
        row_group_rows: int,
    ) -> None:
        super().__init__(
            directory,
            schema,
            max_rows_per_file=max_rows_per_file,
            provenance=provenance,
            modes=modes,
            row_group_rows=row_group_rows,
        )
        self._splicer = SpliceWriter(directory, max_rows_per_file=max_rows_per_file, modes=modes)
        self._pool: ThreadPoolExecutor | None = None
        self._in_flight: deque[tuple[Future[bytes], int, int]] = deque()
        self._known_schema = b""

    def _submit(self, pending: list[tuple[pa.Table, int]]) -> None:
        if not pending:
            return
        if self._dictionary is None:
            self._dictionary = dictionary_columns(pending[0][0])
        while len(self._in_flight) >= ENCODERS:
            self._append_oldest()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=ENCODERS, thread_name_prefix="merge-compact")
        rows = sum(table.num_rows for table, _ in pending)
        self._cut += rows
        tables = [table for table, _ in pending]
        self._in_flight.append((self._pool.submit(self._encode, tables), rows, pending[0][1]))
        self._encoding_rows += rows
        self.max_rows_held = max(self.max_rows_held, self._buffered_rows + self._encoding_rows)

    def _encode(self, tables: list[pa.Table]) -> bytes:
        """One row group of ``tables``' rows as a whole Parquet file, with the merge's writer options."""
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        sink = io.BytesIO()
        writer = pq.ParquetWriter(
            sink,
            self.schema,
            compression=COMPRESSION,
            use_dictionary=self._dictionary if self._dictionary is not None else True,
            write_statistics=True,
            store_schema=True,
        )
        try:
            writer.write_table(table, row_group_size=max(1, table.num_rows))
        finally:
            writer.close()
        return sink.getvalue()

    def _append_oldest(self) -> None:
        future, rows, first_index = self._in_flight.popleft()
        data = future.result()
        footer = scan_footer(footer_bytes(data), known_schema=self._known_schema)
        self._known_schema = schema_field(footer.schema_key)
        self._splicer.add(data, footer, rows=rows, first_index=first_index)
        self.row_group_sizes.append(rows)
        self._encoding_rows -= rows

    def close(self) -> list[MergeFile]:
        """Encode what is buffered, append every row group in order and close the last file; the files written."""
        self._submit(self._take_buffer())
        while self._in_flight:
            self._append_oldest()
        self._stop_pool()
        self.files = self._splicer.close()
        return self.files

    def abort(self) -> None:
        for future, _, _ in self._in_flight:
            future.cancel()
        with contextlib.suppress(Exception):
            for future, _, _ in self._in_flight:
                future.result()
        self._in_flight.clear()
        self._stop_pool()
        self._splicer.abort()

    def _stop_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
