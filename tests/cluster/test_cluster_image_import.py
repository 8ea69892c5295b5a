"""``image add docker://...`` on the real local Slurm cluster, each call a fresh process of the installed CLI.

The nodes have no ``enroot`` (the test's PATH has none either), so the import job must fail: ``image add`` returns
in under 5 s with the job submitted, and ``image info`` then shows ``import_failed`` from the job's scheduler
evidence (exit 127) with the log's line saying enroot is not installed, never success. Nothing was registered as a
file: no completion generation, no image file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from data_designer.slurm.contracts import ImageAdded, ImageInfo

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
ADD_LIMIT_S = 5.0
WAIT_S = 120
CLI_TIMEOUT_S = 60


def test_an_import_without_enroot_on_the_nodes_is_shown_failed_with_the_log_saying_so(
    tmp_path: Path, local_slurm: dict[str, str], e2e: ModuleType
) -> None:
    profile = e2e.write_profile(tmp_path, local_slurm, sys.executable)
    (tmp_path / "ws").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
    env.update({**e2e.slurm_env(local_slurm), "HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    assert shutil.which("enroot", path=env.get("PATH")) is None, "this test needs a PATH without enroot"

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [str(DATA_DESIGNER), "slurm", "image", *argv, "--profile", str(profile), "--json"]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)

    started = time.monotonic()
    done = cli("add", "docker://busybox:latest", "--name", "bb")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    added = ImageAdded.model_validate_json(done.stdout)
    assert took < ADD_LIMIT_S, f"image add took {took:.1f}s"
    assert added.outcome == "import_submitted"
    job = added.entry.import_job
    assert job is not None
    assert added.entry.sha256 is None

    deadline = time.monotonic() + WAIT_S
    while True:
        shown = cli("info", "bb")
        assert shown.returncode == 0, shown.stderr
        info = ImageInfo.model_validate_json(shown.stdout)
        assert info.state in ("importing", "import_failed"), info
        if info.state == "import_failed" and "(exit" in (info.detail or ""):  # sacct has the job's exit code
            break
        assert time.monotonic() < deadline, f"the import did not fail within {WAIT_S}s: {info}"
        time.sleep(1)
    assert info.detail is not None
    assert f"job {job.job_id}: Slurm says FAILED (exit 127)" in info.detail, info.detail
    assert "enroot is not installed on node" in info.detail, info.detail
    assert info.entry.generation == added.entry.generation
    assert info.entry.sha256 is None
    assert info.generations == 1, "no completion was written"
    assert added.entry.path is not None
    assert not Path(added.entry.path).exists()
    assert "enroot is not installed on node" in Path(job.log).read_text(encoding="utf-8")
