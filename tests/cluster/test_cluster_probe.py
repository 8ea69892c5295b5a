"""``profile validate --probe`` against the real local Slurm cluster (scripts/local-slurm).

The cluster has account ddtest (root's), account ddother (root is not a member), partitions gpu
and cpu over the same nodes with 2 GPUs each; jobs run on this machine, so a workspace under /tmp
is shared and this venv's Python is the compute Python.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts import (
    PROBE_CHECK_NAMES,
    ErrorInfo,
    ProbeFailedError,
    ProbeReport,
    ProfileValidation,
    UnavailableError,
)
from data_designer.slurm.planner import ProfileTemplate, render_profile
from data_designer.slurm.runtime.scheduler import SubprocessRunner
from data_designer.slurm.services import validate_profile

pytestmark = pytest.mark.cluster

DATA_DESIGNER = Path(sys.executable).parent / "data-designer"


def slurm_env(local_slurm: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in local_slurm.items() if k in ("SLURM_CONF", "PATH")}


def write_profile(tmp_path: Path, local_slurm: Mapping[str, str], **overrides: Any) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    fields: dict[str, Any] = {
        "cluster": "local",
        "workspace_root": str(workspace),
        "account": local_slurm["DDSLURM_ACCOUNT"],
        "gpu_partition": local_slurm["DDSLURM_GPU_PARTITION"],
        "cpu_partition": local_slurm["DDSLURM_CPU_PARTITION"],
        "python": sys.executable,
    }
    fields.update(overrides)
    path = tmp_path / "profile.yaml"
    path.write_text(render_profile(ProfileTemplate(**fields)), encoding="utf-8")
    return path


def cli(tmp_path: Path, local_slurm: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    assert DATA_DESIGNER.is_file(), f"the host console script {DATA_DESIGNER} is missing: run 'uv sync'"
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
    env.update({**slurm_env(local_slurm), "HOME": str(home), "COLUMNS": "200"})
    return subprocess.run(
        [str(DATA_DESIGNER), "slurm", "profile", "validate", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def failed_probe(path: Path, local_slurm: Mapping[str, str], **kwargs: Any) -> ProbeReport:
    runner = SubprocessRunner(overrides=slurm_env(local_slurm))
    with pytest.raises(ProbeFailedError) as caught:
        validate_profile(path, probe=True, runner=runner, **kwargs)
    assert caught.value.exit_code == 6
    return caught.value.report


def test_the_local_cluster_profile_passes_every_check(tmp_path: Path, local_slurm: dict[str, str]) -> None:
    path = write_profile(tmp_path, local_slurm)
    started = time.monotonic()
    result = cli(tmp_path, local_slurm, "--profile", str(path), "--probe", "--json")
    elapsed = time.monotonic() - started

    assert result.returncode == 0, result.stderr
    report = ProfileValidation.model_validate_json(result.stdout).probe
    assert report is not None
    assert [(c.name, c.status) for c in report.checks] == [(name, "ok") for name in PROBE_CHECK_NAMES]
    assert report.slurm_cluster == local_slurm["DDSLURM_CLUSTER"]
    assert report.gpus_per_node_resolved == int(local_slurm["DDSLURM_GPUS_PER_NODE"])
    assert report.job_id is not None
    assert report.check("compute_runtime").detail.endswith(report.expected_runtime_version)
    assert not any((tmp_path / "ws" / ".probe").iterdir()), "a passing probe leaves nothing behind"
    print(f"probe of the local cluster: {report.duration_s:.2f}s in the service, {elapsed:.2f}s through the CLI")
    for check in report.checks:
        print(f"  {check.name:<16} {check.duration_s:6.3f}s  {check.detail}")


def test_the_human_output_is_the_profile_table_and_the_checks(tmp_path: Path, local_slurm: dict[str, str]) -> None:
    result = cli(
        tmp_path, local_slurm, "--profile", str(write_profile(tmp_path, local_slurm, gpus_per_node=2)), "--probe"
    )

    assert result.returncode == 0, result.stderr
    assert ": all 10 checks ok; GPUs per node: 2" in result.stdout
    assert "matches the profile" in result.stdout


@pytest.mark.parametrize("role", ["gpu", "cpu"])
def test_a_wrong_partition_names_the_failing_check(tmp_path: Path, local_slurm: dict[str, str], role: str) -> None:
    path = write_profile(tmp_path, local_slurm, **{f"{role}_partition": "nosuchpart"})
    result = cli(tmp_path, local_slurm, "--profile", str(path), "--probe")

    assert result.returncode == 6, result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: clusters.local.partitions.{role}: probe check '{role}_partition' failed: ")
    assert "partition 'nosuchpart' does not exist" in first


@pytest.mark.parametrize("account", ["nosuchaccount", "other"])
def test_an_account_the_user_may_not_use_fails_naming_it(
    tmp_path: Path, local_slurm: dict[str, str], account: str
) -> None:
    name = local_slurm["DDSLURM_OTHER_ACCOUNT"] if account == "other" else account
    result = cli(
        tmp_path, local_slurm, "--profile", str(write_profile(tmp_path, local_slurm, account=name)), "--probe", "--json"
    )

    assert result.returncode == 6
    assert result.stdout == ""
    info = ErrorInfo.model_validate_json(result.stderr)
    assert info.problems[0].code == "probe_account_failed"
    assert info.problems[0].key_path == ("clusters", "local", "account")
    assert f"may not use account {name!r}" in info.problems[0].message
    assert [p.code for p in info.problems[1:]] == [
        "probe_probe_job_not_run",
        "probe_shared_workspace_not_run",
        "probe_compute_runtime_not_run",
    ]


@pytest.mark.parametrize("kind", ["regular_file", "unwritable"])
def test_an_unusable_workspace_fails_the_workspace_check(
    tmp_path: Path, local_slurm: dict[str, str], kind: str
) -> None:
    if kind == "regular_file":
        root = tmp_path / "a-file"
        root.write_text("not a directory\n", encoding="utf-8")
    else:
        root = Path("/proc")  # nobody, root included, can create a directory there
    report = failed_probe(write_profile(tmp_path, local_slurm, workspace_root=str(root)), local_slurm)

    assert [c.name for c in report.not_ok()] == ["workspace", "probe_job", "shared_workspace", "compute_runtime"]
    assert report.check("workspace").status == "failed"
    assert report.check("workspace").key_path == ("clusters", "local", "workspace_root")


def test_a_gpu_count_that_differs_from_gres_fails(tmp_path: Path, local_slurm: dict[str, str]) -> None:
    report = failed_probe(write_profile(tmp_path, local_slurm, gpus_per_node=3), local_slurm)

    assert [c.name for c in report.not_ok()] == ["gpus_per_node"]
    assert report.check("gpus_per_node").detail.endswith(f"says {local_slurm['DDSLURM_GPUS_PER_NODE']}")


def test_a_compute_python_without_the_runtime_fails(tmp_path: Path, local_slurm: dict[str, str]) -> None:
    bare = tmp_path / "bare-python"
    bare.write_text("#!/bin/sh\necho 'No module named data_designer' >&2\nexit 1\n", encoding="utf-8")
    bare.chmod(0o755)
    report = failed_probe(write_profile(tmp_path, local_slurm, python=str(bare)), local_slurm)

    assert [c.name for c in report.not_ok()] == ["compute_runtime"]
    assert (
        report.check("compute_runtime").detail == f"{bare} exited 1 on the compute node: No module named data_designer"
    )
    assert report.probe_dir is not None
    assert Path(report.probe_dir).is_dir(), "a failed job probe keeps its evidence"


def test_a_job_that_cannot_start_in_time_is_cancelled(tmp_path: Path, local_slurm: dict[str, str]) -> None:
    path = write_profile(tmp_path, local_slurm)
    text = path.read_text(encoding="utf-8").replace("sbatch_options: []", 'sbatch_options: ["--begin=now+1hour"]')
    path.write_text(text, encoding="utf-8")
    report = failed_probe(path, local_slurm, probe_timeout_s=4)

    check = report.check("probe_job")
    assert check.detail.startswith(f"job {report.job_id} did not finish within 4s (still pending (BeginTime)); ")
    assert check.detail.endswith("it was cancelled")
    runner = SubprocessRunner(overrides=slurm_env(local_slurm))
    state = runner.run(["squeue", "--noheader", "-t", "all", "-j", str(report.job_id), "-o", "%T"], timeout_s=30)
    assert state.stdout.split() in ([], ["CANCELLED"]), state


def test_slurm_off_path_exits_5(tmp_path: Path, local_slurm: dict[str, str]) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    with pytest.raises(UnavailableError) as caught:
        validate_profile(
            write_profile(tmp_path, local_slurm),
            probe=True,
            runner=SubprocessRunner(overrides={**slurm_env(local_slurm), "PATH": str(empty)}),
        )
    assert caught.value.exit_code == 5
    assert json.loads(caught.value.info.model_dump_json())["code"] == "slurm_unreachable"
