"""Damaged parts on disk: the cheap check in every read, hashing with ``verify_parts``, and setting parts aside.

Real run directories (``runtime.testing.write_run_directory``), real files: a part deleted, truncated, with one
byte flipped, replaced by a link or a FIFO, or named by a path that leaves ``output/``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from data_designer.slurm.contracts import PartDamage, RunStatus
from data_designer.slurm.contracts.records import (
    MANIFEST_SCHEMA,
    IndexRange,
    Requester,
    RetryIntent,
    RetryShard,
    SetAsidePart,
)
from data_designer.slurm.planner import bind_retry
from data_designer.slurm.runtime.status import classify
from data_designer.slurm.runtime.store import (
    RecordOk,
    RunLayout,
    contributing_parts,
    read_record,
    read_run,
    set_aside,
    shard_coverage,
    take_retry_generation,
    verify_parts,
    with_verified,
    write_record_once,
)
from data_designer.slurm.runtime.testing import write_run_directory

SHARDS = 3
PER_SHARD = 10
PART = "shards/00001/attempts/0001/output/part-00000.parquet"


def run_dir(tmp_path: Path) -> RunLayout:
    root = tmp_path / "ws"
    root.mkdir()
    return write_run_directory(root, shards=SHARDS, records_per_shard=PER_SHARD, parquet_parts=True)


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def status(layout: RunLayout, damages: tuple[PartDamage, ...] = ()) -> RunStatus:
    snapshot = with_verified(read_run(layout), damages)
    return classify(snapshot, None, snapshot.read_at, evidence="none", asked=False)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [("delete", "missing"), ("truncate", "size"), ("directory", "not_a_file"), ("symlink", "not_a_file")],
)
def test_every_read_finds_a_lost_part_without_reading_it_and_its_shard_is_damaged(
    tmp_path: Path, damage: str, problem: str
) -> None:
    layout = run_dir(tmp_path)
    part = layout.run_dir / PART
    if damage == "delete":
        part.unlink()
    elif damage == "truncate":
        part.write_bytes(part.read_bytes()[:-3])
    elif damage == "directory":
        part.unlink()
        part.mkdir()
    else:
        target = tmp_path / "elsewhere.parquet"
        target.write_bytes(part.read_bytes())
        part.unlink()
        part.symlink_to(target)
    snapshot = read_run(layout)
    (found,) = snapshot.shards[1].damaged
    assert (found.shard, found.attempt, found.path, found.problem) == (1, 1, PART, problem)
    assert found.range == IndexRange(PER_SHARD, 2 * PER_SHARD)
    assert snapshot.shards[1].missing == (found.range,)
    assert snapshot.stats.parts_checked == SHARDS
    result = status(layout)
    assert (result.state, [s.state for s in result.shards]) == ("damaged", ["succeeded", "damaged", "succeeded"])
    assert result.shards[1].reason == f"part_{problem}"


def test_a_fifo_in_place_of_a_part_is_refused_without_blocking(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    part = layout.run_dir / PART
    part.unlink()
    os.mkfifo(part)
    refs = contributing_parts(read_run(layout))
    assert [d.problem for d in read_run(layout).shards[1].damaged] == ["not_a_file"]
    damages, _ = verify_parts(str(layout.run_dir), refs, workers=2)  # the others hash; the FIFO is never opened
    assert damages == ()


def test_a_flipped_byte_passes_the_cheap_check_and_verify_finds_it(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    flip(layout.run_dir / PART)
    snapshot = read_run(layout)
    assert status(layout).state == "succeeded"
    refs = contributing_parts(snapshot)
    assert len(refs) == SHARDS
    damages, summary = verify_parts(str(layout.run_dir), refs, workers=4)
    (found,) = damages
    assert (found.path, found.problem) == (PART, "sha256")
    assert (summary.parts, summary.damaged, summary.workers) == (SHARDS, 1, SHARDS)
    assert summary.bytes == sum(ref.part.bytes for ref in refs)
    result = status(layout, damages)
    assert [s.state for s in result.shards] == ["succeeded", "damaged", "succeeded"]
    assert result.shards[1].missing == (found.range,)


def test_verify_is_the_same_with_one_worker_or_many_and_reports_progress_up_to_the_totals(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    flip(layout.run_dir / PART)
    refs = contributing_parts(read_run(layout))
    seen: list[tuple[int, int, int, int]] = []
    one, _ = verify_parts(str(layout.run_dir), refs, workers=1, on_progress=lambda *a: seen.append(a))
    many, _ = verify_parts(str(layout.run_dir), refs, workers=8)
    assert one == many
    assert [s[0] for s in seen] == [1, 2, 3]
    total = sum(ref.part.bytes for ref in refs)
    assert seen[-1] == (3, 3, total, total)


def test_a_manifest_part_path_outside_output_is_damaged_never_followed(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    path = layout.output_manifest(1, 1)
    found = read_record(path, MANIFEST_SCHEMA)
    assert isinstance(found, RecordOk)
    manifest = found.payload
    part = manifest.parts[0].model_copy(update={"path": "../../../../../run.json"})
    bad = manifest.model_copy(update={"parts": (part,)})
    path.unlink()
    write_record_once(path, MANIFEST_SCHEMA, bad, clock=lambda: datetime.now(UTC), operation="test")
    (damage,) = read_run(layout).shards[1].damaged
    assert damage.problem == "bad_path"


def intent_for(layout: RunLayout, damage: PartDamage, moved_to: str | None) -> RetryIntent:
    snapshot = read_run(layout)
    unit = bind_retry(snapshot.plan, snapshot.run.binding, shards=[damage.shard], generation=1)
    who = Requester(user="u", host="h", pid=1, time=datetime.now(UTC))
    shard = RetryShard(
        shard=damage.shard,
        state="damaged",
        reason=f"part_{damage.problem}",
        ranges=(damage.range,),
        set_aside=(SetAsidePart(damage=damage, moved_to=moved_to),),
    )
    return RetryIntent(generation=1, requested_by=who, shards=(shard,), unit=unit)


def test_a_set_aside_part_is_moved_never_deleted_and_its_range_is_what_the_next_attempt_generates(
    tmp_path: Path,
) -> None:
    layout = run_dir(tmp_path)
    flip(layout.run_dir / PART)
    snapshot = read_run(layout)
    (damage,), _ = verify_parts(str(layout.run_dir), contributing_parts(snapshot))
    moved_to = layout.set_aside_path(1, PART)
    intent = intent_for(layout, damage, moved_to)
    assert take_retry_generation(layout, intent, clock=lambda: datetime.now(UTC), operation="test")
    # before the move, the intent alone already counts the part for nothing (a crash between the two is safe)
    assert read_run(layout).shards[1].missing == (damage.range,)
    assert read_run(layout).shards[1].damaged == ()
    original = (layout.run_dir / PART).read_bytes()
    assert set_aside(layout, intent) == (PART,)
    assert set_aside(layout, intent) == ()  # idempotent: a resumer finds it done
    assert not (layout.run_dir / PART).exists()
    assert (layout.run_dir / moved_to).read_bytes() == original
    again = read_run(layout)
    assert (again.shards[1].damaged, again.shards[1].missing) == ((), (damage.range,))
    assert [p.moved_to for p in again.shards[1].set_aside] == [moved_to]
    # what the supervisor of the retry's attempt assigns itself: exactly the set-aside range
    plan = snapshot.plan.shards[1]
    assert shard_coverage(layout, plan, plan_digest=snapshot.plan.digest).missing == (damage.range,)
    assert status(layout).shards[1].state != "damaged"


def test_setting_aside_never_overwrites_a_file_already_at_the_target(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    (layout.run_dir / PART).write_bytes(b"x")
    (damage,) = read_run(layout).shards[1].damaged
    moved_to = layout.set_aside_path(1, PART)
    target = layout.run_dir / moved_to
    target.parent.mkdir(parents=True)
    target.write_bytes(b"someone else's")
    assert set_aside(layout, intent_for(layout, damage, moved_to)) == ()
    assert target.read_bytes() == b"someone else's"
    assert (layout.run_dir / PART).read_bytes() == b"x"
