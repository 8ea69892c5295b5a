"""``execute`` writes a private (or group-shared) run directory whatever the umask, and no snapshot is more readable
than the input it copies."""

from __future__ import annotations

import os
import stat
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from data_designer.slurm.contracts import ExecutionPlan, InvalidInputError
from data_designer.slurm.runtime.store import RunLayout, run_id_factory
from data_designer.slurm.runtime.testing import FakeSlurm
from data_designer.slurm.services import execute_run

CREATED = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
RUN_ID = "modes-20260301T120000Z-abc123"

PROFILE = """\
schema_version: 1
clusters:
  local:
    workspace_root: {workspace}
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: 2
    compute_python: {{interpreter: {python}}}
    workspace_sharing: {sharing}
"""

CONFIG = """\
model_configs:
  - {{alias: writer, model: test-model, provider: local}}
seed_config:
  source: {{seed_type: local, path: {seed}}}
columns:
  - {{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}}
"""

RUN = """\
schema_version: 1
name: modes
data_designer: {{config: {config}}}
records: 4
sharding: {{shards: 1}}
deployments:
  writer:
    engine: command
    argv: [{python}, -m, data_designer.slurm.runtime.testing.test_server, --host, "{{host}}", --port, "{{port}}"]
    model: test-model
    gpus_per_replica: 1
client: {{cpus: 1, memory_gb: 1}}
"""


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def write(path: Path, text: str, mode: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def execute(tmp_path: Path, sharing: str, *, seed_mode: int, run_mode: int) -> RunLayout:
    workspace = tmp_path / "shared" / "ws"
    seed = write(tmp_path / "in" / "seed.csv", "topic\na\n", seed_mode)
    config = write(tmp_path / "in" / "config.yaml", CONFIG.format(seed=seed), 0o644)
    run = write(tmp_path / "in" / "run.yaml", RUN.format(config=config, python=sys.executable), run_mode)
    profile = write(
        tmp_path / "profile.yaml", PROFILE.format(workspace=workspace, python=sys.executable, sharing=sharing), 0o600
    )
    previous = os.umask(0o022 if sharing == "private" else 0o077)  # a login umask neither way may decide
    try:
        execute_run(
            run,
            profile=profile,
            runner=FakeSlurm(max_array_size=11),
            clock=lambda: CREATED,
            environ={},
            id_factory=run_id_factory(lambda: CREATED, lambda: "abc123"),
        )
    finally:
        os.umask(previous)
    return RunLayout.of(workspace, RUN_ID)


def tree_modes(root: Path) -> dict[str, int]:
    found = {".": os.stat(root).st_mode & 0o7777}
    for directory, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(directory) / name
            found[str(path.relative_to(root))] = os.stat(path).st_mode & 0o7777
    return found


def test_a_private_workspace_is_0700_and_0600_and_snapshots_are_no_wider_than_their_source(tmp_path: Path) -> None:
    layout = execute(tmp_path, "private", seed_mode=0o644, run_mode=0o400)
    assert mode_of(tmp_path / "shared") == 0o700  # created on the way to the workspace, private too
    modes = tree_modes(layout.root)
    assert modes == {
        ".": 0o700,
        "runs": 0o700,
        f"runs/{RUN_ID}": 0o700,
        f"runs/{RUN_ID}/inputs": 0o700,
        f"runs/{RUN_ID}/inputs/run": 0o700,
        f"runs/{RUN_ID}/inputs/run/run.yaml": 0o400,  # never more than the source
        f"runs/{RUN_ID}/inputs/config": 0o700,
        f"runs/{RUN_ID}/inputs/config/config.yaml": 0o600,  # a 0644 source becomes private
        f"runs/{RUN_ID}/inputs/seed": 0o700,
        f"runs/{RUN_ID}/inputs/seed/seed.csv": 0o600,
        f"runs/{RUN_ID}/inputs/manifest.json": 0o600,
        f"runs/{RUN_ID}/plan.json": 0o600,
        f"runs/{RUN_ID}/run.json": 0o600,
        f"runs/{RUN_ID}/submissions": 0o700,
        f"runs/{RUN_ID}/submissions/0001.json": 0o600,
        "cluster": 0o700,  # the facts cache, asked afresh and checked before the run directory was made
        "cluster/facts.json": 0o600,
    }
    plan = ExecutionPlan.model_validate_json(layout.plan_record.read_bytes())
    assert plan.allocation.workspace_sharing == "private"


def test_a_group_workspace_is_setgid_0770_and_0660_but_a_private_seed_stays_private(tmp_path: Path) -> None:
    layout = execute(tmp_path, "group", seed_mode=0o600, run_mode=0o664)
    modes = tree_modes(layout.root)
    run = f"runs/{RUN_ID}"
    assert modes[f"{run}/inputs/seed/seed.csv"] == 0o600
    assert modes[f"{run}/inputs/config/config.yaml"] == 0o640  # 0660 & the source's 0644
    assert modes[f"{run}/inputs/run/run.yaml"] == 0o660
    directories = {name for name in modes if (layout.root / name).is_dir()}
    assert {modes[name] for name in directories} == {0o2770}
    records = {f"{run}/inputs/manifest.json", f"{run}/plan.json", f"{run}/run.json", f"{run}/submissions/0001.json"}
    records.add("cluster/facts.json")
    assert {modes[name] for name in records} == {0o660}
    plan = ExecutionPlan.model_validate_json(layout.plan_record.read_bytes())
    assert plan.allocation.workspace_sharing == "group"


def test_an_unknown_sharing_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as caught:
        execute(tmp_path, "world", seed_mode=0o644, run_mode=0o644)
    assert any(p.key_path == ("clusters", "local", "workspace_sharing") for p in caught.value.problems)
    assert not (tmp_path / "shared").exists()
