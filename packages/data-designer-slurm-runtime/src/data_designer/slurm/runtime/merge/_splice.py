"""Splicing whole validated parts into merged Parquet files without decoding their data pages.

A Parquet file is ``PAR1``, its column chunks, its footer (Thrift ``FileMetaData``), the footer's length and
``PAR1``. When every source part is taken whole, with the unified schema and the provenance columns kept (a merge
of complete shards, the usual case), a merged file is the parts' column-chunk regions copied one after another,
and one footer: the first part's schema and key/value metadata (the Arrow schema), the row count summed, and every
part's row groups with each absolute offset moved by where its region now starts (row group and column chunk
offsets, data, dictionary and index page offsets, page index and bloom filter offsets). The bytes of the pages are
the bytes the worker published, checked against their sha256: nothing is decoded or re-encoded, so the merge runs
at the speed of reading, hashing and writing. A part whose schema bytes differ from the file's first part
(:class:`SpliceMismatch`) makes the merge fall back to re-encoding (``_writer.MergeWriter``).
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

from data_designer.slurm.contracts.records import MergeFile
from data_designer.slurm.runtime.merge._footer import FooterScan
from data_designer.slurm.runtime.merge._writer import PART_NAME, HashingSink
from data_designer.slurm.runtime.store import FileModes

MAGIC = b"PAR1"


class SpliceMismatch(Exception):
    """A part's schema differs from the file's first part's: these parts cannot share a footer."""


def footer_bytes(data: bytes | bytearray | mmap.mmap) -> bytes:
    """The Thrift footer of a Parquet file's bytes (ValueError when the framing is not Parquet's)."""
    if len(data) < 12 or data[:4] != MAGIC or data[-4:] != MAGIC:
        raise ValueError("not framed as Parquet (PAR1 ... PAR1)")
    (length,) = struct.unpack("<I", data[-8:-4])
    if length > len(data) - 12:
        raise ValueError("its footer length is larger than the file")
    return bytes(data[-8 - length : -8])


class SpliceWriter:
    """Concatenates whole parts (in global index order) into files of at most ``max_rows_per_file`` rows."""

    def __init__(self, directory: Path, *, max_rows_per_file: int, modes: FileModes) -> None:
        self.directory = directory
        self.max_rows_per_file = max_rows_per_file
        self.modes = modes
        self.files: list[MergeFile] = []
        self._sink: HashingSink | None = None
        self._template: FooterScan | None = None
        self._row_groups: list[bytes] = []
        """Each part's row groups already moved, renumbered and encoded: the footer's memory is its bytes."""
        self._groups = 0
        self._size = 0
        self._rows = 0
        self._first = 0

    def add(self, data: bytes | bytearray | mmap.mmap, footer: FooterScan, *, rows: int, first_index: int) -> None:
        """Append one part (its bytes and scanned footer), starting a new file when this one would grow too big."""
        if self._sink is not None and (self._rows + rows > self.max_rows_per_file):
            self._close_file()
        if self._sink is None:
            self._open_file(footer, first_index)
        elif self._template is None or footer.schema_key != self._template.schema_key:
            raise SpliceMismatch("the parts' schemas differ")
        region = memoryview(data)[4 : len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]]
        self._row_groups.append(footer.row_groups(self._size - 4, self._groups))
        self._groups += footer.groups
        self._write(region)
        self._rows += rows

    def close(self) -> list[MergeFile]:
        self._close_file()
        return self.files

    def abort(self) -> None:
        if self._sink is not None:
            self._sink.close()

    def _write(self, data: bytes | memoryview) -> None:
        assert self._sink is not None
        self._sink.write(data)
        self._size += len(data)

    def _open_file(self, footer: FooterScan, first_index: int) -> None:
        self._sink = HashingSink(self.directory / PART_NAME.format(len(self.files)), self.modes.file)
        self._size = 0
        self._template = footer
        self._row_groups = []
        self._groups = 0
        self._rows = 0
        self._first = first_index
        self._write(MAGIC)

    def _close_file(self) -> None:
        if self._sink is None or self._template is None:
            return
        pieces = self._template.footer_pieces(num_rows=self._rows, groups=self._groups, elements=self._row_groups)
        self._row_groups = []  # held by ``pieces`` only, written piece by piece: never a joined copy of the footer
        length = 0
        for piece in pieces:
            self._write(piece)
            length += len(piece)
        del pieces
        self._write(struct.pack("<I", length) + MAGIC)
        self.files.append(self._sink.finish(records=self._rows, first_index=self._first))
        self._sink = None
        self._template = None
        self._row_groups = []
