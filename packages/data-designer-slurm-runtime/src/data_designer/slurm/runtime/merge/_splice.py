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

import struct
from pathlib import Path

from data_designer.slurm.contracts.records import MergeFile
from data_designer.slurm.runtime.merge._thrift import LIST, STRUCT, Raw, Spec, Struct, ThriftList, encode_struct
from data_designer.slurm.runtime.merge._writer import PART_NAME, HashingSink
from data_designer.slurm.runtime.store import FileModes

MAGIC = b"PAR1"
_SCHEMA, _NUM_ROWS, _ROW_GROUPS, _KEY_VALUE = 2, 3, 4, 5
_RG_COLUMNS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 5, 7
_CC_FILE_OFFSET, _CC_META, _CC_OFFSET_INDEX, _CC_COLUMN_INDEX = 2, 3, 4, 6
_META_OFFSETS = (9, 10, 11, 14)
"""ColumnMetaData: data_page_offset, index_page_offset, dictionary_page_offset, bloom_filter_offset."""
FOOTER_SPEC: Spec = {
    _ROW_GROUPS: {
        _RG_COLUMNS: {
            _CC_FILE_OFFSET: None,
            _CC_OFFSET_INDEX: None,
            _CC_COLUMN_INDEX: None,
            _CC_META: dict.fromkeys(_META_OFFSETS),
        },
        _RG_FILE_OFFSET: None,
        _RG_ORDINAL: None,
    }
}
"""What a spliced part's footer is decoded into (:func:`~._thrift.decode_partial`): the row groups' offsets and
ordinals; the schema, statistics and metadata stay raw bytes, copied as they are."""


class SpliceMismatch(Exception):
    """A part's schema differs from the file's first part's: these parts cannot share a footer."""


def footer_bytes(data: bytes) -> bytes:
    """The Thrift footer of a Parquet file's bytes (ValueError when the framing is not Parquet's)."""
    if len(data) < 12 or data[:4] != MAGIC or data[-4:] != MAGIC:
        raise ValueError("not framed as Parquet (PAR1 ... PAR1)")
    (length,) = struct.unpack("<I", data[-8:-4])
    if length > len(data) - 12:
        raise ValueError("its footer length is larger than the file")
    return data[-8 - length : -8]


class SpliceWriter:
    """Concatenates whole parts (in global index order) into files of at most ``max_rows_per_file`` rows."""

    def __init__(self, directory: Path, *, max_rows_per_file: int, modes: FileModes) -> None:
        self.directory = directory
        self.max_rows_per_file = max_rows_per_file
        self.modes = modes
        self.files: list[MergeFile] = []
        self._sink: HashingSink | None = None
        self._template: Struct | None = None
        self._schema_key: tuple[bytes, bytes] | None = None
        self._row_groups: list[bytes] = []
        """Each row group already shifted, renumbered and encoded: the footer's memory is its bytes."""
        self._rows = 0
        self._first = 0

    def add(self, data: bytes, footer: Struct, *, rows: int, first_index: int) -> None:
        """Append one part (its bytes and decoded footer), starting a new file when this one would grow too big."""
        key = _schema_key(footer)
        if self._sink is not None and (self._rows + rows > self.max_rows_per_file):
            self._close_file()
        if self._sink is None:
            self._open_file(footer, key, first_index)
        elif key != self._schema_key:
            raise SpliceMismatch("the parts' schemas differ")
        assert self._sink is not None
        region = memoryview(data)[4 : len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]]
        delta = self._sink.size - 4
        groups = footer.get(_ROW_GROUPS)
        if not isinstance(groups, ThriftList):
            raise SpliceMismatch("a part without row groups")
        for group in groups.values:
            assert isinstance(group, Struct)
            moved = _shifted(group, delta)
            if moved.get(_RG_ORDINAL) is not None:
                moved.set(_RG_ORDINAL, len(self._row_groups))
            self._row_groups.append(encode_struct(moved))
        self._sink.write(region)
        self._rows += rows

    def close(self) -> list[MergeFile]:
        self._close_file()
        return self.files

    def abort(self) -> None:
        if self._sink is not None:
            self._sink.close()

    def _open_file(self, footer: Struct, key: tuple[bytes, bytes], first_index: int) -> None:
        self._sink = HashingSink(self.directory / PART_NAME.format(len(self.files)), self.modes.file)
        self._sink.write(MAGIC)
        self._template = footer
        self._schema_key = key
        self._row_groups = []
        self._rows = 0
        self._first = first_index

    def _close_file(self) -> None:
        if self._sink is None or self._template is None:
            return
        meta = Struct(list(self._template.fields))
        meta.set(_NUM_ROWS, self._rows)
        meta.set(_ROW_GROUPS, Raw(_list_header(len(self._row_groups), STRUCT) + b"".join(self._row_groups)))
        encoded = encode_struct(meta)
        self._sink.write(encoded + struct.pack("<I", len(encoded)) + MAGIC)
        self._sink.close()
        self.files.append(
            MergeFile(
                path=self._sink.path.name,
                records=self._rows,
                first_index=self._first,
                bytes=self._sink.size,
                sha256=self._sink.sha256,
            )
        )
        self._sink = None
        self._template = None


def _list_header(size: int, element: int) -> bytes:
    """A compact-protocol list header (what the encoder writes before a list's elements)."""
    if size < 15:
        return bytes([(size << 4) | element])
    out = bytearray([0xF0 | element])
    while size >= 0x80:
        out.append((size & 0x7F) | 0x80)
        size >>= 7
    out.append(size)
    return bytes(out)


def _schema_key(footer: Struct) -> tuple[bytes, bytes]:
    """What parts sharing one footer must agree on: the Parquet schema and the key/value metadata (Arrow's)."""
    return tuple(_encoded(footer.get(fid)) for fid in (_SCHEMA, _KEY_VALUE))  # type: ignore[return-value]


def _encoded(value: object) -> bytes:
    if value is None:
        return b""
    if isinstance(value, Raw):
        return value.data
    return encode_struct(Struct([(1, LIST, value)]))


def _shifted(group: Struct, delta: int) -> Struct:
    """A copy of a row group with every absolute file offset moved by ``delta``."""
    out = Struct(list(group.fields))
    _move(out, _RG_FILE_OFFSET, delta)
    columns = out.get(_RG_COLUMNS)
    if isinstance(columns, ThriftList):
        moved: list[object] = []
        for chunk in columns.values:
            assert isinstance(chunk, Struct)
            chunk = Struct(list(chunk.fields))
            for fid in (_CC_FILE_OFFSET, _CC_OFFSET_INDEX, _CC_COLUMN_INDEX):
                _move(chunk, fid, delta)
            meta = chunk.get(_CC_META)
            if isinstance(meta, Struct):
                meta = Struct(list(meta.fields))
                for fid in _META_OFFSETS:
                    _move(meta, fid, delta)
                chunk.set(_CC_META, meta)
            moved.append(chunk)
        out.set(_RG_COLUMNS, ThriftList(columns.element_type, moved, columns.kind))
    if out.get(_RG_ORDINAL) is not None and not isinstance(out.get(_RG_ORDINAL), int):
        raise SpliceMismatch("a row group ordinal that is not an integer")
    return out


def _move(value: Struct, field_id: int, delta: int) -> None:
    current = value.get(field_id)
    if isinstance(current, int) and current > 0:  # 0 (or absent) means "none" for the optional offsets
        value.set(field_id, current + delta)
