"""``logs``, ``status`` and ``runs ls`` against run directories holding links and FIFOs where logs and records belong.

The file-reading rule (``docs/architecture/run-directory.md``): a symbolic link is never followed out of the run
(no secret printed), a FIFO never blocks a reader (a whole workspace's ``runs ls`` must not hang on one run), and
what was refused is said, not silently shown as empty.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from data_designer.slurm.runtime.store import RunLayout
from data_designer.slurm.runtime.testing import outcome_cycle, write_run_directory
from data_designer.slurm.services import list_runs, run_logs, run_status

T = TypeVar("T")
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECRET = "SECRET-CANARY-91c2"
PROFILE = """\
schema_version: 1
default_cluster: local
clusters:
  local:
    workspace_root: {workspace}
    account: ddtest
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: 2
    compute_python: {{interpreter: {python}}}
    default_time_limit: "00:30:00"
"""


def finishes(call: Callable[[], T], seconds: float = 30.0) -> T:
    box: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box.append(call())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the reader blocked"
    if errors:
        raise errors[0]
    return box[0]


def failed_run(tmp_path: Path) -> RunLayout:
    return write_run_directory(tmp_path / "ws", shards=2, outcome=outcome_cycle(("failed_server",)), clock=lambda: NOW)


def test_logs_never_print_what_a_symlinked_log_points_at(tmp_path: Path) -> None:
    layout = failed_run(tmp_path)
    secret = tmp_path / "id_rsa"
    secret.write_text(f"{SECRET}\n")
    log = layout.logs_dir(0, 1) / "supervisor.log"
    assert log.exists()
    log.unlink()
    log.symlink_to(secret)
    result = run_logs(layout.run_dir)
    assert SECRET not in repr(result)
    assert all(Path(f.path) != log for f in result.files)
    assert any("supervisor.log not read: it is a symbolic link, not a regular file" in n for n in result.notes)


def test_logs_status_and_runs_ls_do_not_hang_on_fifos(tmp_path: Path) -> None:
    layout = failed_run(tmp_path)
    for shard in (0, 1):
        logs = layout.logs_dir(shard, 1)
        for name in os.listdir(logs):
            (logs / name).unlink()
            os.mkfifo(logs / name)
    for name in os.listdir(layout.run_dir):
        if name.startswith("slurm-") and name.endswith(".err"):
            (layout.run_dir / name).unlink()
            os.mkfifo(layout.run_dir / name)
    shown = finishes(lambda: run_logs(layout.run_dir))
    assert any("FIFO, not a regular file" in note for note in shown.notes)
    status = finishes(lambda: run_status(layout.run_dir, refresh=False, clock=lambda: NOW))
    assert len(status.shards) == 2
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE.format(workspace=tmp_path / "ws", python=sys.executable))
    listed = finishes(lambda: list_runs(profile=profile, environ={}, clock=lambda: NOW))
    assert [run.run_id for run in listed.runs] == [str(layout.run_id)]
