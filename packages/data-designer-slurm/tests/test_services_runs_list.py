"""``list_runs`` / ``remove_run`` and the ``runs ls`` / ``runs rm`` commands against the fake Slurm and real records."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    RunRemoved,
    RunsList,
    UnavailableError,
)
from data_designer.slurm.contracts.records import OBSERVATION_SCHEMA
from data_designer.slurm.runtime.scheduler import CommandResult
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record, run_id_factory, sequence_numbers
from data_designer.slurm.runtime.testing import (
    CountingRunner,
    FakeSlurm,
    ShardOutcome,
    outcome_cycle,
    register_run_jobs,
    write_run_directory,
)
from data_designer.slurm.services import execute_run, list_runs, remove_run, run_status

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
    """A tmp workspace and its profile; synthetic run directories written on the fake Slurm's clock."""

    def __init__(self, root: Path, fake: FakeSlurm) -> None:
        self.root = root
        self.fake = fake
        self.counting = CountingRunner(fake)
        self.workspace = root / "workspace"
        self.workspace.mkdir()
        self.profile = root / "profile.yaml"
        self.profile.write_text(PROFILE.format(workspace=self.workspace, python=sys.executable))

    def add(
        self, age: int, *, shards: int = 1, outcome: Callable[[int], ShardOutcome] | None = None, jobs: bool = False
    ) -> RunLayout:
        """A run created ``age`` seconds before the others of age 0 (each age one run), its jobs registered."""
        now = self.fake.clock() - timedelta(seconds=age)
        layout = write_run_directory(
            self.workspace, shards=shards, outcome=outcome, clock=lambda: now, job_id_start=100_000 + 10 * age
        )
        if jobs:
            register_run_jobs(self.fake, layout, outcome=outcome)
        return layout

    def ls(self, **kwargs: object) -> RunsList:
        return list_runs(profile=self.profile, runner=self.counting, clock=self.fake.clock, environ={}, **kwargs)  # type: ignore[arg-type]

    def rm(self, run: str | Path, *, force: bool = False) -> RunRemoved:
        return remove_run(
            run, force=force, profile=self.profile, runner=self.counting, clock=self.fake.clock, environ={}
        )

    def execute(self, fake: FakeSlurm | None = None) -> str:
        (self.root / "in").mkdir(exist_ok=True)
        config = self.root / "in" / "config.yaml"
        config.write_text(CONFIG)
        run_file = self.root / "in" / "run.yaml"
        run_file.write_text(RUN.format(config=config, python=sys.executable))
        slurm = fake or self.fake
        return execute_run(
            run_file,
            profile=self.profile,
            runner=slurm,
            clock=slurm.clock,
            environ={},
            id_factory=run_id_factory(slurm.clock, token=lambda: "abc123"),
        ).run_id


class RejectingSlurm(FakeSlurm):
    """A fake cluster whose sbatch refuses every job (as a site's QOS check would)."""

    def run(
        self, argv: Sequence[str], *, timeout_s: float, stdin: str | None = None, environment: object = None
    ) -> CommandResult:
        if argv and argv[0] == "sbatch":
            return CommandResult(tuple(argv), 1, "", "sbatch: error: Invalid qos specification\n", 0.01)
        return super().run(argv, timeout_s=timeout_s, stdin=stdin)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path, FakeSlurm(accounts=("ddtest",)))


def _runs_dir(ws: Workspace) -> list[str]:
    return sorted(os.listdir(ws.workspace / "runs"))


# -- runs ls -------------------------------------------------------------------------------------------------------


def test_runs_are_listed_newest_first_from_their_records_without_asking_slurm(ws: Workspace) -> None:
    oldest = ws.add(30, shards=2)
    newest = ws.add(0, shards=3, outcome=outcome_cycle(("succeeded", "partial", "failed_server")))
    middle = ws.add(10, shards=2, outcome=outcome_cycle(("succeeded", "cancelled")))
    listed = ws.ls()
    assert [r.run_id for r in listed.runs] == [str(x.run_id) for x in (newest, middle, oldest)]
    assert listed.total == 3
    assert listed.hidden == 0
    assert listed.scheduler_calls == 0
    assert ws.counting.calls == []
    first, second, third = listed.runs
    assert third.state == "succeeded"
    assert (third.records_done, third.records_total, third.counts) == (20, 20, {"succeeded": 2})
    assert first.state == "failed"
    assert first.counts == {"failed": 1, "partial": 1, "succeeded": 1}
    assert first.records_done == 15  # 10 + half of the partial shard's 10
    assert second.counts == {"cancelled": 1, "succeeded": 1}
    assert first.created_at is not None
    assert first.created_at > second.created_at > third.created_at  # type: ignore[operator]
    assert first.name == "status-bench"
    assert first.evidence == "none"  # nobody observed these runs yet


def test_the_twenty_newest_are_shown_unless_all_and_the_hidden_are_counted(ws: Workspace) -> None:
    for age in range(23):
        ws.add(age)
    default = ws.ls()
    assert len(default.runs) == 20
    assert (default.total, default.hidden) == (23, 3)
    everything = ws.ls(all=True)
    assert len(everything.runs) == 23
    assert everything.hidden == 0
    assert [r.run_id for r in everything.runs[:20]] == [r.run_id for r in default.runs]
    assert ws.counting.calls == []


def test_refresh_observes_every_run_with_one_squeue_and_one_sacct_and_records_each_part(ws: Workspace) -> None:
    runs = [ws.add(age, shards=2, outcome=outcome_cycle(("running", "succeeded")), jobs=True) for age in (0, 5, 9)]
    listed = ws.ls(refresh=True)
    assert sorted(argv[0] for argv in ws.counting.calls) == ["sacct", "squeue"]
    assert listed.scheduler_calls == 2
    assert listed.refreshed
    assert {r.state for r in listed.runs} == {"running"}
    assert {r.evidence for r in listed.runs} == {"live"}
    sacct = next(argv for argv in ws.counting.calls if argv[0] == "sacct")
    oldest = min(layout.run_id.created for layout in runs) - timedelta(minutes=10)
    assert sacct[sacct.index("-S") + 1] == oldest.strftime("%Y-%m-%dT%H:%M:%S")
    for layout in runs:
        assert sequence_numbers(layout.observations_dir) == [1]
        found = read_record(layout.observations_dir / "0001.json", OBSERVATION_SCHEMA)
        assert isinstance(found, RecordOk)
        own = json.loads((layout.submissions_dir / "0001.json").read_text())["payload"]["jobs"][0]["job_id"]
        assert found.payload.job_ids == (own,)
        assert {task.job_id for task in found.payload.observation.tasks} == {own}
        # what the run's own status sees from that record, without asking Slurm
        cached = run_status(layout.run_dir, refresh=False, runner=ws.counting, clock=ws.fake.clock)
        assert cached.counts == {"running": 1, "succeeded": 1}
    again = ws.ls()
    assert {r.evidence for r in again.runs} == {"cached"}
    assert len(ws.counting.calls) == 2


def test_refresh_with_slurm_down_falls_back_to_the_last_recorded_observations(ws: Workspace) -> None:
    ws.add(0, shards=2, outcome=outcome_cycle(("running", "succeeded")), jobs=True)
    ws.ls(refresh=True)
    ws.fake.fail("squeue")
    ws.fake.fail("sacct")
    down = ws.ls(refresh=True)
    assert down.scheduler_error is not None
    assert "squeue" in down.scheduler_error
    assert down.runs[0].evidence == "cached"
    assert down.runs[0].counts == {"succeeded": 1, "unknown": 1}


def test_broken_run_directories_are_listed_with_why_and_hidden_names_skipped(ws: Workspace) -> None:
    good = ws.add(0)
    no_record = ws.add(1)
    no_record.run_record.unlink()
    corrupt = ws.add(2)
    corrupt.run_record.write_bytes(corrupt.run_record.read_bytes().replace(b"status-bench", b"status-bunch", 1))
    no_plan = ws.add(3)
    no_plan.plan_record.unlink()
    runs = ws.workspace / "runs"
    (runs / "scratch").mkdir()
    (runs / "notes.txt").write_text("x")
    (runs / ".removing-status-bench-20260101T000000Z-000000-0a0b0c0d").mkdir()
    (runs / ".run.json.1234.tmp").write_text("x")
    listed = ws.ls(all=True)
    by_id = {r.run_id: r for r in listed.runs}
    assert set(by_id) == {str(x.run_id) for x in (good, no_record, corrupt, no_plan)} | {"scratch", "notes.txt"}
    assert by_id[str(good.run_id)].state == "succeeded"
    assert by_id[str(no_record.run_id)].state == "incomplete"
    assert "no run.json" in (by_id[str(no_record.run_id)].problem or "")
    assert by_id[str(corrupt.run_id)].state == "unreadable"
    assert "corrupt" in (by_id[str(corrupt.run_id)].problem or "")
    assert by_id[str(no_plan.run_id)].state == "unreadable"
    assert "plan" in (by_id[str(no_plan.run_id)].problem or "")
    assert by_id["scratch"].state == "unreadable"
    assert "run id" in (by_id["scratch"].problem or "")
    assert "not a directory" in (by_id["notes.txt"].problem or "")
    assert [r.run_id for r in listed.runs][-2:] == ["scratch", "notes.txt"]  # no creation time: listed last
    assert listed.total == 6


def test_an_empty_workspace_lists_nothing(ws: Workspace) -> None:
    listed = ws.ls(refresh=True)
    assert listed.runs == ()
    assert (listed.total, listed.scheduler_calls) == (0, 0)
    assert ws.counting.calls == []


# -- runs rm -------------------------------------------------------------------------------------------------------


def test_a_rejected_run_is_removed_without_asking_slurm(ws: Workspace) -> None:
    with pytest.raises(InvalidInputError, match="Invalid qos"):
        ws.execute(RejectingSlurm(accounts=("ddtest",)))
    (name,) = _runs_dir(ws)
    removed = ws.rm(name)
    assert removed.state == "not_submitted"
    assert removed.cancelled is None
    assert removed.scheduler_calls == 0
    assert ws.counting.calls == []
    assert _runs_dir(ws) == []  # no hidden leftover either


def test_an_incomplete_run_is_removed_without_asking_slurm(ws: Workspace) -> None:
    layout = ws.add(0)
    layout.run_record.unlink()
    removed = ws.rm(layout.run_dir)
    assert removed.state == "incomplete"
    assert ws.counting.calls == []
    assert _runs_dir(ws) == []


def test_a_finished_run_is_removed_after_a_live_status(ws: Workspace) -> None:
    layout = ws.add(0, shards=2, outcome=outcome_cycle(("succeeded", "failed_server")), jobs=True)
    removed = ws.rm(str(layout.run_id))
    assert removed.state == "failed"
    assert removed.scheduler_calls == 2
    assert not layout.run_dir.exists()


def test_a_run_with_live_shards_is_refused_naming_them(ws: Workspace) -> None:
    run_id = ws.execute()
    with pytest.raises(ConflictError, match=r"live shard\(s\) 0 \(pending\), 1 \(pending\)") as caught:
        ws.rm(run_id)
    assert caught.value.info.code == "run_live"
    assert "--force" in (caught.value.info.hint or "")
    assert _runs_dir(ws) == [run_id]


def test_slurm_that_cannot_be_asked_refuses_the_removal(ws: Workspace) -> None:
    run_id = ws.execute()
    ws.fake.fail("squeue")
    ws.fake.fail("sacct")
    with pytest.raises(UnavailableError, match="could not be asked"):
        ws.rm(run_id)
    finished = ws.add(0, shards=2)  # every shard succeeded by its records, but Slurm cannot say what else runs
    with pytest.raises(UnavailableError, match="could not be asked") as caught:
        ws.rm(str(finished.run_id))
    assert caught.value.exit_code == 5
    assert _runs_dir(ws) == sorted([run_id, str(finished.run_id)])


def test_an_unreadable_run_is_removed_only_with_force(ws: Workspace) -> None:
    layout = ws.add(0, jobs=True)
    layout.plan_record.write_text("{}")
    with pytest.raises(ConflictError, match="cannot be read"):
        ws.rm(str(layout.run_id))
    assert layout.run_dir.is_dir()
    removed = ws.rm(str(layout.run_id), force=True)
    assert removed.state == "unreadable"
    assert "nothing cancelled" in (removed.note or "")
    assert not layout.run_dir.exists()


def test_what_is_not_a_run_directory_is_never_removed(ws: Workspace, tmp_path: Path) -> None:
    elsewhere = tmp_path / "data" / "status-bench-20260101T000000Z-000000"
    elsewhere.mkdir(parents=True)
    with pytest.raises(InvalidInputError, match="not a run directory"):
        ws.rm(elsewhere)
    with pytest.raises(InvalidInputError):
        ws.rm(ws.workspace / "runs" / "scratch")
    with pytest.raises(NotFoundError):
        ws.rm("status-bench-20990101T000000Z-000000")
    target = ws.add(0)
    link = ws.workspace / "runs" / "status-bench-20990101T000000Z-0000ff"
    link.symlink_to(target.run_dir)
    with pytest.raises(InvalidInputError, match="symbolic link"):
        ws.rm(link.name)
    assert elsewhere.is_dir()
    assert target.run_dir.is_dir()
    assert ws.counting.calls == []


# -- the CLI -------------------------------------------------------------------------------------------------------


def test_cli_runs_ls_and_rm(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    import data_designer.slurm.services.context._context as runs_module

    fake = ws.fake
    monkeypatch.setattr(runs_module, "SubprocessRunner", lambda env=None: fake)
    done = ws.add(0, shards=2)
    for age in range(1, 22):
        ws.add(age)
    cli = CliRunner()
    table = cli.invoke(app, ["runs", "ls", "--profile", str(ws.profile)])
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["RUN", "CREATED", "STATE", "RECORDS", "SHARDS"]
    assert lines[1].startswith(str(done.run_id))
    assert "20/20" in lines[1]
    assert "2 succeeded" in lines[1]
    assert len(lines) == 22
    assert "2 older hidden (--all shows them)" in lines[-1]
    every = cli.invoke(app, ["runs", "ls", "--all", "--refresh", "--json", "--profile", str(ws.profile)])
    assert every.exit_code == 0, every.output
    listed = RunsList.model_validate_json(every.stdout)
    assert (len(listed.runs), listed.hidden, listed.refreshed) == (22, 0, True)
    removed = cli.invoke(app, ["runs", "rm", str(done.run_id), "--json", "--profile", str(ws.profile)])
    assert removed.exit_code == 0, removed.output
    assert RunRemoved.model_validate_json(removed.stdout).run_id == str(done.run_id)
    assert not done.run_dir.exists()
    missing = cli.invoke(app, ["runs", "rm", str(done.run_id), "--profile", str(ws.profile)])
    assert missing.exit_code == 3
    assert missing.stderr.count("\n") == 1
    live = ws.execute()
    refused = cli.invoke(app, ["runs", "rm", live, "--json", "--profile", str(ws.profile)])
    assert refused.exit_code == 4
    assert json.loads(refused.stderr)["code"] == "run_live"
    empty_profile = ws.root / "empty.yaml"
    empty_profile.write_text(PROFILE.format(workspace=ws.root / "nothing-here", python=sys.executable))
    empty = cli.invoke(app, ["runs", "ls", "--profile", str(empty_profile)])
    assert empty.exit_code == 0
    assert "no runs in" in empty.stdout


def test_created_at_is_the_run_records(ws: Workspace) -> None:
    layout = ws.add(0)
    (summary,) = ws.ls().runs
    assert summary.created_at is not None
    assert datetime.fromisoformat(summary.created_at.replace("Z", "+00:00")) == layout.run_id.created


def test_force_cancels_the_live_shards_then_removes_the_run(ws: Workspace) -> None:
    run_id = ws.execute()
    ws.fake.advance(1.5)  # every task running
    job = json.loads((ws.workspace / "runs" / run_id / "submissions" / "0001.json").read_text())["payload"]["jobs"]
    removed = remove_run(
        run_id,
        force=True,
        profile=ws.profile,
        runner=ws.counting,
        clock=ws.fake.clock,
        environ={},
        sleep=ws.fake.advance,
    )
    assert removed.forced
    assert removed.state == "running"
    assert removed.live_shards == (0, 1, 2, 3)
    assert removed.cancelled is not None
    assert removed.cancelled.confirmed
    assert removed.cancelled.shards == (0, 1, 2, 3)
    assert ws.counting.count("scancel") == 1
    states = {task.state for task in ws.fake.jobs[int(job[0]["job_id"])].tasks.values()}
    assert {state.split()[0] for state in states} == {"CANCELLED"}
    assert _runs_dir(ws) == []


def test_a_long_listing_read_by_worker_processes_equals_the_serial_one(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import data_designer.slurm.services.runs._listing as runs_list

    for age in range(9):
        ws.add(age, shards=1 + age % 3, outcome=outcome_cycle(("succeeded", "partial", "cancelled", "failed_server")))
    (ws.workspace / "runs" / "not-a-run").mkdir()
    serial = ws.ls(all=True)
    monkeypatch.setattr(runs_list, "PARALLEL_FROM", 4)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    forked = ws.ls(all=True)
    assert forked == serial
    assert [r.state for r in forked.runs][-1] == "unreadable"
    assert ws.counting.calls == []
