"""What the real local cluster cannot hold is refused before submission (issue 12), by ``execute`` and by
``execute --dry-run --cluster-check`` alike: exit 2, one line naming the key and the cluster's limit, nothing written.

The local nodes have 4 CPUs, 4000 MB and gpu:2; the ``short`` partition has MaxTime 00:30:00. No job runs: the
facts come from one ``sinfo`` and one ``scontrol show config``, and the refusal comes before the run directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.cluster

CONFIG: dict[str, Any] = {
    "model_configs": [{"alias": "writer", "model": "fit-writer", "provider": "local"}],
    "columns": [
        {"name": "topic", "column_type": "sampler", "sampler_type": "category", "params": {"values": ["a", "b"]}},
        {"name": "text", "column_type": "llm-text", "model_alias": "writer", "prompt": "Write about {{ topic }}."},
    ],
}


def run_file(directory: Path, e2e: ModuleType, **changes: Any) -> Path:
    writer = {**e2e.server("writer", replicas=1, gpus=1), **changes.pop("writer", {})}
    client: dict[str, Any] = {"cpus": 1, "memory_gb": 1, **changes.pop("client", {})}
    if changes.pop("default_cpus", False):
        del client["cpus"]  # the default: 4, and the replica's 1 on the same node
    run = {
        "schema_version": 1,
        "name": "fit",
        "data_designer": {"inline": CONFIG},
        "records": 4,
        "sharding": {"shards": 1},
        "deployments": {"writer": writer},
        "client": client,
        "submission": {"time_limit": "00:20:00", **changes.pop("submission", {})},
    }
    assert not changes
    path = directory / "run.json"
    path.write_text(json.dumps(run), encoding="utf-8")
    return path


def tree(root: Path) -> list[tuple[str, int]]:
    """Every path under ``root`` with its modification time (ns): equal before and after means nothing written."""
    if not root.exists():
        return []
    return sorted((str(p.relative_to(root)), p.stat().st_mtime_ns) for p in [root, *root.rglob("*")])


@pytest.fixture
def cli(local_slurm: Mapping[str, str], e2e: ModuleType, tmp_path: Path) -> dict[str, str]:
    """The environment the CLI runs in: the cluster's SLURM_CONF and PATH, a fresh HOME, no profile variable."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
    (tmp_path / "home").mkdir()
    return {**env, **e2e.slurm_env(local_slurm), "HOME": str(tmp_path / "home"), "COLUMNS": "200"}


def slurm(e2e: ModuleType, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``data-designer slurm ARGS`` as a user runs it (the host's console script)."""
    command = [str(e2e.DATA_DESIGNER), "slurm", *args]
    return subprocess.run(command, env=dict(env), capture_output=True, text=True, timeout=60, check=False)


CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "default client cpus with a co-located replica": (
        {"default_cpus": True},
        "client.cpus",
        "the nodes of partition 'gpu' have at most 4 CPUs",
    ),
    "client memory of 16 GB": ({"client": {"memory_gb": 16}}, "client.memory_gb", "at most 4000 MB"),
    "3 GPUs per replica on 2-GPU nodes": (
        {"writer": {"gpus_per_replica": 3}},
        "deployments.writer.gpus_per_replica",
        "use at most 2 GPUs per replica",
    ),
    "time limit above the short partition's MaxTime": (
        {"submission": {"partition": "short", "time_limit": "01:00:00"}},
        "submission.time_limit",
        "MaxTime of partition 'short' (00:30:00)",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_execute_and_the_dry_run_check_refuse_what_the_cluster_cannot_hold(
    tmp_path: Path, local_slurm: Mapping[str, str], e2e: ModuleType, cli: dict[str, str], case: str
) -> None:
    assert local_slurm.get("DDSLURM_SHORT_PARTITION") == "short", "scripts/local-slurm up adds the short partition"
    changes, key, limit = CASES[case]
    profile = e2e.write_profile(tmp_path, local_slurm, sys.executable)
    run = run_file(tmp_path, e2e, **changes)
    workspace = tmp_path / "ws"
    before = tree(workspace)
    args = ["execute", str(run), "--profile", str(profile)]

    executed = slurm(e2e, cli, *args)
    assert executed.returncode == 2, executed.stderr
    lines = [line for line in executed.stderr.splitlines() if key in line and limit in line]
    assert len(lines) == 1, executed.stderr  # one line names the key and the limit
    assert lines[0].startswith(f"error: {run}:")
    assert tree(workspace) == before, "a refused execute writes nothing to the workspace"

    checked = slurm(e2e, cli, *args, "--dry-run", "--cluster-check")
    assert checked.returncode == 2, checked.stderr
    assert [line for line in checked.stderr.splitlines() if key in line and limit in line] == lines
    assert tree(workspace) == before


def test_a_plan_that_fits_passes_the_check_and_the_offline_dry_run_asks_nothing(
    tmp_path: Path, local_slurm: Mapping[str, str], e2e: ModuleType, cli: dict[str, str]
) -> None:
    profile = e2e.write_profile(tmp_path, local_slurm, sys.executable)
    run = run_file(tmp_path, e2e, submission={"partition": "short"})
    args = ["execute", str(run), "--profile", str(profile), "--dry-run"]
    checked = slurm(e2e, cli, *args, "--cluster-check")
    assert checked.returncode == 0, checked.stderr
    assert "fits partition 'short' as Slurm describes it" in checked.stdout
    offline = slurm(e2e, {**cli, "PATH": os.defpath, "SLURM_CONF": "/nonexistent"}, *args)
    assert offline.returncode == 0, offline.stderr  # gpus_per_node auto stays unresolved offline; nothing asked
    assert not (tmp_path / "ws").exists()
