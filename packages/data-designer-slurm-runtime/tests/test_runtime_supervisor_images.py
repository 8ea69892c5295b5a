"""At allocation start the supervisor re-checks each registered image of the plan by file identity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_designer.slurm.contracts import ClusterProfile, ExecutionPlan, ImageRecord
from data_designer.slurm.contracts.records import EXIT_CODES, STATUS_SCHEMA
from data_designer.slurm.planner import compile, load_run, resolve_config
from data_designer.slurm.runtime.images import ImageRegistry, cached_digest
from data_designer.slurm.runtime.store import RecordOk, RunLayout, modes_for, read_record
from data_designer.slurm.runtime.supervisor._environment import SetupError
from data_designer.slurm.runtime.supervisor._images import check_images, planned_images
from data_designer.slurm.runtime.testing import writer_run

RUN_ID = "im-20261129T120000Z-abcdef"


def _plan(workspace: Path, image: Path, digest: str, *, client_image: str = "cli") -> ExecutionPlan:
    profile = ClusterProfile.model_validate(
        {
            "workspace_root": str(workspace),
            "account": "acct",
            "partitions": {"gpu": "gpu", "cpu": "cpu"},
            "gpus_per_node": 2,
            "compute_python": {"interpreter": sys.executable},
            "default_time_limit": "01:00:00",
            "container_runtime": "apptainer",
        }
    )
    spec = load_run(json.dumps(writer_run("im", client={"cpus": 1, "memory_gb": 1, "image": client_image})), file="r")
    record = ImageRecord(name="cli", path=str(image), kind="squashfs", digest=digest)
    return compile(spec, profile, cluster="c", config=resolve_config(spec), images=[record])


@pytest.fixture
def registered(tmp_path: Path) -> tuple[Path, Path, str]:
    """A workspace, an image file and its sha256 as 'image add' leaves them (the digest cached by identity)."""
    workspace = tmp_path / "ws"
    (workspace / "runs" / RUN_ID).mkdir(parents=True)
    image = tmp_path / "cli.sqsh"
    image.write_bytes(b"hsqs" + bytes(range(256)) * 64)
    digests = ImageRegistry(workspace).digests_dir("cli")
    sha256 = cached_digest(image, digests, modes_for("private")).sha256
    return workspace, image, sha256


def test_an_unchanged_image_costs_one_stat_and_a_touched_one_exactly_one_re_hash(
    registered: tuple[Path, Path, str],
) -> None:
    workspace, image, sha256 = registered
    plan = _plan(workspace, image, sha256)
    assert [(i.reference, i.digest) for i in planned_images(plan)] == [("cli", sha256)]
    said: list[str] = []
    check_images(plan, workspace, say=said.append)
    assert said == [f"image 'cli' ({image}): sha256 {sha256[:12]}..., identity unchanged"]
    stat = image.stat()
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    said.clear()
    check_images(plan, workspace, say=said.append)
    check_images(plan, workspace, say=said.append)
    assert [line.rsplit(", ", 1)[1] for line in said] == ["re-hashed (its identity changed)", "identity unchanged"]


def test_changed_bytes_or_a_missing_file_fail_naming_the_image(registered: tuple[Path, Path, str]) -> None:
    workspace, image, sha256 = registered
    plan = _plan(workspace, image, sha256)
    with image.open("ab") as handle:
        handle.write(b"appended")
    with pytest.raises(SetupError) as caught:
        check_images(plan, workspace, say=lambda _: None)
    assert caught.value.status == "environment_mismatch"
    assert str(caught.value).startswith(f"image 'cli' ({image}) changed after the plan was made: its bytes hash to ")
    assert f"the plan was made with {sha256}" in str(caught.value)
    image.unlink()
    with pytest.raises(SetupError, match=r"^image 'cli': image file .* does not exist$") as missing:
        check_images(plan, workspace, say=lambda _: None)
    assert missing.value.status == "environment_mismatch"


def test_an_image_named_by_path_is_not_the_registry_s_and_is_not_checked(registered: tuple[Path, Path, str]) -> None:
    workspace, image, sha256 = registered
    plan = _plan(workspace, image, sha256, client_image=str(image))
    image.unlink()
    assert planned_images(plan) == ()
    check_images(plan, workspace, say=lambda _: pytest.fail("nothing is checked"))


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_the_supervisor_ends_the_attempt_environment_mismatch_before_anything_starts(
    registered: tuple[Path, Path, str],
) -> None:
    workspace, image, sha256 = registered
    plan = _plan(workspace, image, sha256)
    image.write_bytes(b"other bytes")
    run_dir = workspace / "runs" / RUN_ID
    (run_dir / "plan.json").write_text(plan.model_dump_json())
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(SLURM_JOB_NAME="im-abcdef-c0", SLURM_ARRAY_TASK_ID="0", SLURM_ARRAY_JOB_ID="7", SLURM_JOB_ID="8")
    argv = [sys.executable, "-m", "data_designer.slurm.runtime.supervisor", "--plan", "plan.json"]
    done = subprocess.run(argv, cwd=run_dir, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == EXIT_CODES["environment_mismatch"], done.stderr
    status = read_record(RunLayout.of(workspace, RUN_ID).status(0, 1), STATUS_SCHEMA)
    assert isinstance(status, RecordOk)
    assert status.payload.status == "environment_mismatch"
    assert status.payload.message.startswith(f"image 'cli' ({image}) changed after the plan was made")
