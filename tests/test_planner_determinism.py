"""Plan digests are a function of the inputs only: the committed golden digests come out everywhere.

Fresh processes under other PYTHONHASHSEED, TZ, LC_ALL and working directories print the committed
digests; and (Hypothesis) so do the golden runs rewritten with shuffled key order, as YAML or JSON,
with their defaults omitted or written out. The declared order of ``deployments`` and ``external``
is meaningful (replicas pack in that order) and is kept.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data_designer.slurm.planner import load_run, parse_document

GOLDEN = Path(__file__).resolve().parents[1] / "packages" / "data-designer-slurm-planner" / "tests" / "golden"
SCRIPT = GOLDEN / "compile_cases.py"
ORDERED_KEYS = frozenset({"deployments", "external"})


def _load_cases() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ddslurm_golden_cases_determinism", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


cases = _load_cases()
COMMITTED: dict[str, str] = json.loads((GOLDEN / "digests.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("hash_seed", "tz", "lc_all", "cwd"),
    [
        ("0", "UTC", "C", "tmp"),
        ("4242", "Asia/Kolkata", "C.UTF-8", "/"),
        ("random", "America/St_Johns", "POSIX", "golden"),
    ],
)
def test_fresh_processes_print_the_committed_digests(
    hash_seed: str, tz: str, lc_all: str, cwd: str, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "TZ": tz, "LC_ALL": lc_all, "LANG": lc_all}
    directory = {"tmp": tmp_path, "/": Path("/"), "golden": GOLDEN}[cwd]
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], cwd=directory, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == COMMITTED


def _shuffled(value: Any, rng: random.Random, *, keep_order: bool = False) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        if not keep_order:
            rng.shuffle(keys)
        return {key: _shuffled(value[key], rng, keep_order=key in ORDERED_KEYS) for key in keys}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


def _authored(name: str) -> dict[str, Any]:
    data = parse_document((GOLDEN / "cases" / name / "run.yaml").read_text(encoding="utf-8"), file="run.yaml").data
    assert isinstance(data, dict)
    return data


def _written_out(name: str, form: str) -> dict[str, Any]:
    """The case's run as authored, with every run default written, or with every default (profile's too) written."""
    authored = _authored(name)
    if form == "authored":
        return authored
    if form == "run_defaults":
        return load_run(json.dumps(authored), file="run.json").model_dump(mode="json")
    resolved: dict[str, Any] = cases.compile_case(name).run.model_dump(mode="json")
    return resolved


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(COMMITTED)),
    form=st.sampled_from(["authored", "run_defaults", "plan_run"]),
    as_json=st.booleans(),
    rng=st.randoms(use_true_random=False),
)
def test_key_order_format_and_written_out_defaults_do_not_change_the_digest(
    name: str, form: str, as_json: bool, rng: random.Random
) -> None:
    data = _shuffled(_written_out(name, form), rng)
    if as_json:
        text, file = json.dumps(data, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 2])), "run.json"
    else:
        text, file = yaml.safe_dump(data, sort_keys=False, allow_unicode=True), "run.yaml"
    assert cases.compile_case(name, run_text=text, run_file=file).digest == COMMITTED[name]
