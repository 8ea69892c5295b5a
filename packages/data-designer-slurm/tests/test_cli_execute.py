"""``slurm execute RUN --dry-run``: --json is the service result, errors are one line each with stable exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import RunDryRun
from data_designer.slurm.services import plan_run

PROFILE = """\
schema_version: 1
default_cluster: lab
clusters:
  lab:
    workspace_root: /shared/ws
    partitions: {gpu: batch, cpu: cpu}
    gpus_per_node: 4
    compute_python: {interpreter: /opt/dd/bin/python}
  auto:
    workspace_root: /shared/ws
    partitions: {gpu: batch, cpu: cpu}
    gpus_per_node: auto
    compute_python: {interpreter: /opt/dd/bin/python}
"""

RUN = """\
schema_version: 1
name: reviews
data_designer:
  inline:
    model_configs: [{alias: writer, model: m, provider: local}]
    columns: [{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}]
records: 100
sharding: {shards: 4}
deployments:
  writer: {engine: vllm, model: /models/llama, replicas: 2}
external:
  judge: {endpoint: "https://api.example.com/v1", api_key_env: JUDGE_KEY, model: judge-1}
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "profile.yaml").write_text(PROFILE, encoding="utf-8")
    (tmp_path / "run.yaml").write_text(RUN, encoding="utf-8")
    return tmp_path


@pytest.fixture
def runner(workdir: Path) -> CliRunner:
    return CliRunner(env={"HOME": str(workdir / "home"), "XDG_CONFIG_HOME": None, "DATA_DESIGNER_SLURM_PROFILE": None})


def execute(runner: CliRunner, workdir: Path, *args: str, run: str = "run.yaml") -> Result:
    return runner.invoke(app, ["execute", str(workdir / run), "--profile", str(workdir / "profile.yaml"), *args])


def error_lines(result: Result) -> list[str]:
    lines = result.stderr.splitlines()
    assert lines, result.output
    assert all(line.startswith("error: ") for line in lines), lines
    return lines


def test_json_prints_exactly_the_service_result(runner: CliRunner, workdir: Path) -> None:
    result = execute(runner, workdir, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert result.stdout.count("\n") == 1
    parsed = RunDryRun.model_validate_json(result.stdout)
    assert parsed == plan_run(workdir / "run.yaml", profile=workdir / "profile.yaml")
    assert result.stdout == parsed.model_dump_json() + "\n"


def test_human_output_summarises_the_plan(runner: CliRunner, workdir: Path) -> None:
    result = execute(runner, workdir, "--dry-run")
    assert result.exit_code == 0, result.output
    digest = plan_run(workdir / "run.yaml", profile=workdir / "profile.yaml").plan.digest
    lines = result.stdout.splitlines()
    assert lines[0] == "Dry run of run 'reviews' on cluster 'lab' (nothing submitted)"
    assert lines[1].split() == ["plan", "sha256", digest]
    assert lines[2].split() == ["records", "100", "in", "4", "shards", "(1", "array", "job)"]
    assert "one per shard: 1 node, 2 GPUs (4 GPUs per node), partition batch" in lines[3]
    assert lines[4].split() == ["GPU-hours", "at", "most", "32"]  # 4 shards x 1 node x 2 GPUs x 4 h (profile default)
    rows = [line.split() for line in lines[7:]]
    assert rows[0] == ["alias", "kind", "engine", "model", "replicas", "GPUs/replica", "concurrency"]
    assert rows[1] == ["writer", "deployed", "vllm", "/models/llama", "2", "1", "32"]
    assert rows[2] == ["judge", "external", "-", "judge-1", "at", "https://api.example.com/v1", "0", "0", "32"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)


def test_unresolved_entries_are_listed_with_their_fix(runner: CliRunner, workdir: Path) -> None:
    result = execute(runner, workdir, "--dry-run", "--cluster", "auto")
    assert result.exit_code == 0, result.output
    assert "  submittable  no: 1 unresolved entry" in result.stdout
    assert "Unresolved (blocks submission):" in result.stdout
    assert "  gpus_per_node: the profile says 'auto' and the cluster was not probed (fix: " in result.stdout
    assert "one per shard: ? nodes, 2 GPUs (gpus_per_node unresolved)" in result.stdout
    assert "GPU-hours    at most unknown" in result.stdout


def test_out_writes_files_and_a_second_time_needs_force(runner: CliRunner, workdir: Path) -> None:
    out = workdir / "plan"
    first = execute(runner, workdir, "--dry-run", "--out", str(out))
    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines()[-1] == f"Wrote {out}: plan.json, allocation.sbatch, submission.json"
    before = (out / "plan.json").read_bytes()
    second = execute(runner, workdir, "--dry-run", "--out", str(out))
    assert second.exit_code == 4
    assert error_lines(second) == [
        f"error: {out}: output directory {str(out)!r} is not empty "
        "(fix: choose a new or empty directory, or pass --force to overwrite the files in it)"
    ]
    forced = execute(runner, workdir, "--dry-run", "--out", str(out), "--force", "--json")
    assert forced.exit_code == 0, forced.output
    output = RunDryRun.model_validate_json(forced.stdout).output
    assert output is not None
    assert output.overwritten is True
    assert (out / "plan.json").read_bytes() == before


def test_max_array_size_is_passed_and_checked(runner: CliRunner, workdir: Path) -> None:
    result = execute(runner, workdir, "--dry-run", "--max-array-size", "2", "--json")
    assert result.exit_code == 0, result.output
    parsed = RunDryRun.model_validate_json(result.stdout)
    assert (parsed.facts.max_array_size, parsed.plan.array_jobs) == (2, 2)
    assert execute(runner, workdir, "--dry-run", "--max-array-size", "0").exit_code == 2


def test_a_missing_run_file_exits_3(runner: CliRunner, workdir: Path) -> None:
    result = execute(runner, workdir, "--dry-run", run="absent.yaml")
    assert result.exit_code == 3
    path = workdir / "absent.yaml"
    assert error_lines(result) == [f"error: {path}: run file {str(path)!r} does not exist (fix: check the path)"]


def test_bad_input_lists_every_problem_with_file_line_and_key(runner: CliRunner, workdir: Path) -> None:
    (workdir / "run.yaml").write_text(RUN.replace("records: 100", "records: 0\nshard: 1"), encoding="utf-8")
    result = execute(runner, workdir, "--dry-run")
    assert result.exit_code == 2
    lines = error_lines(result)
    assert len(lines) == 2
    assert lines[0].startswith(f"error: {workdir / 'run.yaml'}:7: records: ")
    assert lines[1].startswith(f"error: {workdir / 'run.yaml'}:8: shard: unknown key 'shard' (fix: ")


def test_the_cluster_option_selects_a_cluster(runner: CliRunner, workdir: Path) -> None:
    result = execute(runner, workdir, "--dry-run", "--cluster", "nope")
    assert result.exit_code == 3
    (line,) = error_lines(result)
    assert "cluster 'nope' is not in the profile" in line


def test_debug_shows_the_traceback(runner: CliRunner, workdir: Path) -> None:
    result = execute(runner, workdir, "--dry-run", "--debug", run="absent.yaml")
    assert result.exit_code == 3
    assert "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: ")
