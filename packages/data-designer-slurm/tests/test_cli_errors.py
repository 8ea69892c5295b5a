"""Every error leaves the CLI once: one JSON object (``--json``) or ``error:`` lines on stderr, never a traceback.

Usage errors (exit 2), internal errors (exit 1, MemoryError included) and interrupts (exit 130), raised in a
service, while rendering, or by Click while parsing, with ``--json`` anywhere on the command line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

import data_designer.slurm.cli._execute_commands as execute_commands
import data_designer.slurm.services as services
from data_designer.slurm.cli import command
from data_designer.slurm.cli._app import app
from data_designer.slurm.cli._boundary import SlurmGroup, output_mode
from data_designer.slurm.cli._output import one_line, write_error
from data_designer.slurm.contracts import ErrorCategory, ErrorInfo, ExitCode, InterruptError, RunDryRun

PROFILE = """\
schema_version: 1
clusters:
  lab:
    workspace_root: /shared/ws
    partitions: {gpu: batch, cpu: cpu}
    gpus_per_node: 4
    compute_python: {interpreter: /opt/dd/bin/python}
"""

RUN = """\
schema_version: 1
name: reviews
data_designer:
  inline:
    model_configs: [{alias: writer, model: m, provider: local}]
    columns: [{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}]
records: 10
sharding: {shards: 1}
deployments:
  writer: {engine: vllm, model: /models/llama}
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


def dry_run(runner: CliRunner, workdir: Path, *args: str) -> Result:
    return runner.invoke(app, ["execute", str(workdir / "run.yaml"), "--profile", str(workdir / "profile.yaml"), *args])


def one_json_error(result: Result) -> ErrorInfo:
    """The single JSON error object on stderr (nothing on stdout)."""
    assert result.stdout == "", result.stdout
    assert len(result.stderr.splitlines()) == 1, result.stderr
    info = ErrorInfo.model_validate_json(result.stderr)
    assert info.exit_code == result.exit_code
    return info


def one_error_line(result: Result) -> str:
    """The single ``error:`` line on stderr: no usage banner, no box, no traceback."""
    assert result.stdout == "", result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_the_entry_point_is_the_boundary_group() -> None:
    assert isinstance(command(), SlurmGroup)


@pytest.mark.parametrize(
    "args",
    [
        ["execute", "--json", "RUN", "--bogus"],  # --json before the unknown option Click stops at
        ["execute", "RUN", "--bogus", "--json"],
        ["--json", "execute", "RUN"],  # not an option of the group itself
    ],
)
def test_a_usage_error_with_json_anywhere_is_one_json_object(runner: CliRunner, args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == ExitCode.INVALID_INPUT
    info = one_json_error(result)
    assert (info.category, info.code) == (ErrorCategory.INVALID_INPUT, "usage_error")
    assert info.key_path in {("--bogus",), ("--json",)}
    assert info.hint is not None
    assert info.hint.endswith(" --help'")


def test_a_usage_error_names_the_option_and_the_command(runner: CliRunner) -> None:
    info = one_json_error(runner.invoke(app, ["profile", "validate", "--json", "--timeout", "3"]))
    assert (info.operation, info.key_path) == ("profile.validate", ("--timeout",))
    assert info.message == "no such option (did you mean --probe-timeout?)"
    assert info.hint is not None
    assert "profile validate --help" in info.hint


def test_a_bad_value_and_a_missing_argument_are_usage_errors(runner: CliRunner) -> None:
    bad = one_json_error(runner.invoke(app, ["profile", "validate", "--probe-timeout", "0.5", "--json"]))
    assert (bad.exit_code, bad.key_path) == (2, ("--probe-timeout",))
    missing = one_json_error(runner.invoke(app, ["execute", "--json"]))
    assert (missing.exit_code, missing.key_path, missing.message) == (2, ("RUN",), "missing argument")


def test_a_usage_error_without_json_is_one_line(runner: CliRunner) -> None:
    result = runner.invoke(app, ["execute", "RUN", "--bogus"])
    assert result.exit_code == 2
    line = one_error_line(result)
    assert line.startswith("error: --bogus: no such option (did you mean --out?) (fix: see '")
    assert "Usage:" not in result.output
    assert "╭" not in result.output


def test_status_format_json_selects_json_errors_too(runner: CliRunner) -> None:
    info = one_json_error(runner.invoke(app, ["status", "RUN", "--format", "json", "--bogus"]))
    assert (info.operation, info.key_path) == ("status", ("--bogus",))


def test_json_after_the_double_dash_is_an_argument(runner: CliRunner, workdir: Path) -> None:
    result = runner.invoke(app, ["execute", "--profile", str(workdir / "profile.yaml"), "--dry-run", "--", "--json"])
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "/--json' does not exist" in one_error_line(result)  # the run file is named '--json'


def test_a_bare_group_still_shows_its_help(runner: CliRunner) -> None:
    result = runner.invoke(app, ["profile"])
    assert result.exit_code == 2
    assert "Usage:" in result.output
    assert "error:" not in result.output


@pytest.mark.parametrize("raised", [MemoryError(), RuntimeError("boom\nsecond line")])
def test_an_internal_error_in_a_service_is_one_json_object_without_traceback(
    runner: CliRunner, workdir: Path, monkeypatch: pytest.MonkeyPatch, raised: BaseException
) -> None:
    def broken(*args: object, **kwargs: object) -> RunDryRun:
        raise raised

    monkeypatch.setattr(services, "plan_run", broken)
    result = dry_run(runner, workdir, "--dry-run", "--json")
    assert result.exit_code == ExitCode.INTERNAL
    info = one_json_error(result)
    assert (info.category, info.operation) == (ErrorCategory.INTERNAL, "execute.dry_run")
    assert info.message.startswith(f"internal error: {type(raised).__name__}")
    assert "Traceback" not in result.stderr

    human = dry_run(runner, workdir, "--dry-run")
    assert human.exit_code == ExitCode.INTERNAL
    assert one_error_line(human).startswith(f"error: internal error: {type(raised).__name__}")


def test_an_error_while_rendering_is_caught_by_the_boundary(
    runner: CliRunner, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> list[str]:
        raise MemoryError("rendering")

    monkeypatch.setattr(execute_commands, "plan_lines", broken)
    result = dry_run(runner, workdir, "--dry-run")
    assert result.exit_code == ExitCode.INTERNAL
    line = one_error_line(result)
    assert line == "error: internal error: MemoryError: rendering (fix: re-run with --debug and report the traceback)"


def test_debug_prints_the_traceback_then_the_error_once(
    runner: CliRunner, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> RunDryRun:
        raise RuntimeError("boom")

    monkeypatch.setattr(services, "plan_run", broken)
    result = dry_run(runner, workdir, "--dry-run", "--debug")
    assert result.exit_code == 1
    assert result.stderr.startswith("Traceback (most recent call last)")
    assert [line for line in result.stderr.splitlines() if line.startswith("error: ")] == [
        "error: internal error: RuntimeError: boom (fix: re-run with --debug and report the traceback)"
    ]


@pytest.mark.parametrize("where", ["service", "render"])
def test_an_interrupt_exits_130_with_one_error(
    runner: CliRunner, workdir: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    def interrupted(*args: object, **kwargs: object) -> RunDryRun:
        raise KeyboardInterrupt

    if where == "service":
        monkeypatch.setattr(services, "plan_run", interrupted)
    else:
        monkeypatch.setattr(execute_commands, "plan_lines", interrupted)
    human = dry_run(runner, workdir, "--dry-run")
    assert human.exit_code == ExitCode.INTERRUPTED
    assert one_error_line(human) == "error: interrupted"
    if where == "service":  # (--json renders no summary)
        result = dry_run(runner, workdir, "--dry-run", "--json")
        assert result.exit_code == 130
        info = one_json_error(result)
        assert (info.category, info.code, info.message) == (ErrorCategory.INTERRUPTED, "interrupted", "interrupted")
        assert info.operation == "execute.dry_run"


def test_a_key_with_a_newline_stays_on_one_line(runner: CliRunner, workdir: Path) -> None:
    profile = workdir / "profile.yaml"
    profile.write_text(PROFILE.replace("    gpus_per_node: 4\n", '    gpus_per_node: 4\n    "bad\\nfield\\u001b": 1\n'))
    info = one_json_error(runner.invoke(app, ["profile", "validate", "--profile", str(profile), "--json"]))
    assert info.problems
    assert all(p.key_path == ("clusters", "lab", "bad\nfield\x1b") for p in info.problems)
    human = runner.invoke(app, ["profile", "validate", "--profile", str(profile)])
    assert human.exit_code == ExitCode.INVALID_INPUT
    lines = human.stderr.splitlines()
    assert len(lines) == len(info.problems)  # one line per problem, however many the key breaks
    for line in lines:
        assert line.startswith("error: ")
        assert "clusters.lab.bad\\nfield\\x1b: " in line
        assert "\x1b" not in line


def test_one_line_escapes_control_format_and_line_separator_characters() -> None:
    assert one_line("plain 'text' with é and \\ kept") == "plain 'text' with é and \\ kept"
    assert one_line("a\nb\r\tc\x00\x1b[31m\x7f\x85\u2028\u202e") == "a\\nb\\r\\tc\\x00\\x1b[31m\\x7f\\x85\\u2028\\u202e"


def test_json_errors_hold_no_character_that_splits_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    write_error(InterruptError("a\u2028b\x85c\u2029d\ne").info, as_json=True)
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert ErrorInfo.model_validate_json(err).message == "a\u2028b\x85c\u2029d\ne"


def test_output_mode_reads_json_and_debug_before_click_parses() -> None:
    group = command()
    assert isinstance(group, SlurmGroup)
    mode = output_mode(group, ["profile", "--debug", "validate", "--json"], "data-designer slurm")
    assert mode == (True, True, "profile.validate", "data-designer slurm profile validate")
    assert output_mode(group, ["execute", "x", "--", "--json", "--debug"], "slurm")[:2] == (False, False)
    assert output_mode(group, ["status", "x", "--format=json"], "slurm").as_json
    assert output_mode(group, [], "slurm").operation == "slurm"
