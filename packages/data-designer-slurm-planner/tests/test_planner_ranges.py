"""Record-index range math (``planner._ranges``) and the seed of a resumed range, checked against plain sets."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from data_designer.slurm.planner import (
    Range,
    clip_ranges,
    count_indices,
    derive_range_seed,
    derive_sampler_seed,
    first_claims,
    missing_ranges,
    normalise_ranges,
)


def indices(ranges: Iterable[tuple[int, int]]) -> set[int]:
    return {i for start, stop in ranges for i in range(start, stop)}


ranges_st = st.lists(
    st.tuples(st.integers(0, 60), st.integers(1, 30)).map(lambda pair: (pair[0], pair[0] + pair[1])), max_size=8
)


@given(ranges_st)
def test_normalise_keeps_the_indices_sorted_disjoint_and_apart(ranges: list[Range]) -> None:
    out = normalise_ranges(ranges)
    assert indices(out) == indices(ranges)
    assert count_indices(ranges) == len(indices(ranges))
    for (_, stop), (start, _) in itertools.pairwise(out):
        assert stop < start  # disjoint and not even touching


@given(st.integers(0, 40), st.integers(1, 50), ranges_st)
def test_missing_is_the_set_difference(start: int, size: int, covered: list[Range]) -> None:
    whole = (start, start + size)
    out = missing_ranges(whole, covered)
    assert indices(out) == indices([whole]) - indices(covered)
    assert out == normalise_ranges(out)


@given(st.integers(0, 40), st.integers(1, 50), ranges_st)
def test_clip_is_the_intersection_range_by_range(start: int, size: int, ranges: list[Range]) -> None:
    whole = (start, start + size)
    out = clip_ranges(whole, ranges)
    inside = [indices([item]) & indices([whole]) for item in ranges]
    assert [indices([item]) for item in out] == [part for part in inside if part]


@given(st.lists(st.tuples(st.integers(1, 5), ranges_st), max_size=5))
def test_first_claims_gives_each_index_to_the_lowest_claimant(claims: list[tuple[int, list[Range]]]) -> None:
    kept, overlap = first_claims(claims)
    owners: dict[int, int] = {}
    twice: set[int] = set()
    for claimant, ranges in sorted(claims, key=lambda item: item[0]):
        for index in indices(ranges):
            if index in owners:
                twice.add(index)
            else:
                owners[index] = claimant
    for claimant, keeps in kept.items():
        assert indices(keeps) == {i for i, owner in owners.items() if owner == claimant}
    assert indices(overlap) == twice


def test_examples() -> None:
    assert missing_ranges((0, 10), [(0, 3), (6, 8)]) == ((3, 6), (8, 10))
    assert missing_ranges((0, 10), [(0, 10)]) == ()
    assert normalise_ranges([(5, 7), (0, 2), (2, 3)]) == ((0, 3), (5, 7))
    assert first_claims([(2, [(0, 5)]), (1, [(3, 8)])]) == ({1: ((3, 8),), 2: ((0, 3),)}, ((3, 5),))
    assert clip_ranges((4, 10), [(0, 2), (8, 12), (3, 6), (8, 9)]) == ((8, 10), (4, 6), (8, 9))


@pytest.mark.parametrize("bad", [(3, 3), (5, 2), (-1, 4), (True, 3)])
def test_a_bad_range_is_refused(bad: Range) -> None:
    with pytest.raises(ValueError, match="0 <= start < stop"):
        normalise_ranges([bad])


def test_range_seed_is_the_shard_seed_at_the_shard_start_and_unrelated_elsewhere() -> None:
    shard_seed = derive_sampler_seed(7, 3)
    assert derive_range_seed(shard_seed, 300, 300) == shard_seed
    resumed = {derive_range_seed(shard_seed, 300, start) for start in range(301, 400)}
    assert len(resumed) == 99
    assert shard_seed not in resumed
    assert derive_range_seed(shard_seed, 300, 350) == derive_range_seed(shard_seed, 300, 350)
    assert derive_range_seed(derive_sampler_seed(7, 4), 300, 350) != derive_range_seed(shard_seed, 300, 350)
    assert derive_range_seed(shard_seed, 300, 350) < 2**128
