"""A generic Thrift compact-protocol codec, enough to read and rewrite a Parquet footer (``FileMetaData``).

Parquet stores its footer in the Thrift compact protocol, which is self-describing: every field carries its id and
type, so a footer can be decoded without the Parquet IDL into a tree of :class:`Struct` (fields in their order),
:class:`ThriftList` and :class:`ThriftMap` values, changed in a few known places (offsets), and encoded back. An
unchanged tree encodes to the bytes it was decoded from (fields keep their order, types and short/long headers as
Thrift's C++ writer chooses them), which the tests check on real footers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
_INTEGERS = (I16, I32, I64)


class ThriftError(ValueError):
    """The bytes are not a Thrift compact-protocol struct this codec can read."""


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
    if isinstance(value, Raw):
        out += value.data
    elif kind in (TRUE, FALSE, BYTE):
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


@dataclass
class Raw:
    """A value kept as its encoded bytes (decoded only as far as needed to find its end): written back verbatim."""

    data: bytes


Spec = dict[int, "Spec | None"]
"""Which fields of a struct to decode: field id -> the spec of a nested struct (or of a list's struct elements),
or None for a plain value. Fields not named stay :class:`Raw`."""


def decode_partial(data: bytes, spec: Spec, *, known: dict[int, bytes] | None = None) -> Struct:
    """Like :func:`decode_struct`, but only the fields ``spec`` names are decoded; every other field is kept as
    :class:`Raw` bytes, found by skipping (no object is built for them). Encodes back to the same bytes.

    ``known``: top-level field id -> the encoded value it most likely holds (the previous footer's schema): when the
    bytes there start with it, it is taken without walking it. Compact encodings are self-delimiting, so a value
    whose bytes begin with a whole encoded value is that value."""
    reader = _Reader(data)
    result = _partial_struct(reader, spec, known or {})
    if reader.pos != len(data):
        raise ThriftError(f"{len(data) - reader.pos} bytes after the struct")
    return result


def _partial_struct(reader: _Reader, spec: Spec, known: dict[int, bytes] | None = None) -> Struct:
    out = Struct()
    last = 0
    data = reader.data
    while True:
        header = reader.byte()
        kind = header & 0x0F
        if kind == STOP:
            return out
        delta = header >> 4
        fid = last + delta if delta else reader.zigzag()
        last = fid
        if kind in (TRUE, FALSE):
            out.fields.append((fid, kind, kind))
            continue
        if fid in spec:
            nested = spec[fid]
            if nested is None:
                out.fields.append((fid, kind, reader.value(kind)))
            elif kind == STRUCT:
                out.fields.append((fid, kind, _partial_struct(reader, nested)))
            elif kind in (LIST, SET):
                head = reader.byte()
                size, element = head >> 4, head & 0x0F
                if size == 15:
                    size = reader.varint()
                if element != STRUCT:
                    raise ThriftError(f"field {fid}: a list of {element}, not of structs")
                values: list[object] = [_partial_struct(reader, nested) for _ in range(size)]
                out.fields.append((fid, kind, ThriftList(element, values, kind)))
            else:
                raise ThriftError(f"field {fid}: type {kind} cannot hold a struct")
            continue
        start = reader.pos
        guess = known.get(fid) if known else None
        if guess is not None and data.startswith(guess, start):
            reader.pos = start + len(guess)
            out.fields.append((fid, kind, Raw(guess)))
            continue
        _skip(reader, kind)
        out.fields.append((fid, kind, Raw(data[start : reader.pos])))


def _skip(reader: _Reader, kind: int) -> None:
    try:
        reader.pos = _skip_at(reader.data, reader.pos, kind)
    except IndexError as exc:
        raise ThriftError("truncated") from exc
    if reader.pos > len(reader.data):
        raise ThriftError("truncated")


def _varint_end(data: bytes, pos: int) -> int:
    while data[pos] & 0x80:
        pos += 1
    return pos + 1


def _varint_at(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        current = data[pos]
        pos += 1
        result |= (current & 0x7F) << shift
        if not current & 0x80:
            return result, pos
        shift += 7


def _skip_at(data: bytes, pos: int, kind: int) -> int:
    """The position after a value of ``kind`` at ``pos`` (the footer's hot path: plain indexing, no objects)."""
    if kind in (I16, I32, I64):
        return _varint_end(data, pos)
    if kind == BINARY:
        length, pos = _varint_at(data, pos)
        return pos + length
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
        head = data[pos]
        pos += 1
        size, element = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _varint_at(data, pos)
        if element in (I16, I32, I64):
            for _ in range(size):
                pos = _varint_end(data, pos)
            return pos
        for _ in range(size):
            pos = _skip_at(data, pos, element)
        return pos
    if kind in (TRUE, FALSE, BYTE):
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
