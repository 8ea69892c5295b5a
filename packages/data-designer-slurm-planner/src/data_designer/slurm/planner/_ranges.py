"""Record-index ranges as half-open ``(start, stop)`` pairs: normalising, subtracting, finding overlaps.

A shard's output is the union of its attempts' outputs over disjoint ranges (``docs/architecture/run-directory.md``):
an attempt is assigned the shard's range minus what earlier attempts published (:func:`missing_ranges`), and a
reader that finds two attempts covering one index takes it from the lowest-numbered attempt
(:func:`first_claims`), reporting the overlap. Pure functions over ints: the planner, the runtime and the
services share them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from data_designer.slurm.contracts.records import IndexRange

Range = IndexRange
"""Global record indices ``[start, stop)`` with ``0 <= start < stop``: the contracts' one range type."""


def _check(item: tuple[int, int]) -> Range:
    start, stop = item
    if isinstance(start, bool) or isinstance(stop, bool) or not 0 <= start < stop:
        raise ValueError(f"a record range is [start, stop) with 0 <= start < stop, got {item!r}")
    return IndexRange(start, stop)


def normalise_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[Range, ...]:
    """The same indices as sorted, disjoint, non-adjacent ranges (overlapping and touching ranges merged)."""
    merged: list[list[int]] = []
    for start, stop in sorted(_check(item) for item in ranges):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    return tuple(IndexRange(start, stop) for start, stop in merged)


def missing_ranges(whole: tuple[int, int], covered: Iterable[tuple[int, int]]) -> tuple[Range, ...]:
    """The indices of ``whole`` that no range in ``covered`` holds, as sorted disjoint ranges."""
    start, stop = _check(whole)
    out: list[Range] = []
    cursor = start
    for begin, end in normalise_ranges(covered):
        if end <= cursor or begin >= stop:
            continue
        if begin > cursor:
            out.append(IndexRange(cursor, begin))
        cursor = max(cursor, end)
        if cursor >= stop:
            break
    if cursor < stop:
        out.append(IndexRange(cursor, stop))
    return tuple(out)


def count_indices(ranges: Iterable[tuple[int, int]]) -> int:
    """How many distinct indices ``ranges`` hold."""
    if isinstance(ranges, tuple) and len(ranges) == 1:  # the common case: one range, nothing to merge
        start, stop = _check(ranges[0])
        return stop - start
    return sum(stop - start for start, stop in normalise_ranges(ranges))


def first_claims(
    claims: Sequence[tuple[int, Sequence[tuple[int, int]]]],
) -> tuple[dict[int, tuple[Range, ...]], tuple[Range, ...]]:
    """Which indices each claimant keeps when the lowest claimant wins, and the indices claimed more than once.

    ``claims`` pairs a claimant (an attempt number) with the ranges it covers. Returns (claimant -> the
    normalised ranges it keeps, the normalised overlap), so no index is counted twice.
    """
    kept: dict[int, tuple[Range, ...]] = {}
    taken: list[Range] = []
    overlap: list[Range] = []
    for claimant, ranges in sorted(claims, key=lambda item: item[0]):
        mine = normalise_ranges(ranges)
        keep: list[Range] = []
        for item in mine:
            free = missing_ranges(item, taken)
            keep.extend(free)
            overlap.extend(_intersections(item, taken))
        kept[claimant] = normalise_ranges([*kept.get(claimant, ()), *keep])
        taken.extend(mine)
    return kept, normalise_ranges(overlap)


def clip_ranges(whole: tuple[int, int], ranges: Iterable[tuple[int, int]]) -> tuple[Range, ...]:
    """The parts of ``ranges`` inside ``whole``, in their order (ranges that miss it give nothing; not normalised)."""
    start, stop = whole
    found = []
    for begin, end in ranges:
        low, high = max(start, begin), min(stop, end)
        if low < high:
            found.append(IndexRange(low, high))
    return tuple(found)


def _intersections(item: tuple[int, int], others: Iterable[tuple[int, int]]) -> tuple[Range, ...]:
    return clip_ranges(item, normalise_ranges(others))
