"""Moving a part's page indexes with its pages: the OffsetIndex re-encoded, the ColumnIndex copied.

A Parquet page index is two Thrift compact structures per column chunk, stored between the last column chunk and
the footer, which points at them (``ColumnChunk`` fields 4 to 7). ``ColumnIndex`` (per page min/max, null pages,
null counts) holds no file position and is copied byte for byte. ``OffsetIndex`` is
``{1: list<PageLocation> page_locations, 2: optional list<i64> unencoded_byte_array_data_bytes}`` with
``PageLocation {1: i64 offset, 2: i32 compressed_page_size, 3: i64 first_row_index}``: ``offset`` is absolute in the
file, so a spliced part's must move by the part's displacement, and a moved varint may grow by a byte, so the
rewritten blocks are laid out again (``_splice.py``). :func:`index_tail` finds where a part's page indexes start
and refuses a layout they do not own alone; :func:`shift_offset_index` re-emits one OffsetIndex with its page
offsets moved and every other byte copied. Anything else is :class:`ThriftError`.
"""

from __future__ import annotations

from collections.abc import Iterable

from data_designer.slurm.runtime.merge._footer import (
    I32,
    I64,
    LIST,
    STOP,
    STRUCT,
    PageIndexRef,
    ThriftError,
    _field_header,
    _list_head,
    _skip_at,
    _zigzag,
    _zigzag_at,
)

_OI_PAGE_LOCATIONS = 1
_PL_OFFSET, _PL_COMPRESSED_PAGE_SIZE = 1, 2


def index_tail(refs: Iterable[PageIndexRef], end: int) -> int:
    """Where the page index blocks start: they must tile the bytes from there to ``end`` (the footer) exactly, each
    with its length, so the bytes before are the column chunks alone and the blocks can be laid out anew."""
    blocks = sorted(block for ref in refs for block in (ref.column_index, ref.offset_index) if block is not None)
    if not blocks:
        return end
    start = cursor = blocks[0][0]
    for offset, length in blocks:
        if length < 0:
            raise ThriftError("a page index block without its length")
        if offset != cursor:
            raise ThriftError(f"a page index block at {offset} where {cursor} was expected")
        cursor = offset + length
    if cursor != end:
        raise ThriftError(f"the page index blocks end at {cursor}, the footer starts at {end}")
    return start


def shift_offset_index(block: bytes, delta: int, *, limit: int) -> bytes:
    """The OffsetIndex ``block`` (all of it) with every page's offset moved by ``delta``; each page must lie within
    ``4 .. limit`` of its file before it moves."""
    pieces: list[bytes] = []
    cursor = pos = fid = 0
    try:
        while True:
            kind, fid, pos = _field_header(block, pos, fid)
            if kind == STOP:
                break
            if fid == _OI_PAGE_LOCATIONS and kind == LIST:
                count, element, pos = _list_head(block, pos)
                if element != STRUCT:
                    raise ThriftError("page locations that are not structs")
                for _ in range(count):
                    pos, cursor = _page_location(block, pos, cursor, pieces, delta, limit)
            else:
                pos = _skip_at(block, pos, kind)
    except IndexError as exc:
        raise ThriftError("truncated offset index") from exc
    if pos != len(block):
        raise ThriftError(f"{len(block) - pos} bytes after the offset index")
    pieces.append(block[cursor:])
    return b"".join(pieces)


def _page_location(block: bytes, pos: int, cursor: int, pieces: list[bytes], delta: int, limit: int) -> tuple[int, int]:
    fid = 0
    offset: int | None = None
    size: int | None = None
    while True:
        kind, fid, pos = _field_header(block, pos, fid)
        if kind == STOP:
            break
        if fid == _PL_OFFSET and kind == I64:
            offset, end = _zigzag_at(block, pos)
            pieces.append(block[cursor:pos])
            pieces.append(_zigzag(offset + delta))
            cursor = pos = end
        elif fid == _PL_COMPRESSED_PAGE_SIZE and kind == I32:
            size, pos = _zigzag_at(block, pos)
        else:
            pos = _skip_at(block, pos, kind)
    if offset is None or size is None or offset < 4 or size <= 0 or offset + size > limit:
        raise ThriftError(f"a page location ({offset}, {size}) outside the column chunks (4 .. {limit})")
    return pos, cursor
