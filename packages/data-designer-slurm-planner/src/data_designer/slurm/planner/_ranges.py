"""Record-index ranges as half-open ``(start, stop)`` pairs: normalising, subtracting, finding overlaps.

A shard's output is the union of its attempts' outputs over disjoint ranges (``architecture/run-directory.md``):
an attempt is assigned the shard's range minus what earlier attempts published (:func:`missing_ranges`), and a
reader that finds two attempts covering one index takes it from the lowest-numbered attempt
(:func:`first_claims`), reporting the overlap. Pure functions over ints: the planner, the runtime and the
services share them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Range = tuple[int, int]
"""Global record indices ``[start, stop)`` with ``0 <= start < stop``."""


def _check(item: Range) -> Range:
    start, stop = item
    if isinstance(start, bool) or isinstance(stop, bool) or not 0 <= start < stop:
        raise ValueError(f"a record range is [start, stop) with 0 <= start < stop, got {item!r}")
    return start, stop


def normalise_ranges(ranges: Iterable[Range]) -> tuple[Range, ...]:
    """The same indices as sorted, disjoint, non-adjacent ranges (overlapping and touching ranges merged)."""
    merged: list[list[int]] = []
    for start, stop in sorted(_check(item) for item in ranges):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    return tuple((start, stop) for start, stop in merged)


def missing_ranges(whole: Range, covered: Iterable[Range]) -> tuple[Range, ...]:
    """The indices of ``whole`` that no range in ``covered`` holds, as sorted disjoint ranges."""
    start, stop = _check(whole)
    out: list[Range] = []
    cursor = start
    for begin, end in normalise_ranges(covered):
        if end <= cursor or begin >= stop:
            continue
        if begin > cursor:
            out.append((cursor, begin))
        cursor = max(cursor, end)
        if cursor >= stop:
            break
    if cursor < stop:
        out.append((cursor, stop))
    return tuple(out)


def count_indices(ranges: Iterable[Range]) -> int:
    """How many distinct indices ``ranges`` hold."""
    return sum(stop - start for start, stop in normalise_ranges(ranges))


def first_claims(
    claims: Sequence[tuple[int, Sequence[Range]]],
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


def clip_ranges(whole: Range, ranges: Iterable[Range]) -> tuple[Range, ...]:
    """The parts of ``ranges`` inside ``whole``, in their order (ranges that miss it give nothing; not normalised)."""
    start, stop = whole
    found = []
    for begin, end in ranges:
        low, high = max(start, begin), min(stop, end)
        if low < high:
            found.append((low, high))
    return tuple(found)


def _intersections(item: Range, others: Iterable[Range]) -> tuple[Range, ...]:
    return clip_ranges(item, normalise_ranges(others))
