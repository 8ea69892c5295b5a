"""``retry`` and the probe job submit ``sbatch`` with the workspace's umask, as ``execute`` does.

Slurm creates a job's ``slurm-*.out`` with the umask ``sbatch`` ran under (``SLURM_UMASK``), so the process runner
every submitting service builds (when none is injected) must carry the workspace's: 0077 for a private workspace,
0007 for a group-shared one, whatever the caller's (0022 here). The one function that builds it
(``runtime.jobs.submitting_runner``) makes its ``SubprocessRunner`` through the module's name, so this test swaps
that name for a recorder that hands back the fake Slurm: what the services build is what the recorder saw.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts import ProbeFailedError, WorkspaceSharing
from data_designer.slurm.planner import ProfileTemplate, modes_for, render_profile
from data_designer.slurm.runtime.scheduler import CommandResult, CommandRunner, SubprocessRunner
from data_designer.slurm.runtime.testing import FakeSlurm, outcome_cycle, register_run_jobs, write_run_directory
from data_designer.slurm.services import retry_run, validate_profile

SHARINGS: tuple[WorkspaceSharing, ...] = ("private", "group")


class Recorder:
    """Stands in for every ``SubprocessRunner``'s ``run``: records the umask each ``sbatch`` would run under and
    hands the call to ``runner`` (the fake)."""

    def __init__(self, runner: CommandRunner, monkeypatch: pytest.MonkeyPatch) -> None:
        self.runner = runner
        self.umasks: list[int | None] = []
        recorder = self

        def run(self: SubprocessRunner, argv: Any, **kwargs: Any) -> CommandResult:
            if argv and argv[0] == "sbatch":
                recorder.umasks.append(self.umask)
            return recorder.runner.run(argv, **kwargs)

        monkeypatch.setattr(SubprocessRunner, "run", run)


@pytest.fixture(autouse=True)
def login_umask() -> Iterator[None]:
    previous = os.umask(0o022)  # a login shell's: neither workspace's
    try:
        yield
    finally:
        os.umask(previous)


class ComputeNode:
    """The fake, also running the probe's batch script at once (as a compute node sharing this filesystem)."""

    def __init__(self, fake: FakeSlurm) -> None:
        self.fake = fake

    def run(
        self, argv: Any, *, timeout_s: float, stdin: str | None = None, environment: object = None
    ) -> CommandResult:
        result = self.fake.run(argv, timeout_s=timeout_s, stdin=stdin)
        if argv and argv[0] == "sbatch" and result.ok and stdin is not None:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_JOB_ID": result.stdout.strip()}
            subprocess.run(["bash", "-s"], input=stdin, text=True, env=env, check=False, timeout=120)
        return result


@pytest.mark.parametrize("sharing", SHARINGS)
def test_retry_submits_with_the_workspace_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sharing: WorkspaceSharing
) -> None:
    fake = FakeSlurm(accounts=("ddtest",))
    (tmp_path / "ws").mkdir()
    pick = outcome_cycle(("succeeded", "failed_server"))
    layout = write_run_directory(tmp_path / "ws", shards=2, outcome=pick, clock=fake.clock)
    register_run_jobs(fake, layout, outcome=pick)
    if sharing == "group":
        layout.run_dir.chmod(0o2770)  # what execute makes in a group-shared workspace
    recorder = Recorder(fake, monkeypatch)

    result = retry_run(str(layout.run_dir), clock=fake.clock, environ={})

    assert [shard.shard for shard in result.shards] == [1]
    assert any(argv[0] == "sbatch" for argv in fake.calls)
    assert recorder.umasks
    assert set(recorder.umasks) == {modes_for(sharing).umask}


@pytest.mark.parametrize("sharing", SHARINGS)
def test_the_probe_job_is_submitted_with_the_workspace_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sharing: WorkspaceSharing
) -> None:
    fake = FakeSlurm(cluster_name="ddslurm")
    (tmp_path / "ws").mkdir()
    template = ProfileTemplate(
        cluster="local", workspace_root=str(tmp_path / "ws"), account="ddtest", python=sys.executable
    )
    text = render_profile(template).replace('workspace_sharing: "private"', f'workspace_sharing: "{sharing}"', 1)
    assert f'workspace_sharing: "{sharing}"' in text
    profile = tmp_path / "profile.yaml"
    profile.write_text(text, encoding="utf-8")
    recorder = Recorder(ComputeNode(fake), monkeypatch)

    # a group workspace that is not setgid fails a check; the submission is what is asserted
    with contextlib.suppress(ProbeFailedError):
        validate_profile(profile, probe=True, clock=fake.clock, sleep=fake.sleep, probe_id="20260101T000000Z-test")
    assert any(argv[0] == "sbatch" for argv in fake.calls)
    assert recorder.umasks
    assert set(recorder.umasks) == {modes_for(sharing).umask}
