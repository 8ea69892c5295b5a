"""The footer walker (``runtime.merge.scan_footer``) against a generic Thrift compact-protocol codec: the oracle.

The codec (``thrift_oracle.py``, beside this file) decodes a footer into a tree of fields without the Parquet IDL
and encodes it back; an unchanged tree encodes to the bytes it was decoded from, which the first test checks on real
footers. The merge itself rewrites footers with the byte-level walker of ``merge/_footer.py`` (no objects); this
codec is the reference its output is tested against, so it lives with the tests.
"""

from __future__ import annotations

import importlib
from typing import Any

import pyarrow as pa
import pytest

from data_designer.slurm.runtime.merge import ThriftError, footer_bytes, scan_footer
from thrift_oracle import Struct, ThriftList, decode_struct, encode_struct

pq: Any = importlib.import_module("pyarrow.parquet")


@pytest.mark.parametrize("page_index", [False, True])
def test_the_footer_codec_round_trips_real_parquet_footers(page_index: bool) -> None:
    table = pa.table(
        {
            "x": pa.array([1.5, None, 3.0]),
            "flag": pa.array([True, False, None]),
            "s": pa.array(["a", "b", None]).dictionary_encode(),
            "n": pa.array([[1], [], None], type=pa.list_(pa.int64())),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, write_page_index=page_index)
    data = sink.getvalue().to_pybytes()
    footer = footer_bytes(data)
    assert encode_struct(decode_struct(footer)) == footer
    with pytest.raises(ValueError, match="not framed"):
        footer_bytes(data[:-1])


def _reference_shift(value: object, delta: int, path: tuple[int, ...] = ()) -> object:
    """The generic codec's view of a moved row group (every absolute offset the splice moves), for comparison."""
    offsets = {(5,), (1, 2), (1, 4), (1, 6), (1, 3, 9), (1, 3, 10), (1, 3, 11), (1, 3, 14)}
    if isinstance(value, Struct):
        fields = []
        for fid, kind, item in value.fields:
            here = (*path, fid)
            if here in offsets and isinstance(item, int) and item > 0:
                item = item + delta
            fields.append((fid, kind, _reference_shift(item, delta, here)))
        return Struct(fields)
    if isinstance(value, ThriftList):
        return ThriftList(value.element_type, [_reference_shift(v, delta, path) for v in value.values], value.kind)
    return value


@pytest.mark.parametrize("page_index", [False, True])
@pytest.mark.parametrize("groups", [1, 3])
def test_the_footer_scan_moves_exactly_the_offsets_the_generic_codec_moves(page_index: bool, groups: int) -> None:
    table = pa.table(
        {
            "v": pa.array(range(9), type=pa.int64()),
            "s": pa.array(["p", None, "r"] * 3),
            "n": pa.array([[1], [], None] * 3, type=pa.list_(pa.int64())),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, write_page_index=page_index, row_group_size=9 // groups)
    footer = footer_bytes(sink.getvalue().to_pybytes())
    scan = scan_footer(footer)
    assert (scan.num_rows, scan.groups) == (9, groups)
    assert scan.footer(num_rows=9, groups=groups, elements=scan.row_groups(0, 0)) == footer  # unchanged: same bytes
    decoded = decode_struct(footer)
    row_groups = decoded.get(4)
    assert isinstance(row_groups, ThriftList)
    expected = []
    for number, group in enumerate(row_groups.values):
        moved = _reference_shift(group, 1000)
        assert isinstance(moved, Struct)
        if moved.get(7) is not None:
            moved.set(7, 5 + number)
        expected.append(encode_struct(moved))
    assert scan.row_groups(1000, 5) == b"".join(expected)
    stats = scan.statistics(groups - 1, 0)
    assert stats is not None
    assert stats.null_count == 0
    assert stats.max_value == (8).to_bytes(8, "little")
    with pytest.raises(ThriftError):
        scan_footer(footer[:-3])
