"""``slurm execute RUN --dry-run`` on broken input: exit 2, one ``error: file:line:`` line at the line to fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app

PROFILE = """\
schema_version: 1
default_cluster: lab
clusters:
  lab:
    workspace_root: /shared/ws
    partitions:
      gpu: batch
      cpu: cpu
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
records: 100
sharding: {shards: 4}
deployments:
  writer:
    engine_args: {max-num-seqs: 64}
    engine: vllm
    model: /models/llama
    replicas: 2
"""


@pytest.mark.parametrize(
    ("run_edit", "profile_edit", "expected"),
    [
        # The '[' on line 11 is not closed; PyYAML notices it on line 12.
        (
            ("engine_args: {max-num-seqs: 64}", "engine_args: [max-num-seqs"),
            None,
            "run.yaml:11: invalid YAML: the '[' opened on line 11 is not closed (noticed on line 12: "
            "expected ',' or ']', but got ':') (fix: close the '[' opened on line 11)",
        ),
        (
            ("    model: /models/llama\n", ""),
            None,
            "run.yaml:10: deployments.writer.model: required key 'model' is missing (fix: add 'model')",
        ),
        (
            None,
            ("      gpu: batch\n", ""),
            "profile.yaml:6: clusters.lab.partitions.gpu: required key 'gpu' is missing (fix: add 'gpu')",
        ),
    ],
)
def test_broken_input_is_reported_at_the_line_to_fix(
    tmp_path: Path,
    run_edit: tuple[str, str] | None,
    profile_edit: tuple[str, str] | None,
    expected: str,
) -> None:
    run, profile = RUN, PROFILE
    if run_edit is not None:
        assert run_edit[0] in run
        run = run.replace(*run_edit)
    if profile_edit is not None:
        assert profile_edit[0] in profile
        profile = profile.replace(*profile_edit)
    (tmp_path / "home").mkdir()
    (tmp_path / "run.yaml").write_text(run, encoding="utf-8")
    (tmp_path / "profile.yaml").write_text(profile, encoding="utf-8")
    runner = CliRunner(
        env={"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": None, "DATA_DESIGNER_SLURM_PROFILE": None}
    )
    result = runner.invoke(
        app, ["execute", str(tmp_path / "run.yaml"), "--profile", str(tmp_path / "profile.yaml"), "--dry-run"]
    )
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"error: {tmp_path}/{expected}"]
