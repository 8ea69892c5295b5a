"""Which rows of which parts make the merged dataset: pure arithmetic over a run snapshot, no file read.

For every shard, the union of its attempts' published parts over disjoint index ranges, exactly as ``status``
counts them (``ShardSnapshot.kept``: the ranges each attempt contributes, the lowest attempt keeping an index two
attempts published). Every part of a contributing attempt is intersected with that attempt's kept ranges; each
non-empty intersection is one :class:`SourceSlice`. The slices are sorted by global index and never overlap.

The unified schema is decided here too, from the manifests' column types: a column the same in every
contributing attempt keeps its type; a column that is ``null`` in some (a batch that saw only nulls) takes the
one other type; anything else (two non-null types, different column sets) is drift, refused naming the column,
the shards and the types.
"""

from __future__ import annotations

from dataclasses import dataclass

from data_designer.slurm.contracts import CheckFailedError, Problem
from data_designer.slurm.contracts.records import ColumnType, IndexRange, OutputManifest, OutputPart
from data_designer.slurm.planner import count_indices
from data_designer.slurm.runtime.store import RunSnapshot, relative_output_dir

_OPERATION = "merge"
NULL_TYPE = "null"


@dataclass(frozen=True)
class SourceSlice:
    """Rows ``take`` (global indices) of one part of one attempt."""

    shard: int
    attempt: int
    part: OutputPart
    path: str
    """The part, relative to the run directory."""
    take: IndexRange
    columns: tuple[ColumnType, ...]
    """Its attempt's columns (the manifest's): what the part's schema must be."""

    @property
    def offset(self) -> int:
        """The first row to take, counted from the part's first row."""
        return self.take.start - self.part.first_index


@dataclass(frozen=True)
class MergeSources:
    slices: tuple[SourceSlice, ...]
    columns: tuple[ColumnType, ...]
    """The unified schema, in the order of the first contributing attempt's columns."""
    covered: tuple[IndexRange, ...]
    missing: tuple[IndexRange, ...]
    missing_shards: tuple[int, ...]
    records_total: int

    @property
    def records(self) -> int:
        return count_indices(self.covered)


def merge_sources(snapshot: RunSnapshot) -> MergeSources:
    """Every slice to merge, in global index order, the unified schema and what is missing."""
    slices: list[SourceSlice] = []
    manifests: list[OutputManifest] = []
    missing: list[IndexRange] = []
    missing_shards: list[int] = []
    for shard in snapshot.shards:
        missing.extend(shard.missing)
        if shard.missing:
            missing_shards.append(shard.plan.shard)
        for attempt in shard.attempts:
            kept = shard.kept.get(attempt.number, ())
            if not kept or attempt.manifest is None:
                continue
            manifests.append(attempt.manifest)
            prefix = relative_output_dir(shard.plan.shard, attempt.number)
            for part in attempt.manifest.parts:
                for item in kept:
                    start = max(item.start, part.first_index)
                    stop = min(item.stop, part.first_index + part.records)
                    if start < stop:
                        slices.append(
                            SourceSlice(
                                shard=shard.plan.shard,
                                attempt=attempt.number,
                                part=part,
                                path=f"{prefix}/{part.path}",
                                take=IndexRange(start, stop),
                                columns=attempt.manifest.columns,
                            )
                        )
    slices.sort(key=lambda item: item.take.start)
    covered = _covered(slices)
    return MergeSources(
        slices=tuple(slices),
        columns=unified_columns(manifests),
        covered=covered,
        missing=tuple(sorted(missing)),
        missing_shards=tuple(missing_shards),
        records_total=snapshot.run.records,
    )


def _covered(slices: list[SourceSlice]) -> tuple[IndexRange, ...]:
    """The merged ranges (adjacent slices joined); an overlap is a broken invariant of coverage, never merged."""
    ranges: list[IndexRange] = []
    for item in slices:
        if ranges and item.take.start < ranges[-1].stop:
            raise CheckFailedError(
                f"shard {item.shard} attempt {item.attempt}: {item.path} overlaps indices already merged",
                code="merge_overlap",
                operation=_OPERATION,
                file=item.path,
            )
        if ranges and item.take.start == ranges[-1].stop:
            ranges[-1] = IndexRange(ranges[-1].start, item.take.stop)
        else:
            ranges.append(item.take)
    return tuple(ranges)


def unified_columns(manifests: list[OutputManifest]) -> tuple[ColumnType, ...]:
    """One schema for every contributing attempt, or CheckFailedError ``schema_drift`` naming each column that
    cannot be unified losslessly, its shards and types."""
    if not manifests:
        return ()
    order = [column.name for column in manifests[0].columns]
    types: dict[str, dict[str, list[int]]] = {}
    problems: list[Problem] = []
    for manifest in manifests:
        names = [column.name for column in manifest.columns]
        if sorted(names) != sorted(order):
            extra = sorted(set(names) ^ set(order))
            problems.append(
                Problem(
                    code="schema_drift",
                    message=f"shard {manifest.shard} attempt {manifest.attempt} has other columns "
                    f"({', '.join(extra)} differ from shard {manifests[0].shard})",
                    hint="merge runs whose shards share one Data Designer config",
                )
            )
            continue
        for column in manifest.columns:
            types.setdefault(column.name, {}).setdefault(column.type, []).append(manifest.shard)
    unified: list[ColumnType] = []
    for name in order:
        seen = types.get(name, {})
        typed = [kind for kind in seen if kind != NULL_TYPE]
        if len(typed) > 1:
            shown = "; ".join(f"{kind} in shard(s) {_shards(seen[kind])}" for kind in sorted(seen))
            problems.append(
                Problem(
                    code="schema_drift",
                    message=f"column {name!r} has different types: {shown}",
                    key_path=(name,),
                    hint="only a column that is null in some shards is unified; regenerate the drifting shards",
                )
            )
            continue
        unified.append(ColumnType(name=name, type=typed[0] if typed else NULL_TYPE))
    if problems:
        first = problems[0]
        summary = first.message if len(problems) == 1 else f"{len(problems)} schema problems; first: {first.message}"
        raise CheckFailedError(
            summary,
            code="schema_drift",
            operation=_OPERATION,
            key_path=first.key_path,
            hint=first.hint,
            problems=problems,
        )
    return tuple(unified)


def _shards(shards: list[int]) -> str:
    unique = sorted(set(shards))
    shown = ", ".join(map(str, unique[:5]))
    return shown + (f" (+{len(unique) - 5} more)" if len(unique) > 5 else "")
