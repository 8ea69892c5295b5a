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

Page indexes (``_page_index.py``; the worker writes none, so this is the uncommon path): a part that has them
contributes only its column chunks to the file's data; its ColumnIndex blocks are copied and its OffsetIndex blocks
re-encoded with every ``PageLocation.offset`` moved by the part's displacement, and both are laid out after the
file's last column chunk (all column indexes, then all offset indexes, in footer order: where a single-file
writer puts them, so a reader fetches the page index of a file in one range), with the footer's offsets and
offset index lengths pointing at them. A part whose page indexes are not the bytes between its column chunks and
its footer, or do not parse, is a :class:`SpliceMismatch` too.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

from data_designer.slurm.contracts.records import MergeFile
from data_designer.slurm.runtime.merge._footer import FooterScan, Slot, ThriftError, _zigzag
from data_designer.slurm.runtime.merge._page_index import index_tail, shift_offset_index
from data_designer.slurm.runtime.merge._writer import PART_NAME, HashingSink
from data_designer.slurm.runtime.store import FileModes

MAGIC = b"PAR1"
_COLUMN_INDEXES, _OFFSET_INDEXES = 0, 1
"""The two areas of a file's page indexes (a :data:`Slot`'s first member)."""
_OFFSET_INDEX, _OFFSET_INDEX_LENGTH, _COLUMN_INDEX = 4, 5, 6


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
        self._row_groups: list[bytes | list[bytes | Slot]] = []
        """Each part's row groups already moved, renumbered and encoded: the footer's memory is its bytes (a part
        with page indexes: pieces around the slots for their offsets, known when the file's data ends)."""
        self._indexes: tuple[list[bytes], list[bytes]] = ([], [])
        """The file's column indexes and offset indexes, written after its last column chunk."""
        self._index_sizes = [0, 0]
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
        end = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]
        if footer.page_indexes:
            end = self._add_page_indexes(data, footer, end)
        else:
            self._row_groups.append(footer.row_groups(self._size - 4, self._groups))
        self._groups += footer.groups
        self._write(memoryview(data)[4:end])
        self._rows += rows

    def _add_page_indexes(self, data: bytes | bytearray | mmap.mmap, footer: FooterScan, end: int) -> int:
        """Keep the part's page indexes for the file's index areas and encode its row groups around their slots;
        the end of its column chunks (what is copied)."""
        delta = self._size - 4
        try:
            chunks_end = index_tail(footer.page_indexes, end)
            if any(offset > chunks_end for offset in footer.offsets()):
                raise ThriftError("an offset past the column chunks")
            blocks = [
                (
                    bytes(data[ref.column_index[0] : sum(ref.column_index)]) if ref.column_index else None,
                    shift_offset_index(
                        bytes(data[ref.offset_index[0] : sum(ref.offset_index)]), delta, limit=chunks_end
                    )
                    if ref.offset_index
                    else None,
                )
                for ref in footer.page_indexes
            ]
        except ThriftError as exc:
            raise SpliceMismatch(f"a page index the splice cannot move ({exc})") from exc
        moves: dict[int, int | Slot] = {}
        for ref, (column_index, offset_index) in zip(footer.page_indexes, blocks, strict=True):
            if column_index is not None:
                moves[ref.fields[_COLUMN_INDEX]] = self._keep_index(_COLUMN_INDEXES, column_index)
            if offset_index is not None:
                moves[ref.fields[_OFFSET_INDEX]] = self._keep_index(_OFFSET_INDEXES, offset_index)
                moves[ref.fields[_OFFSET_INDEX_LENGTH]] = len(offset_index)
        self._row_groups.append(footer.moved_row_groups(delta, self._groups, moves))
        return chunks_end

    def _keep_index(self, area: int, block: bytes) -> Slot:
        self._indexes[area].append(block)
        position = self._index_sizes[area]
        self._index_sizes[area] += len(block)
        return area, position

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
        self._indexes = ([], [])
        self._index_sizes = [0, 0]
        self._groups = 0
        self._rows = 0
        self._first = first_index
        self._write(MAGIC)

    def _close_file(self) -> None:
        if self._sink is None or self._template is None:
            return
        starts = (self._size, self._size + self._index_sizes[_COLUMN_INDEXES])
        for block in (*self._indexes[_COLUMN_INDEXES], *self._indexes[_OFFSET_INDEXES]):
            self._write(block)
        self._indexes = ([], [])
        elements = [
            group if isinstance(group, bytes) else b"".join(_filled(piece, starts) for piece in group)
            for group in self._row_groups
        ]
        pieces = self._template.footer_pieces(num_rows=self._rows, groups=self._groups, elements=elements)
        self._row_groups = []  # held by ``pieces`` only, written piece by piece: never a joined copy of the footer
        del elements
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


def _filled(piece: bytes | Slot, starts: tuple[int, int]) -> bytes:
    if isinstance(piece, bytes):
        return piece
    area, position = piece
    return _zigzag(starts[area] + position)
