"""Which record indices of a shard its attempts have published, and what a new attempt must generate.

Evidence is each attempt's ``output/manifest.json`` read as :class:`RecordOk` (a partial manifest counts for
the ranges it lists; parts without a manifest count for nothing). A manifest is trusted only when it is of
this run, this plan and this shard. When two attempts cover one index (they ran at once against the rules),
the lowest-numbered attempt keeps it and the overlap is reported, never counted twice
(``planner.first_claims``). A part its manifest lists that is damaged (``store.check_part``: gone, not a regular
file, another size; or set aside by a retry, wherever its file now is) contributes nothing: its range is ``lost``,
so a new attempt generates it again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from data_designer.slurm.contracts import ShardPlan
from data_designer.slurm.contracts.records import MANIFEST_SCHEMA, RETRY_SCHEMA, OutputManifest, RetryIntent
from data_designer.slurm.planner import Range, clip_ranges, count_indices, first_claims, missing_ranges
from data_designer.slurm.runtime.store._claims import attempt_numbers
from data_designer.slurm.runtime.store._layout import RunLayout, relative_output_dir
from data_designer.slurm.runtime.store._parts import PartRef, check_part
from data_designer.slurm.runtime.store._record_io import RecordOk, read_record

_INTENT = re.compile(r"[0-9]{4,}\.json")


@dataclass(frozen=True)
class ShardCoverage:
    """What the attempts of one shard published."""

    shard: ShardPlan
    manifests: dict[int, OutputManifest]
    """Attempt number -> its valid manifest."""
    kept: dict[int, tuple[Range, ...]]
    """Attempt number -> the ranges it contributes (the lowest attempt keeps an index claimed twice)."""
    overlap: tuple[Range, ...]
    """Indices more than one attempt published (empty unless attempts ran at once)."""

    @property
    def covered(self) -> tuple[Range, ...]:
        return tuple(item for ranges in self.kept.values() for item in ranges)

    @property
    def missing(self) -> tuple[Range, ...]:
        return missing_ranges((self.shard.start, self.shard.stop), self.covered)

    @property
    def records(self) -> int:
        return count_indices(self.covered)

    @property
    def complete(self) -> bool:
        return not self.missing


def manifest_matches(
    manifest: OutputManifest, layout: RunLayout, *, plan_digest: str, shard: int, attempt: int
) -> bool:
    """Whether a valid manifest is evidence for this run, plan, shard and attempt (anything else proves nothing)."""
    return (
        manifest.run_id == str(layout.run_id)
        and manifest.plan_digest == plan_digest
        and manifest.shard == shard
        and manifest.attempt == attempt
    )


def coverage_from(
    shard: ShardPlan,
    manifests: dict[int, OutputManifest],
    lost: Mapping[int, Sequence[Range]] | None = None,
) -> ShardCoverage:
    """The shard's coverage from its attempts' valid manifests (pure): the lowest attempt keeps an index twice
    claimed; ``lost``: attempt -> ranges of its damaged or set-aside parts, which it no longer contributes."""
    whole = shard.range
    if lost:
        claims = [
            (number, _without(clip_ranges(whole, m.ranges), lost.get(number, ())))
            for number, m in sorted(manifests.items())
        ]
        kept, overlap = first_claims(claims)
        return ShardCoverage(shard=shard, manifests=dict(manifests), kept=kept, overlap=overlap)
    if len(manifests) == 1:
        ((number, only),) = manifests.items()
        if only.ranges == (whole,):  # the usual finished shard: one attempt produced exactly its range
            return ShardCoverage(shard=shard, manifests=dict(manifests), kept={number: (whole,)}, overlap=())
    # clipped to the shard: a manifest claiming indices outside its shard claims nothing there
    claims = [(number, clip_ranges(whole, m.ranges)) for number, m in sorted(manifests.items())]
    kept, overlap = first_claims(claims)
    return ShardCoverage(shard=shard, manifests=dict(manifests), kept=kept, overlap=overlap)


def _without(ranges: Sequence[Range], lost: Sequence[Range]) -> tuple[Range, ...]:
    """``ranges`` less every index of ``lost``."""
    if not lost:
        return tuple(ranges)
    return tuple(piece for item in ranges for piece in missing_ranges((item[0], item[1]), lost))


def shard_coverage(
    layout: RunLayout, shard: ShardPlan, *, plan_digest: str, below_attempt: int | None = None
) -> ShardCoverage:
    """The shard's published ranges over its attempts (only those numbered below ``below_attempt``, when given),
    less the ranges of parts that are damaged now or that a retry set aside (what the attempt must generate)."""
    manifests: dict[int, OutputManifest] = {}
    set_aside = set_aside_parts(layout).get(shard.shard, {})
    lost: dict[int, list[Range]] = {}
    run_dir = str(layout.run_dir)
    for number in attempt_numbers(layout.attempts_dir(shard.shard)):
        if below_attempt is not None and number >= below_attempt:
            continue
        found = read_record(layout.output_manifest(shard.shard, number), MANIFEST_SCHEMA)
        if isinstance(found, RecordOk) and manifest_matches(
            found.payload, layout, plan_digest=plan_digest, shard=shard.shard, attempt=number
        ):
            manifests[number] = found.payload
            for ref in part_refs(shard.shard, number, found.payload):
                if ref.path in set_aside.get(number, ()) or check_part(run_dir, ref) is not None:
                    lost.setdefault(number, []).append(ref.range)
    return coverage_from(shard, manifests, lost)


def part_refs(shard: int, attempt: int, manifest: OutputManifest) -> tuple[PartRef, ...]:
    """Every part of an attempt's manifest, located relative to the run directory."""
    prefix = relative_output_dir(shard, attempt)
    return tuple(PartRef(shard, attempt, part, f"{prefix}/{part.path}") for part in manifest.parts)


def set_aside_parts(layout: RunLayout) -> dict[int, dict[int, frozenset[str]]]:
    """shard -> attempt -> the part paths (relative to the run directory) that valid retry intents set aside."""
    found: dict[int, dict[int, set[str]]] = {}
    for intent in read_retry_intents(layout):
        for shard in intent.shards:
            for item in shard.set_aside:
                found.setdefault(item.damage.shard, {}).setdefault(item.damage.attempt, set()).add(item.damage.path)
    return {shard: {a: frozenset(paths) for a, paths in by.items()} for shard, by in found.items()}


def read_retry_intents(layout: RunLayout) -> tuple[RetryIntent, ...]:
    """Every valid retry intent (``retries/NNNN.json``), by generation; anything else proves nothing."""
    try:
        names = os.listdir(layout.retries_dir)
    except OSError:
        return ()
    intents = []
    for name in sorted(names):
        if not _INTENT.fullmatch(name):
            continue
        result = read_record(layout.retries_dir / name, RETRY_SCHEMA)
        if isinstance(result, RecordOk) and f"{result.payload.generation:04d}.json" == name:
            intents.append(result.payload)
    return tuple(intents)
