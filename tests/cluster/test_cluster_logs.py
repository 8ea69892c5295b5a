"""``data-designer slurm logs`` on the real local Slurm cluster: a shard whose compute Python lacks the runtime.

The profile's interpreter is a bare venv (no ``data_designer``), so the batch script's preflight import ends the
task with exit 6 before any attempt directory exists; the only trace is Slurm's own ``slurm-<job>_<task>.err``.
Fresh ``logs`` processes (the installed console script) must show that file's import error, by default and with
``--shard 0``, and ``--follow`` must stop by itself once Slurm shows the task ended (no status.json ever appears).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from data_designer.slurm.contracts import RunLogs

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
IMPORT_ERROR = "ModuleNotFoundError: No module named 'data_designer'"
CLI_TIMEOUT_S = 120


def test_logs_of_a_shard_without_the_runtime_show_the_import_error_of_the_batch_stderr(
    tmp_path: Path, local_slurm: dict[str, str], e2e: ModuleType
) -> None:
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    run = e2e.execute_and_wait(tmp_path, local_slurm, e2e.run_document(shards=1, records=4), str(bare / "bin/python"))
    assert not run.layout.attempts_dir(0).exists(), run.diagnosis()
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
    env.update({**e2e.slurm_env(local_slurm), "HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    base = [str(DATA_DESIGNER), "slurm", "logs", run.result.run_id, "--profile", str(tmp_path / "profile.yaml")]

    def logs(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *flags], env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False
        )

    shard = logs("--shard", "0")
    assert shard.returncode == 0, shard.stderr
    job = run.result.jobs[0]
    err = run.layout.batch_log(job.job_name, 0, "err")
    assert f"==> shard 0, no attempt, batch (job {job.job_id}_0): {err} <==" in shard.stdout
    assert IMPORT_ERROR in shard.stdout, shard.stdout

    default = logs("--json")
    assert default.returncode == 0, default.stderr
    result = RunLogs.model_validate_json(default.stdout)
    assert (result.selection, result.shards, result.succeeded_skipped) == ("not_succeeded", (0,), 0)
    [batch] = [f for f in result.files if f.path == str(err)]
    assert (batch.step, batch.attempt, batch.job_id) == ("batch", None, job.job_id)
    assert any(IMPORT_ERROR in line for line in batch.lines), batch.lines

    started = time.monotonic()
    follow = logs("--shard", "0", "--follow", "--step", "batch")
    took = time.monotonic() - started
    assert follow.returncode == 0, follow.stderr
    assert IMPORT_ERROR in follow.stdout
    assert follow.stdout.rstrip().endswith("logs: the followed attempts ended (shards 0; 0 new lines)"), follow.stdout
    print(f"--follow stopped {took:.1f}s after it started (grace 10 s after Slurm showed the task ended)")
