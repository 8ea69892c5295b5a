"""``profile validate --probe``: the service with the fake Slurm injected, and how the CLI renders and exits.

The fake accepts jobs but runs nothing, so :class:`ComputeNode` runs every accepted batch script
with bash right away, as a compute node sharing this filesystem would. The CLI builds its own
runner (the real Slurm commands on PATH); its tests inject the fake by wrapping the service, the
seam the CLI calls, or take Slurm off PATH.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import data_designer.slurm.services as services
from data_designer.slurm.cli._app import app
from data_designer.slurm.cli._profile_commands import render_probe
from data_designer.slurm.contracts import (
    PROBE_CHECK_NAMES,
    ErrorCategory,
    ErrorInfo,
    ProbeFailedError,
    ProfileValidation,
    UnavailableError,
)
from data_designer.slurm.contracts.records import FACTS_SCHEMA
from data_designer.slurm.planner import ProfileTemplate, render_profile
from data_designer.slurm.runtime.scheduler import CommandResult
from data_designer.slurm.runtime.store import RecordOk, read_record
from data_designer.slurm.runtime.testing import CountingRunner, FakeSlurm
from data_designer.slurm.services import validate_profile

PROBE_ID = "20260101T000000Z-test"


class ComputeNode:
    """A runner over the fake that also runs every accepted batch script with bash (synchronously)."""

    def __init__(self, fake: FakeSlurm, *, directive: str = "") -> None:
        self.fake = fake
        self.directive = directive

    def run(
        self, argv: Sequence[str], *, timeout_s: float, stdin: str | None = None, environment: object = None
    ) -> CommandResult:
        if argv and argv[0] == "sbatch" and stdin is not None and self.directive:
            stdin = stdin.replace("\n", f"\n# fake-slurm: {self.directive}\n", 1)
        result = self.fake.run(argv, timeout_s=timeout_s, stdin=stdin)
        if argv and argv[0] == "sbatch" and result.ok and stdin is not None:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_JOB_ID": result.stdout.strip()}
            subprocess.run(["bash", "-s"], input=stdin, text=True, env=env, check=True, timeout=120)
        return result


@pytest.fixture
def fake() -> FakeSlurm:
    return FakeSlurm(cluster_name="ddslurm")


def write_profile(tmp_path: Path, **overrides: Any) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    fields: dict[str, Any] = {
        "cluster": "local",
        "workspace_root": str(workspace),
        "account": "ddtest",
        "python": sys.executable,
    }
    fields.update(overrides)
    path = tmp_path / "profile.yaml"
    path.write_text(render_profile(ProfileTemplate(**fields)), encoding="utf-8")
    return path


def injected(fake: FakeSlurm) -> dict[str, Any]:
    return {"runner": ComputeNode(fake), "clock": fake.clock, "sleep": fake.sleep, "probe_id": PROBE_ID}


# ---- the service --------------------------------------------------------------------------------------------------


def test_without_probe_validate_never_calls_slurm(tmp_path: Path, fake: FakeSlurm) -> None:
    counting = CountingRunner(fake)
    result = validate_profile(write_profile(tmp_path), runner=counting)

    assert result.probe is None
    assert counting.calls == []
    assert "probe" in ProfileValidation.model_fields


def test_a_passing_probe_is_part_of_the_validation(tmp_path: Path, fake: FakeSlurm) -> None:
    path = write_profile(tmp_path)
    result = validate_profile(path, probe=True, **injected(fake))

    assert result.selected_cluster == "local"
    assert result.probe is not None
    assert result.probe.passed, result.probe.not_ok()
    assert [c.name for c in result.probe.checks] == list(PROBE_CHECK_NAMES)
    assert result.probe.gpus_per_node_resolved == 2
    assert result.clusters[0].gpus_per_node == "auto", "the summary shows the profile as written"
    assert ProfileValidation.model_validate_json(result.model_dump_json()) == result
    cached = read_record(tmp_path / "ws" / "cluster" / "facts.json", FACTS_SCHEMA)  # refreshed for execute
    assert isinstance(cached, RecordOk)
    assert [p.name for p in cached.payload.partitions] == ["cpu", "gpu"]
    assert cached.payload.cluster_name == "ddslurm"


def test_a_failing_probe_raises_check_failed_with_the_whole_report(tmp_path: Path, fake: FakeSlurm) -> None:
    path = write_profile(tmp_path, account="ddother")
    with pytest.raises(ProbeFailedError) as caught:
        validate_profile(path, probe=True, **injected(fake))

    error = caught.value
    assert error.exit_code == 6
    assert error.info.category == ErrorCategory.CHECK_FAILED
    assert error.info.file == str(path)
    assert error.info.operation == "profile.validate"
    assert [c.name for c in error.report.not_ok()] == ["account", "probe_job", "shared_workspace", "compute_runtime"]
    assert error.problems[0].code == "probe_account_failed"
    assert "'ddother'" in error.problems[0].message
    assert error.problems[0].key_path == ("clusters", "local", "account")


def test_the_probe_timeout_bounds_the_wait_for_the_job(tmp_path: Path, fake: FakeSlurm) -> None:
    queued = {**injected(fake), "runner": ComputeNode(fake, directive="pending=100000")}
    with pytest.raises(ProbeFailedError) as caught:
        validate_profile(write_profile(tmp_path), probe=True, probe_timeout_s=20, **queued)

    check = caught.value.report.check("probe_job")
    assert check.status == "failed"
    assert "did not finish within 20s" in check.detail
    assert caught.value.report.duration_s < 60


def test_unreachable_slurm_raises_unavailable(tmp_path: Path, fake: FakeSlurm) -> None:
    fake.fail("scontrol", "not_found")
    fake.fail("sinfo", "not_found")
    with pytest.raises(UnavailableError) as caught:
        validate_profile(write_profile(tmp_path), probe=True, **injected(fake))
    assert caught.value.exit_code == 5


def test_the_default_runner_uses_the_given_environment(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    with pytest.raises(UnavailableError) as caught:
        validate_profile(write_profile(tmp_path), probe=True, environ={"PATH": str(empty), "HOME": str(tmp_path)})
    assert "not found on PATH" in str(caught.value)


# ---- the CLI --------------------------------------------------------------------------------------------------


@pytest.fixture
def cli(tmp_path: Path) -> CliRunner:
    home = tmp_path / "home"
    home.mkdir()
    return CliRunner(env={"HOME": str(home), "XDG_CONFIG_HOME": None, "DATA_DESIGNER_SLURM_PROFILE": None})


@pytest.fixture
def with_fake(monkeypatch: pytest.MonkeyPatch, fake: FakeSlurm) -> FakeSlurm:
    """The CLI's service call, with the fake cluster injected."""
    monkeypatch.setattr(services, "validate_profile", functools.partial(validate_profile, **injected(fake)))
    return fake


def invoke(cli: CliRunner, *args: str) -> Result:
    return cli.invoke(app, ["profile", "validate", *args])


def test_cli_probe_ok_prints_the_profile_then_every_check(cli: CliRunner, tmp_path: Path, with_fake: FakeSlurm) -> None:
    result = invoke(cli, "--profile", str(write_profile(tmp_path)), "--probe")

    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    head = "Probe of cluster 'local' (Slurm cluster ddslurm, Slurm 22.05.8) in "
    probe_line = next(line for line in result.stdout.splitlines() if line.startswith(head))
    assert probe_line.endswith(": all 10 checks ok; GPUs per node: 2")
    rows = {line.split()[0]: line.split()[1] for line in result.stdout.split(probe_line)[1].strip().splitlines()[1:]}
    assert rows == dict.fromkeys(PROBE_CHECK_NAMES, "ok")


def test_cli_probe_json_prints_the_validation_with_its_probe(
    cli: CliRunner, tmp_path: Path, with_fake: FakeSlurm
) -> None:
    result = invoke(cli, "--profile", str(write_profile(tmp_path)), "--probe", "--json")

    assert result.exit_code == 0, result.output
    parsed = ProfileValidation.model_validate_json(result.stdout)
    assert parsed.probe is not None
    assert parsed.probe.gpus_per_node_resolved == 2


def test_cli_failed_probe_prints_the_table_and_one_error_per_check_not_ok(
    cli: CliRunner, tmp_path: Path, with_fake: FakeSlurm
) -> None:
    result = invoke(cli, "--profile", str(write_profile(tmp_path, cpu_partition="nope")), "--probe")

    assert result.exit_code == 6
    table = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()[2:]}
    assert table["cpu_partition"] == "FAILED"
    assert table["probe_job"] == "not"  # 'not run'
    assert table["account"] == "ok"
    errors = result.stderr.splitlines()
    assert errors[0].startswith("error: clusters.local.partitions.cpu: probe check 'cpu_partition' failed: ")
    assert "partition 'nope' does not exist" in errors[0]
    assert [e.split("'")[1] for e in errors] == ["cpu_partition", "probe_job", "shared_workspace", "compute_runtime"]


def test_cli_failed_probe_with_json_prints_nothing_on_stdout_and_the_problems_on_stderr(
    cli: CliRunner, tmp_path: Path, with_fake: FakeSlurm
) -> None:
    result = invoke(cli, "--profile", str(write_profile(tmp_path, account="ddother")), "--probe", "--json")

    assert result.exit_code == 6
    assert result.stdout == ""
    info = ErrorInfo.model_validate_json(result.stderr)
    assert info.code == "probe_failed"
    assert [p.code for p in info.problems] == [
        "probe_account_failed",
        "probe_probe_job_not_run",
        "probe_shared_workspace_not_run",
        "probe_compute_runtime_not_run",
    ]
    assert json.loads(result.stderr)["exit_code"] == 6


def test_cli_probe_without_slurm_exits_5(cli: CliRunner, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    profile = str(write_profile(tmp_path))
    result = cli.invoke(app, ["profile", "validate", "--profile", profile, "--probe"], env={"PATH": str(empty)})

    assert result.exit_code == 5, result.output
    assert result.stderr.startswith("error: Slurm cannot be reached: ")


def test_cli_without_probe_needs_no_slurm(cli: CliRunner, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    profile = str(write_profile(tmp_path))
    result = cli.invoke(app, ["profile", "validate", "--profile", profile], env={"PATH": str(empty)})

    assert result.exit_code == 0, result.output
    assert "Probe" not in result.stdout


def test_cli_help_documents_probe_exit_codes_and_json(cli: CliRunner) -> None:
    result = invoke(cli, "--help")

    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "--probe" in text
    assert "--probe-timeout" in text
    assert "5 Slurm cannot be reached at all" in text
    assert "With --json a failing probe prints nothing on stdout" in text


def test_render_probe_shows_the_fix_of_checks_that_are_not_ok(tmp_path: Path, fake: FakeSlurm) -> None:
    with pytest.raises(ProbeFailedError) as caught:
        validate_profile(write_profile(tmp_path, gpus_per_node=4), probe=True, **injected(fake))

    lines = render_probe(caught.value.report).splitlines()
    assert lines[0].endswith(": 1 of 10 checks failed or did not run")
    gpus = next(line for line in lines if line.startswith("gpus_per_node"))
    assert gpus.split()[1] == "FAILED"
    assert gpus.endswith("(fix: set gpus_per_node to 2 (or 'auto'))")
