"""A generic Thrift compact-protocol codec: the reference the merge's byte-level footer walker is tested against.

Parquet stores its footer, its page headers and its page indexes in the Thrift compact protocol, which is
self-describing: every field carries its id and type, so a structure can be decoded without the Parquet IDL into a
tree of :class:`Struct` (fields in their order), :class:`ThriftList` and :class:`ThriftMap` values, changed in a
few known places (offsets), and encoded back. An unchanged tree encodes to the bytes it was decoded from (fields
keep their order, types and short/long headers as Thrift's C++ writer chooses them). The merge itself rewrites
footers and offset indexes with the walkers of ``merge/_footer.py`` and ``merge/_page_index.py`` (no objects); this
codec is used by no production code, so it lives with the tests (``conftest.py`` puts this directory on the path).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from data_designer.slurm.runtime.merge import ThriftError

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
_INTEGERS = (I16, I32, I64)


@dataclass
class Struct:
    fields: list[tuple[int, int, object]] = field(default_factory=list)
    """(field id, compact type, value); a boolean field's value is its type (TRUE or FALSE)."""

    def get(self, field_id: int) -> object | None:
        for fid, _, value in self.fields:
            if fid == field_id:
                return value
        return None

    def set(self, field_id: int, value: object) -> None:
        for position, (fid, kind, _) in enumerate(self.fields):
            if fid == field_id:
                self.fields[position] = (fid, kind, value)
                return
        raise ThriftError(f"field {field_id} is not present")


@dataclass
class ThriftList:
    element_type: int
    values: list[object]
    kind: int = LIST


@dataclass
class ThriftMap:
    key_type: int
    value_type: int
    items: list[tuple[object, object]]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ThriftError("truncated")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            current = self.byte()
            result |= (current & 0x7F) << shift
            if not current & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ThriftError("varint too long")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def take(self, count: int) -> bytes:
        if count < 0 or self.pos + count > len(self.data):
            raise ThriftError("truncated")
        chunk = self.data[self.pos : self.pos + count]
        self.pos += count
        return chunk

    def value(self, kind: int) -> object:
        if kind in (TRUE, FALSE):  # inside a container: one byte
            return self.byte()
        if kind == BYTE:
            return self.byte()
        if kind in _INTEGERS:
            return self.zigzag()
        if kind == DOUBLE:
            return self.take(8)
        if kind == BINARY:
            return self.take(self.varint())
        if kind in (LIST, SET):
            header = self.byte()
            size, element = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            return ThriftList(element, [self.value(element) for _ in range(size)], kind)
        if kind == MAP:
            size = self.varint()
            if not size:
                return ThriftMap(0, 0, [])
            types = self.byte()
            key, value = types >> 4, types & 0x0F
            return ThriftMap(key, value, [(self.value(key), self.value(value)) for _ in range(size)])
        if kind == STRUCT:
            return self.struct()
        raise ThriftError(f"unknown compact type {kind}")

    def struct(self) -> Struct:
        out = Struct()
        last = 0
        while True:
            header = self.byte()
            kind = header & 0x0F
            if kind == STOP:
                return out
            delta = header >> 4
            fid = last + delta if delta else self.zigzag()
            value: object = kind if kind in (TRUE, FALSE) else self.value(kind)
            out.fields.append((fid, kind, value))
            last = fid


def decode_struct(data: bytes) -> Struct:
    """The struct ``data`` holds, which must be all of it."""
    reader = _Reader(data)
    result = reader.struct()
    if reader.pos != len(data):
        raise ThriftError(f"{len(data) - reader.pos} bytes after the struct")
    return result


def decode_struct_at(data: bytes, pos: int) -> tuple[Struct, int]:
    """The struct that starts at ``pos`` of ``data`` and the position after it (a page header before its page)."""
    reader = _Reader(data)
    reader.pos = pos
    result = reader.struct()
    return result, reader.pos


def _varint(value: int, out: bytearray) -> None:
    while True:
        if value < 0x80:
            out.append(value)
            return
        out.append((value & 0x7F) | 0x80)
        value >>= 7


def _zigzag(value: int, out: bytearray) -> None:
    _varint((value << 1) ^ (value >> 63), out)


def _value(kind: int, value: object, out: bytearray) -> None:
    if kind in (TRUE, FALSE, BYTE):
        assert isinstance(value, int)
        out.append(value & 0xFF)
    elif kind in _INTEGERS:
        assert isinstance(value, int)
        _zigzag(value, out)
    elif kind == DOUBLE:
        assert isinstance(value, bytes)
        assert len(value) == 8
        out += value
    elif kind == BINARY:
        assert isinstance(value, bytes)
        _varint(len(value), out)
        out += value
    elif kind in (LIST, SET):
        assert isinstance(value, ThriftList)
        size = len(value.values)
        if size < 15:
            out.append((size << 4) | value.element_type)
        else:
            out.append(0xF0 | value.element_type)
            _varint(size, out)
        for item in value.values:
            _value(value.element_type, item, out)
    elif kind == MAP:
        assert isinstance(value, ThriftMap)
        _varint(len(value.items), out)
        if value.items:
            out.append((value.key_type << 4) | value.value_type)
            for key, item in value.items:
                _value(value.key_type, key, out)
                _value(value.value_type, item, out)
    elif kind == STRUCT:
        assert isinstance(value, Struct)
        _struct_into(value, out)
    else:
        raise ThriftError(f"unknown compact type {kind}")


def _struct_into(value: Struct, out: bytearray) -> None:
    last = 0
    for fid, kind, item in value.fields:
        delta = fid - last
        if 0 < delta <= 15:
            out.append((delta << 4) | kind)
        else:
            out.append(kind)
            _zigzag(fid, out)
        if kind not in (TRUE, FALSE):
            _value(kind, item, out)
        last = fid
    out.append(STOP)


def encode_struct(value: Struct) -> bytes:
    out = bytearray()
    _struct_into(value, out)
    return bytes(out)
