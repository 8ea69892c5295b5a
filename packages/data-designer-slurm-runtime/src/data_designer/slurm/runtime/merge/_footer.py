"""A Parquet footer walked once, byte by byte, for splicing: where its offsets are, so they can be moved in place.

Splicing a part (``_splice.py``) needs of its footer (Thrift compact ``FileMetaData``) only the row count, the raw
bytes of its schema and key/value metadata (parts sharing one footer must agree on them), every absolute file
offset inside its row groups, and the statistics of a few columns. :func:`scan_footer` walks the bytes once and
records where each of those is, building no object for the rest; :meth:`FooterScan.row_groups` re-emits the row
groups with only the offset varints (and the row group ordinals) re-encoded, every other byte copied as it is;
:meth:`FooterScan.footer` re-emits the whole footer around new row groups and a new row count. The offsets moved
are the ones a generic codec moves (the tests' reference, ``test_runtime_merge_footer.py``): row group
``file_offset``, column chunk ``file_offset``, offset and column index offsets, and the data, index, dictionary page
and bloom filter offsets of the column metadata; 0 (or absent) means "none" and stays. A column chunk with page
indexes is also listed in :attr:`FooterScan.page_indexes` (its blocks, and where their offset and length fields
are), so a splice that lays the blocks out anew (``_page_index.py``) re-emits the row groups with
:meth:`FooterScan.moved_row_groups`, those fields pointing at the new places. Anything the walk cannot read is
:class:`ThriftError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
"""The compact protocol's type codes (the low nibble of a field header, a list header's element type)."""


class ThriftError(ValueError):
    """The bytes are not a Thrift compact-protocol footer this walker can read."""


_SCHEMA, _NUM_ROWS, _ROW_GROUPS, _KEY_VALUE = 2, 3, 4, 5
_RG_COLUMNS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 5, 7
_CC_FILE_OFFSET, _CC_META = 2, 3
_CC_OFFSET_INDEX, _CC_OFFSET_INDEX_LENGTH, _CC_COLUMN_INDEX, _CC_COLUMN_INDEX_LENGTH = 4, 5, 6, 7
_CC_PAGE_INDEX = frozenset((_CC_OFFSET_INDEX, _CC_OFFSET_INDEX_LENGTH, _CC_COLUMN_INDEX, _CC_COLUMN_INDEX_LENGTH))
_META_OFFSETS = frozenset((9, 10, 11, 14))
"""ColumnMetaData: data_page_offset, index_page_offset, dictionary_page_offset, bloom_filter_offset."""
_META_STATISTICS = 12
_ORDINAL = -1
"""A patch's marker for the row group ordinal (renumbered, not moved)."""


@dataclass(frozen=True)
class ColumnStatistics:
    """The statistics of one column chunk that prove a constant: null count and exact min/max values (raw)."""

    null_count: int | None
    min_value: bytes | None
    max_value: bytes | None


Slot: TypeAlias = tuple[int, int]
"""A value :meth:`FooterScan.moved_row_groups` leaves open: (area, position in it), filled by the caller when it
knows where the area starts."""


@dataclass(frozen=True)
class PageIndexRef:
    """One column chunk's page index blocks, (offset, length) each, and where their fields are in the footer."""

    column_index: tuple[int, int] | None
    offset_index: tuple[int, int] | None
    fields: Mapping[int, int]
    """ColumnChunk field id (4 offset index offset, 5 its length, 6 column index offset) -> its value's position."""


@dataclass(frozen=True)
class FooterScan:
    """Where the parts of one footer are (positions into ``data``)."""

    data: bytes
    num_rows: int
    schema_key: bytes
    """The encoded schema and key/value metadata fields (with their headers): equal keys share one footer."""
    groups: int
    """How many row groups."""
    _num_rows_span: tuple[int, int]
    _groups_span: tuple[int, int]
    """The row groups list: from its header to the end of its last element."""
    _elements_start: int
    _patches: tuple[tuple[int, int, int], ...]
    """(start, end, value) of every varint to move, in order; value ``_ORDINAL`` renumbers a row group ordinal."""
    _statistics: tuple[tuple[tuple[int, int] | None, ...], ...]
    """Per row group, per column chunk: the span of its statistics struct, if any."""
    page_indexes: tuple[PageIndexRef, ...] = ()
    """The column chunks that have a column or offset index, in footer order (none: the common case)."""
    _keeps: tuple[tuple[int, int, int], ...] = ()
    """(start, end, value) of the offset index lengths: copied, unless :meth:`moved_row_groups` replaces them."""

    def row_groups(self, delta: int, first_ordinal: int) -> bytes:
        """The row groups' encoded elements (no list header) with every offset moved by ``delta`` and ordinals
        renumbered from ``first_ordinal``."""
        data = self.data
        pieces: list[bytes] = []
        cursor = self._elements_start
        ordinal = first_ordinal
        for start, end, value in self._patches:
            pieces.append(data[cursor:start])
            if value == _ORDINAL:
                pieces.append(_zigzag(ordinal))
                ordinal += 1
            else:
                pieces.append(_zigzag(value + delta))
            cursor = end
        pieces.append(data[cursor : self._groups_span[1]])
        return b"".join(pieces)

    def moved_row_groups(self, delta: int, first_ordinal: int, moves: Mapping[int, int | Slot]) -> list[bytes | Slot]:
        """:meth:`row_groups`, but the values at the positions ``moves`` names (of :attr:`PageIndexRef.fields`)
        become the given value instead of being moved by ``delta``, or a :data:`Slot` left open for the caller."""
        data = self.data
        pieces: list[bytes | Slot] = []
        cursor = self._elements_start
        ordinal = first_ordinal
        keep = _ORDINAL - 1
        patches = sorted(self._patches + tuple((start, end, keep) for start, end, _ in self._keeps))
        for start, end, value in patches:
            pieces.append(data[cursor:start])
            moved = moves.get(start)
            if isinstance(moved, int):
                pieces.append(_zigzag(moved))
            elif moved is not None:
                pieces.append(moved)
            elif value == _ORDINAL:
                pieces.append(_zigzag(ordinal))
                ordinal += 1
            elif value == keep:
                pieces.append(data[start:end])
            else:
                pieces.append(_zigzag(value + delta))
            cursor = end
        pieces.append(data[cursor : self._groups_span[1]])
        return pieces

    def offsets(self) -> list[int]:
        """Every absolute offset the footer's row groups hold, but the page indexes' own (0 excluded)."""
        index_fields = {position for ref in self.page_indexes for position in ref.fields.values()}
        return [value for start, _, value in self._patches if value != _ORDINAL and start not in index_fields]

    def footer(self, *, num_rows: int, groups: int, elements: bytes) -> bytes:
        """This footer with the row count and the row groups (``groups`` encoded ``elements``) replaced."""
        return b"".join(self.footer_pieces(num_rows=num_rows, groups=groups, elements=[elements]))

    def footer_pieces(self, *, num_rows: int, groups: int, elements: list[bytes]) -> list[bytes]:
        """:meth:`footer` as the pieces to write one after another (the encoded row groups are not joined: a file
        of many parts writes them without a second copy of its footer in memory)."""
        data = self.data
        spans: list[tuple[tuple[int, int], list[bytes]]] = sorted(
            [
                (self._num_rows_span, [_zigzag(num_rows)]),
                (self._groups_span, [list_header(groups, STRUCT), *elements]),
            ],
            key=lambda item: item[0],
        )
        pieces: list[bytes] = []
        cursor = 0
        for (start, end), replacement in spans:
            pieces.append(data[cursor:start])
            pieces += replacement
            cursor = end
        pieces.append(data[cursor:])
        return pieces

    def statistics(self, group: int, column: int) -> ColumnStatistics | None:
        """The statistics of one column chunk (None when it has none)."""
        span = self._statistics[group][column]
        return None if span is None else _decode_statistics(self.data, span[0])


def scan_footer(data: bytes, *, known_schema: bytes = b"") -> FooterScan:
    """Walk a footer. ``known_schema``: the previous footer's :attr:`FooterScan.schema_key` half for the schema:
    when the bytes there start with it, it is taken without walking it (compact encodings are self-delimiting)."""
    try:
        return _scan(data, known_schema)
    except IndexError as exc:
        raise ThriftError("truncated") from exc


def _scan(data: bytes, known_schema: bytes) -> FooterScan:
    pos = 0
    fid = 0
    num_rows: int | None = None
    num_rows_span = groups_span = (0, 0)
    elements_start = 0
    groups = 0
    schema = key_value = b""
    patches: list[tuple[int, int, int]] = []
    statistics: list[tuple[tuple[int, int] | None, ...]] = []
    indexes: list[PageIndexRef] = []
    keeps: list[tuple[int, int, int]] = []
    found_groups = False
    while True:
        field_start = pos
        kind, fid, pos = _field_header(data, pos, fid)
        if kind == STOP:
            break
        if kind in (TRUE, FALSE):
            continue
        if fid == _NUM_ROWS and kind == I64:
            num_rows, end = _zigzag_at(data, pos)
            num_rows_span = (pos, end)
            pos = end
        elif fid == _ROW_GROUPS and kind == LIST:
            found_groups = True
            list_start = pos
            groups, element, pos = _list_head(data, pos)
            if element != STRUCT:
                raise ThriftError("row groups that are not structs")
            elements_start = pos
            for _ in range(groups):
                pos = _row_group(data, pos, patches, statistics, indexes, keeps)
            groups_span = (list_start, pos)
        elif fid == _SCHEMA and known_schema and data.startswith(known_schema, field_start):
            pos = field_start + len(known_schema)
            schema = known_schema
        else:
            pos = _skip_at(data, pos, kind)
            if fid == _SCHEMA:
                schema = data[field_start:pos]
            elif fid == _KEY_VALUE:
                key_value = data[field_start:pos]
    if pos != len(data):
        raise ThriftError(f"{len(data) - pos} bytes after the footer")
    if num_rows is None or not found_groups:
        raise ThriftError("a footer without a row count or row groups")
    return FooterScan(
        data=data,
        num_rows=num_rows,
        schema_key=_key(schema, key_value),
        groups=groups,
        _num_rows_span=num_rows_span,
        _groups_span=groups_span,
        _elements_start=elements_start,
        _patches=tuple(patches),
        _statistics=tuple(statistics),
        page_indexes=tuple(indexes),
        _keeps=tuple(keeps),
    )


def schema_field(schema_key: bytes) -> bytes:
    """The schema half of a :attr:`FooterScan.schema_key` (what ``known_schema`` takes)."""
    length = int.from_bytes(schema_key[:4], "little")
    return schema_key[4 : 4 + length]


def _key(schema: bytes, key_value: bytes) -> bytes:
    return len(schema).to_bytes(4, "little") + schema + key_value


def _row_group(
    data: bytes,
    pos: int,
    patches: list[tuple[int, int, int]],
    statistics: list[tuple[tuple[int, int] | None, ...]],
    indexes: list[PageIndexRef],
    keeps: list[tuple[int, int, int]],
) -> int:
    fid = 0
    spans: list[tuple[int, int] | None] = []
    while True:
        kind, fid, pos = _field_header(data, pos, fid)
        if kind == STOP:
            statistics.append(tuple(spans))
            return pos
        if kind in (TRUE, FALSE):
            continue
        if fid == _RG_COLUMNS:
            if kind != LIST:
                raise ThriftError("row group columns that are not a list")
            size, element, pos = _list_head(data, pos)
            if element != STRUCT:
                raise ThriftError("column chunks that are not structs")
            for _ in range(size):
                pos = _column_chunk(data, pos, patches, spans, indexes, keeps)
        elif fid == _RG_FILE_OFFSET and kind == I64:
            pos = _offset(data, pos, patches)
        elif fid == _RG_ORDINAL:
            if kind not in (I16, I32, I64):
                raise ThriftError("a row group ordinal that is not an integer")
            end = _varint_end(data, pos)
            patches.append((pos, end, _ORDINAL))
            pos = end
        else:
            pos = _skip_at(data, pos, kind)


def _column_chunk(
    data: bytes,
    pos: int,
    patches: list[tuple[int, int, int]],
    spans: list[tuple[int, int] | None],
    indexes: list[PageIndexRef],
    keeps: list[tuple[int, int, int]],
) -> int:
    fid = 0
    span: tuple[int, int] | None = None
    index: dict[int, tuple[int, int, int]] | None = None
    """Page index field id -> (value, start, end), for a chunk that has any."""
    while True:
        kind, fid, pos = _field_header(data, pos, fid)
        if kind == STOP:
            spans.append(span)
            if index is not None:
                indexes.append(_page_index_ref(index, keeps))
            return pos
        if kind in (TRUE, FALSE):
            continue
        if kind == I64 and fid == _CC_FILE_OFFSET:
            pos = _offset(data, pos, patches)
        elif fid == _CC_META and kind == STRUCT:
            pos, span = _column_meta(data, pos, patches)
        elif fid in _CC_PAGE_INDEX and kind in (I32, I64):
            value, end = _zigzag_at(data, pos)
            if fid in (_CC_OFFSET_INDEX, _CC_COLUMN_INDEX) and value > 0:
                patches.append((pos, end, value))
            if index is None:
                index = {}
            index[fid] = (value, pos, end)
            pos = end
        else:
            pos = _skip_at(data, pos, kind)


def _page_index_ref(index: dict[int, tuple[int, int, int]], keeps: list[tuple[int, int, int]]) -> PageIndexRef:
    """A chunk's page index fields as blocks (an offset of 0 or none: no block)."""

    def block(offset_field: int, length_field: int) -> tuple[int, int] | None:
        offset, length = index.get(offset_field), index.get(length_field)
        if offset is None or offset[0] <= 0:
            return None
        return offset[0], -1 if length is None else length[0]  # -1: no length, a block the splice cannot move

    length = index.get(_CC_OFFSET_INDEX_LENGTH)
    if length is not None:
        keeps.append((length[1], length[2], length[0]))
    return PageIndexRef(
        column_index=block(_CC_COLUMN_INDEX, _CC_COLUMN_INDEX_LENGTH),
        offset_index=block(_CC_OFFSET_INDEX, _CC_OFFSET_INDEX_LENGTH),
        fields={fid: start for fid, (_, start, _) in index.items()},
    )


def _column_meta(data: bytes, pos: int, patches: list[tuple[int, int, int]]) -> tuple[int, tuple[int, int] | None]:
    fid = 0
    span: tuple[int, int] | None = None
    while True:
        kind, fid, pos = _field_header(data, pos, fid)
        if kind == STOP:
            return pos, span
        if kind in (TRUE, FALSE):
            continue
        if kind == I64 and fid in _META_OFFSETS:
            pos = _offset(data, pos, patches)
        elif kind in (I32, I64):
            while data[pos] & 0x80:
                pos += 1
            pos += 1
        elif fid == _META_STATISTICS and kind == STRUCT:
            end = _skip_at(data, pos, kind)
            span = (pos, end)
            pos = end
        else:
            pos = _skip_at(data, pos, kind)


def _offset(data: bytes, pos: int, patches: list[tuple[int, int, int]]) -> int:
    value, end = _zigzag_at(data, pos)
    if value > 0:  # 0 (or absent) means "none" for the optional offsets
        patches.append((pos, end, value))
    return end


def _decode_statistics(data: bytes, pos: int) -> ColumnStatistics:
    """Parquet ``Statistics``: 3 null_count, 5 max_value, 6 min_value (the legacy min/max, 1 and 2, are not used:
    their sort order is not defined for every type)."""
    fid = 0
    null_count: int | None = None
    values: dict[int, bytes] = {}
    while True:
        kind, fid, pos = _field_header(data, pos, fid)
        if kind == STOP:
            return ColumnStatistics(null_count, values.get(6), values.get(5))
        if kind in (TRUE, FALSE):
            continue
        if fid == 3 and kind == I64:
            null_count, pos = _zigzag_at(data, pos)
        elif fid in (5, 6) and kind == BINARY:
            length, pos = _varint_at(data, pos)
            values[fid] = data[pos : pos + length]
            pos += length
        else:
            pos = _skip_at(data, pos, kind)


def _field_header(data: bytes, pos: int, last: int) -> tuple[int, int, int]:
    """The field header at ``pos`` of a struct whose previous field id is ``last``: (kind, field id, the position
    after the header). Kind ``STOP`` ends the struct (then the field id is ``last``); a short header holds the
    field id as a delta from ``last``, a long one as a zigzag varint."""
    header = data[pos]
    kind = header & 0x0F
    if kind == STOP:
        return kind, last, pos + 1
    delta = header >> 4
    if delta:
        return kind, last + delta, pos + 1
    fid, pos = _zigzag_at(data, pos + 1)
    return kind, fid, pos


def list_header(size: int, element: int) -> bytes:
    """A compact-protocol list header (what the encoder writes before a list's elements)."""
    if size < 15:
        return bytes([(size << 4) | element])
    return bytes([0xF0 | element]) + _varint(size)


def _list_head(data: bytes, pos: int) -> tuple[int, int, int]:
    head = data[pos]
    pos += 1
    size, element = head >> 4, head & 0x0F
    if size == 15:
        size, pos = _varint_at(data, pos)
    return size, element, pos


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag(value: int) -> bytes:
    return _varint((value << 1) ^ (value >> 63))


def _varint_at(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        current = data[pos]
        pos += 1
        result |= (current & 0x7F) << shift
        if not current & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ThriftError("varint too long")


def _zigzag_at(data: bytes, pos: int) -> tuple[int, int]:
    value, pos = _varint_at(data, pos)
    return (value >> 1) ^ -(value & 1), pos


def _varint_end(data: bytes, pos: int) -> int:
    while data[pos] & 0x80:
        pos += 1
    return pos + 1


def _skip_at(data: bytes, pos: int, kind: int) -> int:
    """The position after a value of ``kind`` at ``pos`` (plain indexing, no objects)."""
    if kind in (I16, I32, I64):
        return _varint_end(data, pos)
    if kind == BINARY:
        length, pos = _varint_at(data, pos)
        end = pos + length
        if end > len(data):
            raise ThriftError("truncated")
        return end
    if kind == STRUCT:
        while True:
            header = data[pos]
            pos += 1
            inner = header & 0x0F
            if inner == STOP:
                return pos
            if not header >> 4:
                pos = _varint_end(data, pos)
            if inner not in (TRUE, FALSE):
                pos = _skip_at(data, pos, inner)
    if kind in (LIST, SET):
        size, element, pos = _list_head(data, pos)
        if element in (I16, I32, I64):
            for _ in range(size):
                pos = _varint_end(data, pos)
            return pos
        if element in (TRUE, FALSE, BYTE):
            return pos + size
        for _ in range(size):
            pos = _skip_at(data, pos, element)
        return pos
    if kind in (BYTE,):
        return pos + 1
    if kind == DOUBLE:
        return pos + 8
    if kind == MAP:
        size, pos = _varint_at(data, pos)
        if size:
            types = data[pos]
            pos += 1
            for _ in range(size):
                pos = _skip_at(data, pos, types >> 4)
                pos = _skip_at(data, pos, types & 0x0F)
        return pos
    raise ThriftError(f"unknown compact type {kind}")
