"""The run reader shares what a run's records repeat (``store._interner``): exactly, never approximately."""

from __future__ import annotations

import gc
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict

from data_designer.slurm.contracts.records import MANIFEST_SCHEMA, OutputManifest
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record, read_run
from data_designer.slurm.runtime.store._interner import Interner
from data_designer.slurm.runtime.testing import write_run_directory

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
STRICT = ConfigDict(frozen=True, strict=True, extra="forbid")


class Leaf(BaseModel):
    model_config = STRICT

    name: str
    count: int
    note: str | None = None


class Timed(BaseModel):
    model_config = STRICT

    at: AwareDatetime
    share: float


class Mixed(BaseModel):
    model_config = STRICT

    value: int | bool


class Holder(BaseModel):
    model_config = STRICT

    leaves: tuple[Leaf, ...]
    by_name: dict[str, Leaf]
    single: Leaf | None = None


class Loose(BaseModel):
    name: str


def _manifests(layout: RunLayout) -> list[OutputManifest]:
    return [a.manifest for s in read_run(layout).shards for a in s.attempts if a.manifest is not None]


def test_read_run_shares_what_the_manifests_repeat_and_nothing_reads_differently(tmp_path: Path) -> None:
    layout = write_run_directory(tmp_path, shards=3, clock=lambda: NOW)
    manifests = _manifests(layout)
    first, second, third = manifests
    assert first.columns is second.columns is third.columns
    assert first.model_fields_set is second.model_fields_set
    assert first.parts[0].model_fields_set is second.parts[0].model_fields_set
    assert first.plan_digest is second.plan_digest  # 64 characters: pydantic's own string cache stops short of it
    assert first.parts[0] is not second.parts[0]  # each shard's part is its own
    for shard, manifest in enumerate(manifests):
        alone = read_record(layout.output_manifest(shard, 1), MANIFEST_SCHEMA)
        assert isinstance(alone, RecordOk)
        assert manifest == alone.payload
        assert manifest.model_dump_json() == alone.payload.model_dump_json()
        assert manifest.model_dump_json(exclude_unset=True) == alone.payload.model_dump_json(exclude_unset=True)


def test_the_snapshot_holds_far_less_than_a_manifest_per_shard(tmp_path: Path) -> None:
    # memory, not time: tracemalloc counts the bytes the snapshot keeps (14 KiB a shard before sharing)
    shards = 300
    layout = write_run_directory(tmp_path, shards=shards, clock=lambda: NOW)
    read_run(layout)  # schemas built, caches filled: what is left is the snapshot's
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        snapshot = read_run(layout)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(snapshot.shards) == shards
    assert kept / shards < 9 * 1024, f"{kept / shards:.0f} bytes a shard"


def test_equal_models_become_one_with_their_own_field_sets_kept() -> None:
    interner = Interner()
    a = interner.record(Holder.model_validate_json('{"leaves": [{"name": "x", "count": 1}], "by_name": {}}'))
    b = interner.record(Holder.model_validate_json('{"leaves": [{"name": "x", "count": 1}], "by_name": {}}'))
    c = interner.record(
        Holder.model_validate_json('{"leaves": [{"name": "x", "count": 1, "note": null}], "by_name": {}}')
    )
    assert a.leaves is b.leaves
    assert a.leaves[0] is not c.leaves[0]  # 'note' given: another field set, another model
    assert c.leaves[0].model_fields_set == {"name", "count", "note"}
    assert a.leaves[0].model_fields_set == {"name", "count"}
    assert b.model_dump(exclude_unset=True) == {"leaves": ({"name": "x", "count": 1},), "by_name": {}}


def test_a_dict_is_never_shared_but_its_models_are() -> None:
    interner = Interner()
    text = '{"leaves": [], "by_name": {"k": {"name": "x", "count": 1}}, "single": {"name": "x", "count": 1}}'
    a = interner.record(Holder.model_validate_json(text))
    b = interner.record(Holder.model_validate_json(text))
    assert a.by_name is not b.by_name
    assert a.by_name["k"] is b.by_name["k"] is a.single is b.single
    assert a is not b


def test_values_equal_but_not_the_same_are_never_shared() -> None:
    interner = Interner()
    utc = interner.record(Timed.model_validate_json('{"at": "2026-01-05T12:00:00Z", "share": 0.0}'))
    offset = interner.record(Timed.model_validate_json('{"at": "2026-01-05T13:00:00+01:00", "share": -0.0}'))
    assert utc == offset  # pydantic's == ignores the offset and the sign of zero: sharing must not
    assert utc is not offset
    assert offset.at.utcoffset() is not None
    assert offset.at.utcoffset() != utc.at.utcoffset()
    assert str(offset.share) == "-0.0"
    one = interner.record(Mixed.model_validate_json('{"value": 1}'))
    true = interner.record(Mixed.model_validate_json('{"value": true}'))
    assert one is not true
    assert type(one.value) is int
    assert type(true.value) is bool


def test_a_mutable_model_is_left_alone() -> None:
    interner = Interner()
    a = Loose(name="x")
    b = Loose(name="x")
    assert interner.record(a) is a
    assert interner.record(b) is b
    assert a.model_fields_set is not b.model_fields_set


def test_what_no_record_repeats_stops_being_looked_up_and_the_rest_is_still_shared() -> None:
    interner = Interner()
    records = [
        interner.record(
            Holder.model_validate_json(
                f'{{"leaves": [{{"name": "same", "count": 1}}], "by_name": {{}}, '
                f'"single": {{"name": "own-{number}", "count": {number}}}}}'
            )
        )
        for number in range(40)
    ]
    assert all(record.leaves is records[0].leaves for record in records)
    assert len({id(record.single) for record in records}) == 40
    assert [record.single.name for record in records if record.single] == [f"own-{n}" for n in range(40)]
