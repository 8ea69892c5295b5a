"""Layout arithmetic: shard ranges, first-fit replica packing, array chunking under MaxArraySize."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_designer.slurm.planner._layout import PackingError, Placement, chunk_shards, pack_replicas, shard_ranges


def test_equal_shares_give_the_first_shards_one_more_record() -> None:
    assert shard_ranges(10, shards=3) == [range(4), range(4, 7), range(7, 10)]


def test_records_per_shard_leave_the_last_shard_smaller() -> None:
    assert shard_ranges(10, records_per_shard=4) == [range(4), range(4, 8), range(8, 10)]


def test_more_shards_than_records_is_an_error() -> None:
    with pytest.raises(ValueError, match="3 shards for 2 records"):
        shard_ranges(2, shards=3)


def test_exactly_one_of_shards_and_records_per_shard() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        shard_ranges(2, shards=1, records_per_shard=1)


@settings(deadline=None)
@given(records=st.integers(1, 5000), shards=st.integers(1, 200))
def test_shard_ranges_tile_the_records_evenly(records: int, shards: int) -> None:
    if shards > records:
        return
    ranges = shard_ranges(records, shards=shards)
    assert len(ranges) == shards
    assert ranges[0].start == 0
    assert ranges[-1].stop == records
    assert all(a.stop == b.start for a, b in itertools.pairwise(ranges))
    sizes = {len(r) for r in ranges}
    assert max(sizes) - min(sizes) <= 1
    assert min(sizes) >= 1


@settings(deadline=None)
@given(records=st.integers(1, 5000), per=st.integers(1, 700))
def test_records_per_shard_tile_the_records(records: int, per: int) -> None:
    ranges = shard_ranges(records, records_per_shard=per)
    assert sum(len(r) for r in ranges) == records
    assert all(len(r) == per for r in ranges[:-1])
    assert 1 <= len(ranges[-1]) <= per


def test_replicas_pack_first_fit_in_declared_order() -> None:
    packing = pack_replicas([1, 2, 1, 4], gpus_per_node=4)
    assert packing.placements == (
        Placement(node_indices=(0,), gpu_indices=(0,)),
        Placement(node_indices=(0,), gpu_indices=(1, 2)),
        Placement(node_indices=(0,), gpu_indices=(3,)),
        Placement(node_indices=(1,), gpu_indices=(0, 1, 2, 3)),
    )
    assert packing.nodes == 2
    assert packing.gpus_used_per_node == (4, 4)


def test_first_fit_fills_an_earlier_node_when_a_later_replica_fits_there() -> None:
    packing = pack_replicas([3, 3, 1], gpus_per_node=4)
    assert [p.node_indices for p in packing.placements] == [(0,), (1,), (0,)]
    assert packing.placements[2].gpu_indices == (3,)


def test_a_replica_larger_than_a_node_spans_whole_nodes() -> None:
    packing = pack_replicas([1, 16], gpus_per_node=8)
    assert packing.placements[1] == Placement(node_indices=(1, 2), gpu_indices=tuple(range(8)))
    assert packing.placements[1].gpus_per_node == 8
    assert packing.nodes == 3


def test_a_spanning_replica_must_use_a_multiple_of_the_node_gpus() -> None:
    with pytest.raises(PackingError, match="12 GPUs span nodes of 8 GPUs") as caught:
        pack_replicas([1, 12], gpus_per_node=8)
    assert caught.value.index == 1


def test_replicas_without_gpus_share_the_first_node() -> None:
    packing = pack_replicas([0, 2, 0], gpus_per_node=2)
    assert [p.node_indices for p in packing.placements] == [(0,), (0,), (0,)]
    assert packing.nodes == 1
    assert pack_replicas([], gpus_per_node=2).nodes == 1


@settings(deadline=None)
@given(needs=st.lists(st.integers(0, 8), max_size=20), per_node=st.integers(1, 8))
def test_packing_never_oversubscribes_a_node(needs: list[int], per_node: int) -> None:
    needs = [n if n <= per_node else per_node * (n // per_node) for n in needs]
    packing = pack_replicas(needs, per_node)
    taken: dict[int, set[int]] = {}
    for need, placement in zip(needs, packing.placements, strict=True):
        assert placement.gpus_per_node * len(placement.node_indices) == need or need == 0
        for node in placement.node_indices:
            assert node < packing.nodes
            assert not taken.setdefault(node, set()) & set(placement.gpu_indices)
            taken[node] |= set(placement.gpu_indices)
    assert all(max(gpus, default=-1) < per_node for gpus in taken.values())


def test_chunks_cap_the_index_not_only_the_count() -> None:
    chunks = chunk_shards(25, max_array_size=11, throttle=3)
    assert [(c.chunk, c.array_spec, c.index_offset, len(c.tasks)) for c in chunks] == [
        (0, "0-10%3", 0, 11),
        (1, "0-10%3", 11, 11),
        (2, "0-2%3", 22, 3),
    ]
    assert chunks[2].tasks[0].shard == 22
    assert chunks[2].tasks[0].index == 0
    assert {t.attempt for c in chunks for t in c.tasks} == {1}


def test_one_shard_is_one_chunk_without_throttle() -> None:
    (chunk,) = chunk_shards(1, max_array_size=1001)
    assert chunk.array_spec == "0-0"
    assert chunk.index_offset == 0


@settings(deadline=None)
@given(shards=st.integers(1, 3000), max_array_size=st.integers(1, 1001))
def test_every_shard_is_bound_once_with_indices_below_the_limit(shards: int, max_array_size: int) -> None:
    chunks = chunk_shards(shards, max_array_size=max_array_size)
    bound = [t.shard for c in chunks for t in c.tasks]
    assert bound == list(range(shards))
    for chunk in chunks:
        assert all(t.index < max_array_size for t in chunk.tasks)
        assert all(t.shard == chunk.index_offset + t.index for t in chunk.tasks)
