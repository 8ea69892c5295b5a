"""The ``slurm profile`` commands: --json prints the result model, errors map to exit codes and one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

import data_designer.slurm.services as services
from data_designer.slurm.cli import command
from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import (
    ErrorCategory,
    ErrorInfo,
    ProfileInitResult,
    ProfileValidation,
    format_key_path,
)

TOKEN = "nvapi-abcdefghijklmnopqrstuv"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def runner(home: Path) -> CliRunner:
    return CliRunner(env={"HOME": str(home), "XDG_CONFIG_HOME": None, "DATA_DESIGNER_SLURM_PROFILE": None})


def invoke(runner: CliRunner, *args: str) -> Result:
    return runner.invoke(app, list(args))


def error_lines(result: Result) -> list[str]:
    lines = result.stderr.splitlines()
    assert lines, result.output
    assert all(line.startswith("error: ") for line in lines), lines
    return lines


def test_command_is_the_slurm_group_with_profile_commands() -> None:
    group = command()
    assert group.name == "slurm"
    assert isinstance(group, typer.core.TyperGroup)
    assert "profile" in group.commands


def test_help_lists_the_profile_commands(runner: CliRunner) -> None:
    result = invoke(runner, "profile", "--help")
    assert result.exit_code == 0
    assert "init" in result.stdout
    assert "validate" in result.stdout


def test_init_json_prints_exactly_the_result_model(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    result = invoke(runner, "profile", "init", "--profile", str(path), "--cluster", "eos", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert result.stdout.endswith("\n")
    assert result.stdout.count("\n") == 1
    parsed = ProfileInitResult.model_validate_json(result.stdout)
    assert parsed == ProfileInitResult(file=str(path), cluster="eos", schema_version=1, overwritten=False)
    assert path.is_file()


def test_init_human_output_is_not_json(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    result = invoke(runner, "profile", "init", "--profile", str(path))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Wrote profile {path} (cluster 'default').")
    assert f"data-designer slurm profile validate --profile {path}" in result.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)


def test_init_passes_every_option_through(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    args = [
        "profile",
        "init",
        "--profile",
        str(path),
        "--cluster",
        "eos",
        "--workspace-root",
        "/lustre/ws",
        "--account",
        "proj",
        "--gpu-partition",
        "batch",
        "--cpu-partition",
        "cpu_short",
        "--gpus-per-node",
        "8",
        "--gpu-request",
        "whole_node",
        "--container-runtime",
        "pyxis",
        "--python",
        "/opt/venv/bin/python",
        "--time-limit",
        "02:00:00",
    ]
    assert invoke(runner, *args).exit_code == 0
    result = invoke(runner, "profile", "validate", "--profile", str(path), "--json")
    assert result.exit_code == 0, result.output
    (cluster,) = ProfileValidation.model_validate_json(result.stdout).clusters
    assert cluster.name == "eos"
    assert cluster.workspace_root == "/lustre/ws"
    assert cluster.account == "proj"
    assert (cluster.gpu_partition, cluster.cpu_partition) == ("batch", "cpu_short")
    assert cluster.gpus_per_node == 8
    assert (cluster.gpu_request, cluster.container_runtime) == ("whole_node", "pyxis")
    assert cluster.compute_python == "/opt/venv/bin/python"
    assert cluster.default_time_limit == "02:00:00"


def test_init_writes_to_the_default_location(runner: CliRunner, home: Path) -> None:
    result = invoke(runner, "profile", "init", "--json")
    assert result.exit_code == 0, result.output
    expected = home / ".config" / "data-designer-slurm" / "profile.yaml"
    assert ProfileInitResult.model_validate_json(result.stdout).file == str(expected)
    assert expected.is_file()


def test_validate_json_prints_exactly_the_result_model(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    assert invoke(runner, "profile", "init", "--profile", str(path)).exit_code == 0
    result = invoke(runner, "profile", "validate", "--profile", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    parsed = ProfileValidation.model_validate_json(result.stdout)
    assert parsed.model_dump_json() + "\n" == result.stdout
    assert parsed.file == str(path)
    assert parsed.selected_cluster == "default"


def test_validate_human_output_is_a_table(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    invoke(runner, "profile", "init", "--profile", str(path), "--account", "proj")
    result = invoke(runner, "profile", "validate", "--profile", str(path))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"Profile {path} is valid (schema 1); selected cluster: default"
    assert lines[2].split() == [
        "cluster",
        "workspace",
        "account",
        "gpu/cpu",
        "partition",
        "gpus/node",
        "gpu",
        "request",
        "containers",
        "time",
    ]
    assert lines[3].split() == [
        "*",
        "default",
        "/shared/data-designer-slurm",
        "proj",
        "gpu/cpu",
        "auto",
        "gres",
        "none",
        "04:00:00",
    ]
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)


def test_init_twice_is_a_conflict_and_keeps_the_file(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    assert invoke(runner, "profile", "init", "--profile", str(path)).exit_code == 0
    before = path.read_bytes()
    result = invoke(runner, "profile", "init", "--profile", str(path), "--cluster", "other")
    assert result.exit_code == 4
    assert result.stdout == ""
    assert error_lines(result) == [f"error: {path}: {str(path)!r} already exists (fix: pass --force to overwrite it)"]
    assert path.read_bytes() == before


def test_init_force_replaces_the_file(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    invoke(runner, "profile", "init", "--profile", str(path))
    result = invoke(runner, "profile", "init", "--profile", str(path), "--cluster", "other", "--force")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Replaced profile {path} (cluster 'other').")
    assert '"other":' in path.read_text(encoding="utf-8")


def test_errors_with_json_are_one_error_info_object_on_stderr(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    invoke(runner, "profile", "init", "--profile", str(path))
    result = invoke(runner, "profile", "init", "--profile", str(path), "--json")
    assert result.exit_code == 4
    assert result.stdout == ""
    info = ErrorInfo.model_validate_json(result.stderr)
    assert info.category == ErrorCategory.CONFLICT
    assert info.exit_code == 4
    assert info.code == "file_exists"
    assert info.operation == "profile.init"
    assert info.file == str(path)


def test_a_missing_profile_exits_3(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    result = invoke(runner, "profile", "validate", "--profile", str(path))
    assert result.exit_code == 3
    (line,) = error_lines(result)
    assert line.startswith(f"error: {path}: profile {str(path)!r} does not exist (fix: create it with ")
    assert "Traceback" not in result.output


def test_an_invalid_profile_exits_2_with_one_line_per_problem(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    invoke(runner, "profile", "init", "--profile", str(path))
    text = path.read_text(encoding="utf-8")
    broken = (
        text.replace('"/shared/data-designer-slurm"', "relative/ws")
        .replace("sbatch_options: []", 'sbatch_options: ["--time=1", "--comment=a\\nb"]')
        .replace("account: null", f"account: {TOKEN}")
    )
    assert broken != text
    path.write_text(broken, encoding="utf-8")
    result = invoke(runner, "profile", "validate", "--profile", str(path))
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = error_lines(result)
    keys = [
        "clusters.default.workspace_root",
        "clusters.default.account",
        "clusters.default.sbatch_options[0]",
        "clusters.default.sbatch_options[1]",
    ]
    assert len(lines) == len(keys)
    for line, key in zip(lines, keys, strict=True):
        assert line.startswith(f"error: {path}:")
        assert f": {key}: " in line
        assert "(fix: " in line
    assert TOKEN not in result.stderr

    as_json = invoke(runner, "profile", "validate", "--profile", str(path), "--json")
    assert as_json.exit_code == 2
    info = ErrorInfo.model_validate_json(as_json.stderr)
    assert [format_key_path(p.key_path or ()) for p in info.problems] == keys
    assert info.exit_code == 2


def test_a_bad_init_option_names_the_option_and_writes_nothing(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    result = invoke(runner, "profile", "init", "--profile", str(path), "--workspace-root", "relative/ws")
    assert result.exit_code == 2
    (line,) = error_lines(result)
    assert line.startswith("error: --workspace-root: path 'relative/ws' is relative (fix: ")
    assert not path.exists()


def test_an_unknown_cluster_exits_3_and_an_ambiguous_one_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    invoke(runner, "profile", "init", "--profile", str(path))
    unknown = invoke(runner, "profile", "validate", "--profile", str(path), "--cluster", "nope")
    assert unknown.exit_code == 3
    assert error_lines(unknown)[0].endswith("(fix: use --cluster with one of: default)")
    text = path.read_text(encoding="utf-8").replace('default_cluster: "default"\n', "")
    cluster = text[text.index('  "default":') :]
    path.write_text(text + cluster.replace('"default":', '"second":', 1), encoding="utf-8")
    ambiguous = invoke(runner, "profile", "validate", "--profile", str(path))
    assert ambiguous.exit_code == 2, ambiguous.output
    (line,) = error_lines(ambiguous)
    assert "default_cluster" in line
    assert "several clusters" in line


@pytest.mark.parametrize(("debug", "traceback_shown"), [((), False), (("--debug",), True)])
def test_an_internal_error_exits_1_with_a_traceback_only_under_debug(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, debug: tuple[str, ...], traceback_shown: bool
) -> None:
    def broken(*args: object, **kwargs: object) -> ProfileValidation:
        raise RuntimeError("boom")

    monkeypatch.setattr(services, "validate_profile", broken)
    result = invoke(runner, "profile", "validate", *debug)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert ("Traceback (most recent call last)" in result.stderr) is traceback_shown
    assert ("RuntimeError: boom\n" in result.stderr) is traceback_shown
    last = result.stderr.splitlines()[-1]
    assert last == "error: internal error: RuntimeError: boom (fix: re-run with --debug and report the traceback)"


def test_an_internal_error_with_json_is_an_error_info(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> ProfileValidation:
        raise RuntimeError("boom")

    monkeypatch.setattr(services, "validate_profile", broken)
    result = invoke(runner, "profile", "validate", "--json")
    assert result.exit_code == 1
    info = ErrorInfo.model_validate_json(result.stderr)
    assert (info.category, info.exit_code, info.operation) == (ErrorCategory.INTERNAL, 1, "profile.validate")
    assert info.message == "internal error: RuntimeError: boom"


def test_debug_shows_the_traceback_of_expected_errors_too(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    quiet = invoke(runner, "profile", "validate", "--profile", str(path))
    loud = invoke(runner, "profile", "validate", "--profile", str(path), "--debug")
    assert quiet.exit_code == loud.exit_code == 3
    assert "Traceback" not in quiet.stderr
    assert "Traceback (most recent call last)" in loud.stderr
    assert loud.stderr.splitlines()[-1] == quiet.stderr.splitlines()[-1]


def test_an_interrupt_exits_130(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: object, **kwargs: object) -> ProfileValidation:
        raise KeyboardInterrupt

    monkeypatch.setattr(services, "validate_profile", interrupted)
    result = invoke(runner, "profile", "validate")
    assert result.exit_code == 130
    assert result.stderr == "error: interrupted\n"
