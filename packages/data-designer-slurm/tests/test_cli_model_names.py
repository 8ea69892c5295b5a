"""Model names (issue 12): a Data Designer config naming another model than the deployment's is a plan warning,
shown by ``execute --dry-run`` and by ``execute`` (which submits all the same: the deployment wins)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.cli._execute_commands import render_submission
from data_designer.slurm.contracts import RunDryRun
from data_designer.slurm.runtime.store import run_id_factory
from data_designer.slurm.runtime.testing import FakeSlurm
from data_designer.slurm.services import execute_run

CREATED = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

PROFILE = """\
schema_version: 1
default_cluster: local
clusters:
  local:
    workspace_root: {workspace}
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: 2
    compute_python: {{interpreter: {python}}}
    default_time_limit: "00:30:00"
"""

RUN = """\
schema_version: 1
name: names
data_designer:
  inline:
    model_configs: [{{alias: writer, model: {config_model}, provider: local}}]
    columns: [{{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}}]
records: 4
sharding: {{shards: 1}}
deployments:
  writer:
    engine: command
    argv: [{python}, -m, data_designer.slurm.runtime.testing.test_server, --host, "{{host}}", --port, "{{port}}",
           --model, "{{model}}", --replica-id, r]
    model: served-model
    gpus_per_replica: 1
client: {{cpus: 1, memory_gb: 1}}
"""

WARNING = (
    "  deployments.writer.model: the Data Designer config names 'config-model' (model_configs[0].model), the "
    "deployment 'served-model': the deployment wins, the client asks its server for 'served-model' (model_mismatch)"
)


def write_inputs(root: Path, config_model: str) -> tuple[Path, Path]:
    run = root / "run.yaml"
    run.write_text(RUN.format(config_model=config_model, python=sys.executable), encoding="utf-8")
    profile = root / "profile.yaml"
    profile.write_text(PROFILE.format(workspace=root / "ws", python=sys.executable), encoding="utf-8")
    return run, profile


def dry_run(root: Path, *args: str) -> tuple[int, str]:
    run, profile = write_inputs(root, "config-model")
    runner = CliRunner(env={"HOME": str(root), "XDG_CONFIG_HOME": None, "DATA_DESIGNER_SLURM_PROFILE": None})
    result = runner.invoke(app, ["execute", str(run), "--profile", str(profile), "--dry-run", *args])
    return result.exit_code, result.stdout


def test_the_dry_run_shows_the_mismatch_as_a_warning(tmp_path: Path) -> None:
    code, out = dry_run(tmp_path)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[lines.index("Warnings:") + 1] == WARNING
    assert "  submittable  yes" in lines


def test_the_dry_run_json_carries_the_warning(tmp_path: Path) -> None:
    code, out = dry_run(tmp_path, "--json")
    assert code == 0, out
    [warning] = RunDryRun.model_validate_json(out).plan.warnings
    assert (warning.code, warning.key_path) == ("model_mismatch", "deployments.writer.model")


@pytest.mark.parametrize(("config_model", "warned"), [("config-model", True), ("served-model", False)])
def test_execute_submits_and_shows_the_plan_s_warnings(tmp_path: Path, config_model: str, warned: bool) -> None:
    run, profile = write_inputs(tmp_path, config_model)
    result = execute_run(
        run,
        profile=profile,
        runner=FakeSlurm(),
        clock=lambda: CREATED,
        environ={},
        id_factory=run_id_factory(lambda: CREATED, lambda: "abc123"),
    )
    assert result.submitted == 1
    assert [w.code for w in result.warnings] == (["model_mismatch"] if warned else [])
    lines = render_submission(result).splitlines()
    assert (WARNING in lines) is warned
    assert ("Warnings:" in lines) is warned
