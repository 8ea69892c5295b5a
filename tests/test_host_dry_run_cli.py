"""``data-designer slurm execute|benchmark run --dry-run`` through the real host CLI (subprocess, HOME in tmp)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_designer.slurm.contracts import PROFILE_ENV_VAR, BenchmarkDryRun, ExecutionPlan, RunDryRun, SubmissionUnit

pytestmark = pytest.mark.host

DATA_DESIGNER = Path(sys.executable).parent / "data-designer"

PROFILE = """\
schema_version: 1
clusters:
  lab:
    workspace_root: /shared/ws
    account: proj
    partitions: {gpu: batch, cpu: cpu}
    gpus_per_node: 8
    compute_python: {interpreter: /opt/dd/bin/python}
"""

CONFIG = """\
data_designer:
  model_configs: [{alias: writer, model: m, provider: local}]
  columns: [{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}]
"""

RUN = """\
schema_version: 1
name: reviews
data_designer: {{config: {config}}}
records: 1000
sharding: {{records_per_shard: 100}}
deployments:
  writer: {{engine: vllm, model: /models/llama, tensor_parallel: 2, replicas: 2}}
submission: {{time_limit: "01:00:00"}}
"""

BENCH = """\
schema_version: 1
name: sweep
base: {{run: {run}}}
axes: [{{axis: concurrency, alias: writer, values: [16, 64]}}]
records: {{policy: fixed, records: 200}}
"""


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert DATA_DESIGNER.is_file(), f"the host console script {DATA_DESIGNER} is missing: run 'uv sync'"
    env = {k: v for k, v in os.environ.items() if k not in {PROFILE_ENV_VAR, "XDG_CONFIG_HOME"}}
    env.update({"HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1"})
    return subprocess.run(
        [str(DATA_DESIGNER), *args], env=env, cwd=home, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    (path / "profile.yaml").write_text(PROFILE, encoding="utf-8")
    (path / "config.yaml").write_text(CONFIG, encoding="utf-8")
    (path / "run.yaml").write_text(RUN.format(config=path / "config.yaml"), encoding="utf-8")
    (path / "bench.yaml").write_text(BENCH.format(run=path / "run.yaml"), encoding="utf-8")
    return path


def test_slurm_help_lists_execute_and_benchmark(home: Path) -> None:
    result = run(home, "slurm", "--help")
    assert result.returncode == 0, result.stderr
    commands = {line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()}
    assert {"profile", "execute", "benchmark"} <= commands


def test_execute_dry_run_json_and_out(home: Path) -> None:
    result = run(
        home, "slurm", "execute", "run.yaml", "--dry-run", "--profile", "profile.yaml", "--out", "plan", "--json"
    )
    assert result.returncode == 0, result.stderr
    parsed = RunDryRun.model_validate_json(result.stdout)
    assert parsed.run_file == str(home / "run.yaml")
    assert (parsed.plan.shards, parsed.plan.nodes_per_allocation, parsed.plan.gpus_per_allocation) == (10, 1, 4)
    assert parsed.plan.gpu_hours_upper_bound == 10 * 4 * 1
    plan = ExecutionPlan.model_validate_json((home / "plan" / "plan.json").read_bytes())
    assert plan.digest == parsed.plan.digest
    unit = SubmissionUnit.model_validate_json((home / "plan" / "submission.json").read_bytes())
    assert unit.chunks[0].job_name == "dd-reviews-dry-run-c0"
    assert (home / "plan" / "allocation.sbatch").read_text(encoding="utf-8").startswith("#!/bin/bash\n")

    again = run(home, "slurm", "execute", "run.yaml", "--dry-run", "--profile", "profile.yaml", "--out", "plan")
    assert again.returncode == 4
    assert again.stderr.startswith(f"error: {home / 'plan'}: output directory ")


def test_execute_a_missing_config_exits_3_naming_the_run_file_line(home: Path) -> None:
    (home / "config.yaml").unlink()
    result = run(home, "slurm", "execute", "run.yaml", "--dry-run", "--profile", "profile.yaml")
    assert result.returncode == 3
    assert result.stderr.splitlines() == [
        f"error: {home / 'run.yaml'}:3: data_designer.config: Data Designer config "
        f"{str(home / 'config.yaml')!r} does not exist (fix: fix the path, or create the file)"
    ]


def test_benchmark_run_dry_run_json(home: Path) -> None:
    result = run(home, "slurm", "benchmark", "run", "bench.yaml", "--dry-run", "--profile", "profile.yaml", "--json")
    assert result.returncode == 0, result.stderr
    parsed = BenchmarkDryRun.model_validate_json(result.stdout)
    assert [dict(c.case) for c in parsed.children] == [{"concurrency.writer": 16}, {"concurrency.writer": 64}]
    assert len({c.plan_digest for c in parsed.children}) == 2
    human = run(home, "slurm", "benchmark", "run", "bench.yaml", "--dry-run", "--profile", "profile.yaml")
    assert human.returncode == 0, human.stderr
    assert all(c.child_id in human.stdout for c in parsed.children)


def test_benchmark_run_with_a_dry_run_option_but_no_dry_run_exits_2(home: Path) -> None:
    result = run(home, "slurm", "benchmark", "run", "bench.yaml", "--profile", "profile.yaml", "--out", "x")
    assert result.returncode == 2
    assert "--out applies to --dry-run only" in result.stderr
    assert not (home / "x").exists()
