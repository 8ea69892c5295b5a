"""Every golden batch script, bound to a run, passes ``sbatch --test-only`` on the real local cluster.

The golden profile's ``local`` and ``pyxis`` clusters match ``scripts/local-slurm`` (4 nodes of 4 CPUs
and 2 GPUs, partitions gpu/cpu, account ddtest), so Slurm itself accepts each script with its
sbatch argv, job name and array spec. The cluster is brought up (or reused) by the same function
as the cluster suite's session fixture in ``tests/cluster/conftest.py``; ``--test-only`` submits
nothing, so this test does not take that suite's exclusive lock.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from data_designer.slurm.contracts import ExecutionPlan, SubmissionBinding
from data_designer.slurm.planner import bind_submission

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "packages" / "data-designer-slurm-planner" / "tests" / "golden"
SCRIPTS = sorted(GOLDEN.glob("*.sbatch"))

pytestmark = pytest.mark.cluster


def _cluster_conftest() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "ddslurm_cluster_conftest", ROOT / "tests" / "cluster" / "conftest.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def slurm_env() -> dict[str, str]:
    exports: dict[str, str] = _cluster_conftest()._bring_up()
    return {**os.environ, **exports}


def test_every_golden_case_with_a_script_is_checked() -> None:
    assert len(SCRIPTS) >= 6


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_golden_script_passes_sbatch_test_only(script: Path, slurm_env: dict[str, str], tmp_path: Path) -> None:
    plan = ExecutionPlan.model_validate_json((GOLDEN / f"{script.stem}.plan.json").read_text(encoding="utf-8"))
    assert plan.submission.script == script.read_text(encoding="utf-8")
    unit = bind_submission(
        plan, SubmissionBinding(run_id="golden", run_dir=str(tmp_path), job_name_prefix=f"ddgolden-{script.stem}")
    )
    for chunk in unit.chunks:
        argv = [
            "sbatch",
            "--test-only",
            *unit.sbatch_args,
            f"--job-name={chunk.job_name}",
            f"--array={chunk.array_spec}",
            str(script),
        ]
        done = subprocess.run(argv, env=slurm_env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"{argv}: {done.stderr}"
        assert "to start at" in done.stderr, done.stderr
