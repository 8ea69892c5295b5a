"""A workspace root Slurm cannot use is refused by the dry run exactly as by ``execute``: one check, in compile."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import ErrorInfo, InvalidInputError, NotFoundError
from data_designer.slurm.runtime.testing import FakeSlurm
from data_designer.slurm.services import execute_run, plan_benchmark, plan_run

PROFILE = """\
schema_version: 1
clusters:
  lab:
    workspace_root: {root}
    partitions: {{gpu: batch, cpu: cpu}}
    gpus_per_node: 4
    compute_python: {{interpreter: /opt/dd/bin/python}}
"""

RUN = """\
schema_version: 1
name: reviews
data_designer:
  inline:
    model_configs: [{alias: writer, model: m, provider: local}]
    columns: [{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}]
records: 10
sharding: {shards: 2}
deployments:
  writer: {engine: vllm, model: /models/llama}
"""

BENCH = """\
schema_version: 1
name: sweep
base: {{run: {run}}}
axes: [{{axis: concurrency, alias: writer, values: [16, 64]}}]
records: {{policy: fixed, records: 20}}
"""


def files(tmp_path: Path, root: str) -> tuple[Path, Path]:
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE.format(root=root), encoding="utf-8")
    run = tmp_path / "run.yaml"
    run.write_text(RUN, encoding="utf-8")
    return profile, run


@pytest.mark.parametrize("name", ["ws%j", "w\\s"])
def test_a_pattern_character_in_the_workspace_root_is_refused_by_dry_run_and_execute_alike(
    tmp_path: Path, name: str
) -> None:
    root = tmp_path / name
    profile, run = files(tmp_path, f"'{root}'")  # single-quoted YAML: the backslash stays a backslash
    with pytest.raises(InvalidInputError) as planned:
        plan_run(run, profile=profile, environ={})
    fake = FakeSlurm()
    with pytest.raises(InvalidInputError) as executed:
        execute_run(run, profile=profile, runner=fake, environ={})
    assert planned.value.info == executed.value.info  # the same check, the same error
    (problem,) = planned.value.problems
    assert (problem.code, problem.file, problem.line, problem.key_path) == (
        "unsafe_slurm_path",
        str(profile),
        4,
        ("clusters", "lab", "workspace_root"),
    )
    assert repr(str(root)) in problem.message
    assert problem.hint == "choose a workspace_root without these characters"
    assert not fake.jobs
    assert not root.exists()

    bench = tmp_path / "bench.yaml"
    bench.write_text(BENCH.format(run=run), encoding="utf-8")
    with pytest.raises(InvalidInputError) as benchmarked:
        plan_benchmark(bench, profile=profile, environ={})
    assert ("clusters", "lab", "workspace_root") in {p.key_path for p in benchmarked.value.problems}


def test_a_control_character_in_the_workspace_root_is_refused_when_the_profile_loads(tmp_path: Path) -> None:
    profile, run = files(tmp_path, '"/shared/w\\ts"')
    with pytest.raises(InvalidInputError) as planned:
        plan_run(run, profile=profile, environ={})
    with pytest.raises(InvalidInputError) as executed:
        execute_run(run, profile=profile, runner=FakeSlurm(), environ={})
    assert planned.value.problems == executed.value.problems
    assert [p.key_path for p in planned.value.problems] == [("clusters", "lab", "workspace_root")]


def test_the_cli_dry_run_exits_2_naming_the_profile_key(tmp_path: Path) -> None:
    profile, run = files(tmp_path, "/shared/ws%u")
    runner = CliRunner(env={"HOME": str(tmp_path), "XDG_CONFIG_HOME": None, "DATA_DESIGNER_SLURM_PROFILE": None})
    human = runner.invoke(app, ["execute", str(run), "--profile", str(profile), "--dry-run"])
    assert human.exit_code == 2
    assert human.stdout == ""
    assert human.stderr == (
        f"error: {profile}:4: clusters.lab.workspace_root: workspace root '/shared/ws%u' must be an absolute path "
        "without '%', backslashes or control characters (Slurm reads them as file-name patterns) "
        "(fix: choose a workspace_root without these characters)\n"
    )
    as_json = runner.invoke(app, ["execute", str(run), "--profile", str(profile), "--dry-run", "--json"])
    assert as_json.exit_code == 2
    assert ErrorInfo.model_validate_json(as_json.stderr).key_path == ("clusters", "lab", "workspace_root")


SEEDED_RUN = """\
schema_version: 1
name: reviews
data_designer:
  inline:
    model_configs: [{{alias: writer, model: m, provider: local}}]
    seed_config: {{source: {{seed_type: local, path: {seed}}}, sampling_strategy: shuffle}}
    columns: [{{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}}]
records: 10
sharding: {{shards: 2}}
deployments:
  writer: {{engine: vllm, model: /models/llama}}
"""


def test_a_seed_naming_no_files_is_refused_by_dry_run_and_execute_alike(tmp_path: Path) -> None:
    profile, run = files(tmp_path, str(tmp_path / "ws"))
    run.write_text(SEEDED_RUN.format(seed=tmp_path / "missing" / "*.csv"), encoding="utf-8")
    with pytest.raises(NotFoundError) as planned:
        plan_run(run, profile=profile, environ={})
    fake = FakeSlurm()
    with pytest.raises(NotFoundError) as executed:
        execute_run(run, profile=profile, runner=fake, environ={})
    assert (planned.value.info.code, planned.value.info.exit_code) == ("file_not_found", 3)
    assert planned.value.info.key_path == executed.value.info.key_path == ("seed_config", "source", "path")
    assert planned.value.info.message == executed.value.info.message
    assert not fake.jobs
    assert not (tmp_path / "ws").exists()
