"""``remove_run`` / ``runs rm`` (issue 28): a run without a submission record is looked up in Slurm by job name before
it is removed, attempt evidence is never ``not_submitted``, and only runs of the selected workspace are removed."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import ConflictError, InvalidInputError, RunRemoved, UnavailableError
from data_designer.slurm.runtime.store import RunLayout, run_id_factory
from data_designer.slurm.runtime.testing import (
    CountingRunner,
    FakeSlurm,
    ShardOutcome,
    outcome_cycle,
    register_run_jobs,
    write_run_directory,
)
from data_designer.slurm.services import cancel_run, execute_run, list_runs, remove_run, run_status

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

CONFIG = """\
model_configs:
  - {alias: writer, model: test-model, provider: local}
columns:
  - {name: topic, column_type: sampler, sampler_type: category, params: {values: [a, b]}}
  - {name: text, column_type: llm-text, model_alias: writer, prompt: "Write about {{ topic }}."}
"""

RUN = """\
schema_version: 1
name: reviews
data_designer: {{config: {config}}}
records: 40
sharding: {{shards: 4}}
deployments:
  writer:
    engine: command
    argv: [{python}, -m, data_designer.slurm.runtime.testing.test_server, --host, "{{host}}", --port, "{{port}}",
           --model, "{{model}}", --replica-id, r]
    model: test-model
    gpus_per_replica: 1
client: {{cpus: 1, memory_gb: 1}}
"""


class Workspace:
    """A tmp workspace, its profile and a fake Slurm whose calls are counted."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fake = FakeSlurm(accounts=("ddtest",))
        self.counting = CountingRunner(self.fake)
        self.workspace = root / "workspace"
        self.workspace.mkdir()
        self.profile = root / "profile.yaml"
        self.profile.write_text(PROFILE.format(workspace=self.workspace, python=sys.executable))

    def rm(self, run: str | Path, *, force: bool = False) -> RunRemoved:
        return remove_run(
            run,
            force=force,
            profile=self.profile,
            runner=self.counting,
            clock=self.fake.clock,
            environ={},
            sleep=self.fake.advance,
        )

    def execute_losing_the_reply(self) -> str:
        """``execute`` whose ``sbatch`` was accepted but whose reply never came: no submission record is written."""
        (self.root / "in").mkdir(exist_ok=True)
        config = self.root / "in" / "config.yaml"
        config.write_text(CONFIG)
        run_file = self.root / "in" / "run.yaml"
        run_file.write_text(RUN.format(config=config, python=sys.executable))
        self.fake.lose_sbatch_replies(1)
        with pytest.raises(UnavailableError):
            execute_run(
                run_file,
                profile=self.profile,
                runner=self.fake,
                clock=self.fake.clock,
                environ={},
                id_factory=run_id_factory(self.fake.clock, token=lambda: "abc123"),
            )
        (name,) = sorted(p.name for p in (self.workspace / "runs").iterdir())
        assert not list((self.workspace / "runs" / name).glob("submissions/*.json"))
        return name

    def unrecorded(self, outcome: Callable[[int], ShardOutcome] | None = None, *, shards: int = 2) -> RunLayout:
        """A run whose allocations wrote their attempt records (Slurm holds its jobs) but whose submission record
        is gone: what an ``execute`` that died between ``sbatch`` and recording leaves."""
        now = self.fake.clock() - timedelta(seconds=1)
        layout = write_run_directory(self.workspace, shards=shards, outcome=outcome, clock=lambda: now)
        register_run_jobs(self.fake, layout, outcome=outcome)
        shutil.rmtree(layout.run_dir / "submissions")
        return layout


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)


# -- a run without a submission record is looked up by job name ---------------------------------------------------


def test_a_run_whose_sbatch_reply_was_lost_is_refused_naming_its_live_jobs(ws: Workspace) -> None:
    run_id = ws.execute_losing_the_reply()
    (job_id,) = ws.fake.jobs  # Slurm accepted the job; the run records none
    with pytest.raises(ConflictError) as caught:
        ws.rm(run_id)
    error = caught.value
    assert error.exit_code == 4
    assert error.info.code == "run_live"
    assert str(job_id) in error.info.message
    assert (
        f"no submission record, but Slurm still holds its job(s) {job_id} (named dd-{run_id}-c*;" in error.info.message
    )
    assert "--force" in (error.info.hint or "")
    assert f"data-designer slurm cancel {run_id}" in (error.info.hint or "")
    assert (ws.workspace / "runs" / run_id).is_dir()
    assert ws.counting.count("scancel") == 0


def test_force_cancels_the_jobs_found_by_name_then_removes_the_run(ws: Workspace) -> None:
    run_id = ws.execute_losing_the_reply()
    (job_id,) = ws.fake.jobs
    ws.fake.advance(1.5)  # every task running
    removed = ws.rm(run_id, force=True)
    assert removed.forced
    assert removed.state == "running"  # what Slurm showed, not the records' not_submitted
    assert f"job(s) {job_id} found by job name" in (removed.note or "")
    assert removed.live_shards == (0, 1, 2, 3)
    assert removed.cancelled is not None
    assert removed.cancelled.confirmed
    assert removed.cancelled.targets == (str(job_id),)
    assert ws.counting.count("scancel") == 1
    states = {task.state.split()[0] for task in ws.fake.jobs[job_id].tasks.values()}
    assert states == {"CANCELLED"}
    assert not (ws.workspace / "runs" / run_id).exists()


def test_cancel_as_the_refusal_suggests_finds_the_jobs_by_name_too(ws: Workspace) -> None:
    run_id = ws.execute_losing_the_reply()
    (job_id,) = ws.fake.jobs
    result = cancel_run(
        run_id, profile=ws.profile, runner=ws.counting, clock=ws.fake.clock, environ={}, sleep=ws.fake.advance
    )
    assert (result.confirmed, result.targets) == (True, (str(job_id),))
    assert {task.state.split()[0] for task in ws.fake.jobs[job_id].tasks.values()} == {"CANCELLED"}
    removed = ws.rm(run_id)  # nothing of it queued or running any more
    assert removed.live_shards == ()
    assert not (ws.workspace / "runs" / run_id).exists()


def test_a_run_without_a_submission_record_that_slurm_does_not_hold_is_removed_after_the_lookup(
    ws: Workspace,
) -> None:
    layout = write_run_directory(ws.workspace, shards=2, outcome=outcome_cycle(("pending",)), clock=ws.fake.clock)
    shutil.rmtree(layout.run_dir / "submissions")  # execute stopped before sbatch: no job exists
    removed = ws.rm(str(layout.run_id))
    assert removed.state == "not_submitted"
    assert removed.cancelled is None
    assert removed.scheduler_calls == 2  # one squeue, one sacct by job name
    assert sorted(argv[0] for argv in ws.counting.calls) == ["sacct", "squeue"]
    assert not layout.run_dir.exists()


def test_slurm_that_cannot_be_asked_by_name_refuses_even_with_force(ws: Workspace) -> None:
    run_id = ws.execute_losing_the_reply()
    ws.fake.fail("squeue")
    for force in (False, True):
        with pytest.raises(UnavailableError) as caught:
            ws.rm(run_id, force=force)
        assert caught.value.exit_code == 5
    assert (ws.workspace / "runs" / run_id).is_dir()


# -- attempt evidence wins over "not submitted" --------------------------------------------------------------------


def test_attempt_evidence_without_a_submission_record_is_never_not_submitted(ws: Workspace) -> None:
    layout = ws.unrecorded(outcome_cycle(("running", "failed_server")))
    status = run_status(layout.run_dir, runner=ws.counting, clock=ws.fake.clock, environ={})
    running, failed = status.shards
    assert (running.state, running.reason) == ("unknown", "submission_record_missing")
    assert f"execute RUN_FILE --run-id {layout.run_id}" in (running.message or "")
    assert (failed.state, failed.reason) == ("failed", "server_failed_to_start")  # its own ending
    assert status.state == "unknown"
    (listed,) = list_runs(profile=ws.profile, runner=ws.counting, clock=ws.fake.clock, environ={}).runs
    assert listed.state == "unknown"
    with pytest.raises(ConflictError, match="no submission record") as caught:
        ws.rm(str(layout.run_id))
    assert "1000" in caught.value.info.message  # the job register_run_jobs gave Slurm (job_id_start + chunk 0)
    assert layout.run_dir.is_dir()


def test_a_shard_with_no_attempt_and_no_submission_record_stays_not_submitted(ws: Workspace) -> None:
    layout = write_run_directory(ws.workspace, shards=1, outcome=outcome_cycle(("pending",)), clock=ws.fake.clock)
    shutil.rmtree(layout.run_dir / "submissions")
    status = run_status(layout.run_dir, refresh=False, runner=ws.counting, clock=ws.fake.clock, environ={})
    assert (status.state, status.shards[0].reason) == ("not_submitted", "not_submitted")


# -- only runs of the selected workspace ---------------------------------------------------------------------------


def test_a_run_directory_outside_the_workspace_is_never_removed(ws: Workspace) -> None:
    elsewhere = write_run_directory(ws.root / "elsewhere", shards=1, clock=ws.fake.clock)  # <dir>/runs/<id>, real
    with pytest.raises(InvalidInputError) as caught:
        ws.rm(elsewhere.run_dir)
    error = caught.value
    assert error.exit_code == 2
    assert str(elsewhere.run_dir) in error.info.message
    assert str(ws.workspace) in error.info.message
    assert "--profile" in (error.info.hint or "")
    dotted = ws.workspace / "runs" / ".." / ".." / "elsewhere" / "runs" / str(elsewhere.run_id)
    with pytest.raises(InvalidInputError, match="not a run of the workspace"):
        ws.rm(dotted)
    assert elsewhere.run_dir.is_dir()
    assert ws.counting.calls == []


def test_a_run_of_the_workspace_reached_through_a_linked_path_is_removed(ws: Workspace) -> None:
    layout = write_run_directory(ws.workspace, shards=1, clock=ws.fake.clock)
    register_run_jobs(ws.fake, layout)
    alias = ws.root / "alias"
    alias.symlink_to(ws.workspace)
    removed = ws.rm(alias / "runs" / str(layout.run_id))
    assert removed.state == "succeeded"
    assert not layout.run_dir.exists()


def test_cli_runs_rm_exit_codes(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    import data_designer.slurm.services.context._context as context_module

    fake = ws.fake
    monkeypatch.setattr(context_module, "SubprocessRunner", lambda env=None: fake)
    cli = CliRunner()
    elsewhere = write_run_directory(ws.root / "elsewhere", shards=1, clock=ws.fake.clock)
    outside = cli.invoke(app, ["runs", "rm", str(elsewhere.run_dir), "--profile", str(ws.profile)])
    assert outside.exit_code == 2, outside.output
    assert "not a run of the workspace" in outside.stderr
    run_id = ws.execute_losing_the_reply()
    live = cli.invoke(app, ["runs", "rm", run_id, "--profile", str(ws.profile)])
    assert live.exit_code == 4, live.output
    assert "--force" in live.stderr
    help_text = cli.invoke(app, ["runs", "rm", "--help"])
    assert "looked up in Slurm by job name" in " ".join(help_text.stdout.split())
