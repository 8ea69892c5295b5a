"""Golden plans and scripts: every case in ``golden/cases`` compiles to exactly the committed files.

Accept an intended change with one line (then review the diff):

    UPDATE_GOLDEN=1 uv run pytest packages/data-designer-slurm-planner/tests/test_planner_compile_golden.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from data_designer.slurm.contracts import ExecutionPlan
from data_designer.slurm.planner._compile import plan_digest

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def _load_cases() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ddslurm_golden_cases", GOLDEN / "compile_cases.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


cases = _load_cases()
CASE_NAMES: list[str] = cases.case_names()
REQUIRED = {"one_shard", "many_shards", "multi_node", "several_models", "external_mixed", "containers"}


def _check(path: Path, text: str) -> None:
    if UPDATE:
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"{path.name} is missing; accept it with UPDATE_GOLDEN=1"
    assert path.read_text(encoding="utf-8") == text, f"{path.name} changed; if intended, accept with UPDATE_GOLDEN=1"


def test_the_issue_s_cases_are_all_pinned() -> None:
    assert set(CASE_NAMES) >= REQUIRED


@pytest.mark.parametrize("name", CASE_NAMES)
def test_case_compiles_to_its_golden_plan_and_script(name: str) -> None:
    plan: ExecutionPlan = cases.compile_case(name)
    _check(GOLDEN / f"{name}.plan.json", cases.plan_json(plan))
    script_path = GOLDEN / f"{name}.sbatch"
    if plan.submission.script is None:
        assert plan.unresolved
        if UPDATE and script_path.exists():
            script_path.unlink()
        assert not script_path.exists(), f"{script_path.name} is stale: the plan has no script"
    else:
        _check(script_path, plan.submission.script)


def test_golden_digests_are_committed() -> None:
    digests = {name: cases.compile_case(name).digest for name in CASE_NAMES}
    _check(GOLDEN / "digests.json", json.dumps(digests, indent=2, sort_keys=True) + "\n")


def test_no_golden_file_is_left_without_its_case() -> None:
    produced = {f"{name}.plan.json" for name in CASE_NAMES} | {f"{name}.sbatch" for name in CASE_NAMES}
    stale = [p.name for p in GOLDEN.iterdir() if p.suffix in (".json", ".sbatch") and p.name != "digests.json"]
    assert sorted(set(stale) - produced) == []


@pytest.mark.parametrize("name", CASE_NAMES)
def test_a_golden_plan_reloads_to_the_same_digest(name: str) -> None:
    text = (GOLDEN / f"{name}.plan.json").read_text(encoding="utf-8")
    plan = ExecutionPlan.model_validate_json(text)
    assert plan_digest(plan) == plan.digest
    assert plan == cases.compile_case(name)
