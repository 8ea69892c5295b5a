"""Which record indices of a shard its attempts have published, and what a new attempt must generate.

Evidence is each attempt's ``output/manifest.json`` read as :class:`RecordOk` (a partial manifest counts for
the ranges it lists; parts without a manifest count for nothing). A manifest is trusted only when it is of
this run, this plan and this shard. When two attempts cover one index (they ran at once against the rules),
the lowest-numbered attempt keeps it and the overlap is reported, never counted twice
(``planner.first_claims``).
"""

from __future__ import annotations

from dataclasses import dataclass

from data_designer.slurm.contracts import ShardPlan
from data_designer.slurm.contracts.records import MANIFEST_SCHEMA, OutputManifest
from data_designer.slurm.planner import Range, clip_ranges, count_indices, first_claims, missing_ranges
from data_designer.slurm.runtime.store._claims import attempt_numbers
from data_designer.slurm.runtime.store._layout import RunLayout
from data_designer.slurm.runtime.store._record_io import RecordOk, read_record


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


def coverage_from(shard: ShardPlan, manifests: dict[int, OutputManifest]) -> ShardCoverage:
    """The shard's coverage from its attempts' valid manifests (pure): the lowest attempt keeps an index twice claimed."""
    whole = shard.range
    if len(manifests) == 1:
        ((number, only),) = manifests.items()
        if only.ranges == (whole,):  # the usual finished shard: one attempt produced exactly its range
            return ShardCoverage(shard=shard, manifests=dict(manifests), kept={number: (whole,)}, overlap=())
    # clipped to the shard: a manifest claiming indices outside its shard claims nothing there
    claims = [(number, clip_ranges(whole, m.ranges)) for number, m in sorted(manifests.items())]
    kept, overlap = first_claims(claims)
    return ShardCoverage(shard=shard, manifests=dict(manifests), kept=kept, overlap=overlap)


def shard_coverage(
    layout: RunLayout, shard: ShardPlan, *, plan_digest: str, below_attempt: int | None = None
) -> ShardCoverage:
    """The shard's published ranges over its attempts (only those numbered below ``below_attempt``, when given)."""
    manifests: dict[int, OutputManifest] = {}
    for number in attempt_numbers(layout.attempts_dir(shard.shard)):
        if below_attempt is not None and number >= below_attempt:
            continue
        found = read_record(layout.output_manifest(shard.shard, number), MANIFEST_SCHEMA)
        if isinstance(found, RecordOk) and manifest_matches(
            found.payload, layout, plan_digest=plan_digest, shard=shard.shard, attempt=number
        ):
            manifests[number] = found.payload
    return coverage_from(shard, manifests)
