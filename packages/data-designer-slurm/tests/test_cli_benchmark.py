"""``slurm benchmark run BENCH --dry-run``: children with digests, --json as the service result, stable exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import BenchmarkDryRun, ErrorInfo
from data_designer.slurm.services import plan_benchmark

PROFILE = """\
schema_version: 1
clusters:
  lab:
    workspace_root: /shared/ws
    partitions: {gpu: batch, cpu: cpu}
    gpus_per_node: 4
    compute_python: {interpreter: /opt/dd/bin/python}
"""

BENCH = """\
schema_version: 1
name: sweep
base:
  inline:
    schema_version: 1
    name: base
    data_designer:
      inline:
        model_configs: [{alias: writer, model: m, provider: local}]
        columns: [{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}]
    records: 100
    sharding: {shards: 1}
    deployments:
      writer: {engine: vllm, model: /models/llama}
axes:
  - {axis: engine_arg, alias: writer, arg: max-num-seqs, values: [64, 256]}
repeats: 2
records: {policy: scaled, per_concurrency: 10, min_records: 100, max_records: 1000}
max_concurrent_children: 2
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "profile.yaml").write_text(PROFILE, encoding="utf-8")
    (tmp_path / "bench.yaml").write_text(BENCH, encoding="utf-8")
    return tmp_path


@pytest.fixture
def runner(workdir: Path) -> CliRunner:
    return CliRunner(env={"HOME": str(workdir / "home"), "XDG_CONFIG_HOME": None, "DATA_DESIGNER_SLURM_PROFILE": None})


def bench(runner: CliRunner, workdir: Path, *args: str, file: str = "bench.yaml") -> Result:
    return runner.invoke(
        app, ["benchmark", "run", str(workdir / file), "--profile", str(workdir / "profile.yaml"), *args]
    )


def error_lines(result: Result) -> list[str]:
    lines = result.stderr.splitlines()
    assert lines, result.output
    assert all(line.startswith("error: ") for line in lines), lines
    return lines


def test_help_lists_the_run_command(runner: CliRunner) -> None:
    result = runner.invoke(app, ["benchmark", "--help"])
    assert result.exit_code == 0
    assert "run" in result.stdout.split("Commands:")[1]


def test_json_prints_exactly_the_service_result(runner: CliRunner, workdir: Path) -> None:
    result = bench(runner, workdir, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    parsed = BenchmarkDryRun.model_validate_json(result.stdout)
    assert parsed == plan_benchmark(workdir / "bench.yaml", profile=workdir / "profile.yaml")
    assert result.stdout == parsed.model_dump_json() + "\n"
    assert [c.records for c in parsed.children] == [320] * 4  # 10 per request x the default concurrency 32


def test_human_output_lists_children_with_digests(runner: CliRunner, workdir: Path) -> None:
    result = bench(runner, workdir, "--dry-run")
    assert result.exit_code == 0, result.output
    expected = plan_benchmark(workdir / "bench.yaml", profile=workdir / "profile.yaml")
    lines = result.stdout.splitlines()
    assert lines[0] == "Dry run of benchmark 'sweep' on cluster 'lab' (nothing submitted)"
    assert lines[1].split() == ["plan", "sha256", expected.digest]
    assert lines[2].split(None, 1) == ["children", "4: 2 cases x 2 repeats, exclusive nodes, 2 at once"]
    assert lines[3].split() == ["GPU-hours", "at", "most", "64"]  # 4 children x 1 node x 4 GPUs (exclusive) x 4 h
    rows = [line.split() for line in lines[6:11]]
    assert rows[0] == ["#", "child", "case", "repeat", "records", "nodes", "GPUs", "GPU-hours", "plan"]
    for row, child in zip(rows[1:], expected.children, strict=True):
        value = dict(child.case)["engine_arg.writer.max-num-seqs"]
        assert row == [
            str(child.index),
            child.child_id,
            f"engine_arg.writer.max-num-seqs={value}",
            str(child.repeat),
            "320",
            "1",
            "1",
            "16",
            child.plan_digest[:12],
        ]
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)


@pytest.mark.parametrize("args", [["--out", "x"], ["--force"], ["--max-array-size", "5"]])
def test_dry_run_options_without_dry_run_exit_2_naming_the_option(
    runner: CliRunner, workdir: Path, args: list[str]
) -> None:
    result = bench(runner, workdir, *args)
    assert result.exit_code == 2
    (line,) = error_lines(result)
    assert f"{args[0]} applies to --dry-run only" in line
    info = ErrorInfo.model_validate_json(bench(runner, workdir, *args, "--json").stderr)
    assert (info.code, info.key_path) == ("dry_run_only", (args[0],))


def test_out_writes_every_child_and_refuses_a_non_empty_directory(runner: CliRunner, workdir: Path) -> None:
    out = workdir / "out"
    first = bench(runner, workdir, "--dry-run", "--out", str(out), "--json")
    assert first.exit_code == 0, first.output
    output = BenchmarkDryRun.model_validate_json(first.stdout).output
    assert output is not None
    assert output.files[0] == "benchmark.json"
    assert all((out / name).is_file() for name in output.files)
    human = bench(runner, workdir, "--dry-run", "--out", str(out), "--force")
    assert human.exit_code == 0, human.output
    assert human.stdout.splitlines()[-1] == f"Wrote (over existing files) {out}: {len(output.files)} files"
    assert bench(runner, workdir, "--dry-run", "--out", str(out)).exit_code == 4


def test_axis_problems_name_the_benchmark_line(runner: CliRunner, workdir: Path) -> None:
    (workdir / "bench.yaml").write_text(BENCH.replace("arg: max-num-seqs", "arg: port"), encoding="utf-8")
    result = bench(runner, workdir, "--dry-run")
    assert result.exit_code == 2
    lines = error_lines(result)
    assert lines
    assert all(line.startswith(f"error: {workdir / 'bench.yaml'}:16: axes[0].arg: ") for line in lines), lines


def test_a_missing_benchmark_file_exits_3(runner: CliRunner, workdir: Path) -> None:
    result = bench(runner, workdir, "--dry-run", file="absent.yaml")
    assert result.exit_code == 3
    path = workdir / "absent.yaml"
    assert error_lines(result) == [f"error: {path}: benchmark file {str(path)!r} does not exist (fix: check the path)"]
