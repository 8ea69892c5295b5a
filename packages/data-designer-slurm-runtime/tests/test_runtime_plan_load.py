"""``store.load_plan``: the digest checked on the canonical bytes, and the full check for any other form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_designer.slurm.contracts import ConflictError
from data_designer.slurm.planner import canonical_json, plan_digest
from data_designer.slurm.runtime.store import load_plan
from data_designer.slurm.runtime.store._plan import _canonical_bytes_match
from data_designer.slurm.runtime.testing import write_run_directory


def test_a_plan_as_execute_writes_it_is_checked_on_its_bytes(tmp_path: Path) -> None:
    layout = write_run_directory(tmp_path, shards=3)
    data = layout.plan_record.read_bytes()
    plan = load_plan(layout)
    assert _canonical_bytes_match(data, plan.digest)
    assert plan_digest(plan) == plan.digest


def test_a_reformatted_plan_takes_the_full_check_and_an_edited_one_is_refused(tmp_path: Path) -> None:
    layout = write_run_directory(tmp_path, shards=3)
    document = json.loads(layout.plan_record.read_bytes())
    digest = document["digest"]
    layout.plan_record.chmod(0o644)
    layout.plan_record.write_text(json.dumps(document, indent=2))  # same content, not canonical bytes
    assert not _canonical_bytes_match(layout.plan_record.read_bytes(), digest)
    assert load_plan(layout).digest == digest
    document["run"]["records"] += 1
    layout.plan_record.write_bytes(canonical_json(document))  # canonical, but not what the digest covers
    assert not _canonical_bytes_match(layout.plan_record.read_bytes(), digest)
    with pytest.raises(ConflictError, match="does not match its digest"):
        load_plan(layout)


def test_a_digest_moved_off_the_top_level_matches_on_bytes_but_is_no_plan(tmp_path: Path) -> None:
    layout = write_run_directory(tmp_path, shards=2)
    document = json.loads(layout.plan_record.read_bytes())
    digest = document.pop("digest")
    document["run"]["digest"] = digest  # the same bytes hashed, the member nested instead
    layout.plan_record.chmod(0o644)
    layout.plan_record.write_bytes(canonical_json(document))
    assert _canonical_bytes_match(layout.plan_record.read_bytes(), digest)
    with pytest.raises(ConflictError, match="not a valid plan"):
        load_plan(layout)
