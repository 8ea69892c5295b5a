"""``run_status`` / ``wait_run`` and the ``status`` / ``wait`` commands against the fake Slurm and real records."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import InvalidInputError, NotFoundError, RunStatus, UnavailableError
from data_designer.slurm.contracts.records import (
    CLAIM_SCHEMA,
    OBSERVATION_SCHEMA,
    STATUS_SCHEMA,
    ClaimOwner,
    StatusRecord,
)
from data_designer.slurm.runtime.scheduler import CommandResult
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record, run_id_factory, write_record_once
from data_designer.slurm.runtime.testing import FakeSlurm
from data_designer.slurm.services import execute_run, is_unavailable, run_status, wait_run

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


class Env:
    """A tmp workspace, profile and run file; a fake Slurm whose virtual clock every service uses."""

    def __init__(self, root: Path, fake: FakeSlurm) -> None:
        self.fake = fake
        self.workspace = root / "workspace"
        (root / "in").mkdir(parents=True)
        config = root / "in" / "config.yaml"
        config.write_text(CONFIG)
        self.run_file = root / "in" / "run.yaml"
        self.run_file.write_text(RUN.format(config=config, python=sys.executable))
        self.profile = root / "profile.yaml"
        self.profile.write_text(PROFILE.format(workspace=self.workspace, python=sys.executable))
        self.run_id = ""

    def execute(self) -> str:
        result = execute_run(
            self.run_file,
            profile=self.profile,
            runner=self.fake,
            clock=self.fake.clock,
            environ={},
            id_factory=run_id_factory(self.fake.clock, token=lambda: "abc123"),
        )
        self.run_id = result.run_id
        return result.run_id

    @property
    def layout(self) -> RunLayout:
        return RunLayout.of(self.workspace, self.run_id)

    def status(self, **kwargs: object) -> RunStatus:
        return run_status(self.run_id, profile=self.profile, runner=self.fake, clock=self.fake.clock, **kwargs)  # type: ignore[arg-type]

    def job(self) -> str:
        record = json.loads(next(self.layout.submissions_dir.glob("*.json")).read_text())
        return str(record["payload"]["jobs"][0]["job_id"])

    def end_attempt(self, shard: int, status: str, *, exit_code: int, message: str) -> None:
        """The records a supervisor leaves for an attempt of ``shard`` that ended without a result."""
        now = self.fake.clock()
        owner = ClaimOwner(host="n1", pid=1, job_id=self.job(), array_task=shard, attempt=1, time=now)
        write_record_once(self.layout.claim(shard, 1), CLAIM_SCHEMA, owner)
        record = StatusRecord(
            status=status,  # type: ignore[arg-type]
            exit_code=exit_code,
            message=message,
            log_tail=("line one", f"{message} (last line)"),
            started_at=now,
            finished_at=now,
        )
        write_record_once(self.layout.status(shard, 1), STATUS_SCHEMA, record)


class RejectingSlurm(FakeSlurm):
    """A fake cluster whose sbatch refuses every job (as a site's QOS check would)."""

    def run(
        self, argv: Sequence[str], *, timeout_s: float, stdin: str | None = None, environment: object = None
    ) -> CommandResult:
        if argv and argv[0] == "sbatch":
            return CommandResult(
                argv=tuple(argv),
                returncode=1,
                stdout="",
                stderr="sbatch: error: Batch job submission failed: Invalid qos specification\n",
                duration_s=0.01,
            )
        return super().run(argv, timeout_s=timeout_s, stdin=stdin)


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path, FakeSlurm(accounts=("ddtest",)))


def test_right_after_execute_every_shard_is_pending_from_two_calls_and_the_observation_is_appended(env: Env) -> None:
    env.execute()
    before = len(env.fake.calls)
    status = env.status()
    assert status.state == "pending"
    assert status.counts == {"pending": 4}
    assert status.records_done == 0
    assert status.records_total == 40
    assert status.scheduler_calls == 2
    assert status.evidence == "live"
    calls = [argv[0] for argv in env.fake.calls[before:]]
    assert sorted(calls) == ["sacct", "squeue"]
    sacct = next(argv for argv in env.fake.calls[before:] if argv[0] == "sacct")
    assert "-D" in sacct
    assert "-S" in sacct
    observation = read_record(env.layout.observations_dir / "0001.json", OBSERVATION_SCHEMA)
    assert isinstance(observation, RecordOk)
    assert observation.payload.job_ids == (env.job(),)


def test_an_unchanged_observation_is_recorded_again_only_after_ten_minutes(env: Env) -> None:
    env.execute()
    env.status()
    env.fake.advance(0.5)  # still pending: Slurm says the same
    env.status()
    assert sorted(p.name for p in env.layout.observations_dir.iterdir()) == ["0001.json"]
    env.fake.advance(1)  # the tasks started: a change is recorded at once
    env.status()
    assert len(list(env.layout.observations_dir.iterdir())) == 2
    env.fake.advance(601)  # same evidence, but ten minutes later: recorded again
    env.status()
    assert len(list(env.layout.observations_dir.iterdir())) == 3


def test_no_refresh_asks_nothing_and_classifies_with_the_last_observation(env: Env) -> None:
    env.execute()
    env.status()
    before = len(env.fake.calls)
    status = env.status(refresh=False)
    assert len(env.fake.calls) == before
    assert status.scheduler_calls == 0
    assert status.evidence == "cached"
    assert status.counts == {"pending": 4}  # nobody asked: the last answer stands, with its age
    assert not is_unavailable(status)


def test_a_terminal_task_without_status_record_is_stopping_within_the_grace_then_inconsistent(env: Env) -> None:
    env.execute()
    env.fake.advance(4)  # every task ran its 2 s and COMPLETED, but nothing wrote a record
    early = env.status()
    assert early.counts == {"running": 4}
    assert {shard.phase for shard in early.shards} == {"stopping"}
    env.fake.advance(61)
    late = env.status()
    assert late.counts == {"scheduler_inconsistent": 4}
    assert late.state == "attention"
    assert "no status.json" in (late.shards[0].message or "")


def test_failed_and_cancelled_endings_come_from_status_records_with_their_last_log_line(env: Env) -> None:
    env.execute()
    env.fake.advance(4)
    env.end_attempt(0, "server_failed_to_start", exit_code=10, message="server writer-0 exited 1 before ready")
    env.end_attempt(1, "cancelled", exit_code=12, message="cancelled by scancel")
    status = env.status()
    by_shard = {shard.shard: shard for shard in status.shards}
    assert by_shard[0].state == "failed"
    assert by_shard[0].reason == "server_failed_to_start"
    assert by_shard[0].last_log_line == "server writer-0 exited 1 before ready (last line)"
    assert by_shard[1].state == "cancelled"
    assert status.counts == {"cancelled": 1, "failed": 1, "running": 2}
    assert status.state == "running"  # the other two are still ending, within the grace


def test_scheduler_outage_is_unknown_with_the_last_known_state_and_its_age(env: Env) -> None:
    env.execute()
    env.status()
    env.fake.advance(30)
    env.fake.fail("squeue")
    env.fake.fail("sacct")
    status = env.status()
    assert status.evidence == "cached"
    assert status.evidence_age_s == pytest.approx(30.0, abs=0.01)
    assert status.counts == {"unknown": 4}
    assert is_unavailable(status)
    assert status.scheduler_error is not None
    assert "squeue" in status.scheduler_error


def test_an_outage_with_no_observation_ever_recorded_is_unknown_without_evidence(env: Env) -> None:
    env.execute()
    env.fake.fail("squeue")
    env.fake.fail("sacct")
    status = env.status()
    assert status.evidence == "none"
    assert status.observed_at is None
    assert status.counts == {"unknown": 4}


def test_sacct_down_still_classifies_from_squeue(env: Env) -> None:
    env.execute()
    env.fake.advance(1.5)
    env.fake.fail("sacct")
    status = env.status()
    assert status.evidence == "live"
    assert status.sacct is not None
    assert status.sacct.status == "failed"
    assert status.counts == {"running": 4}


def test_sacct_down_after_the_jobs_left_squeue_is_unknown_and_unavailable(env: Env) -> None:
    env.execute()
    env.fake.advance(30)  # ended and gone from squeue (MinJobAge 10 s), no status record
    env.fake.fail("sacct")
    status = env.status()
    assert status.evidence == "live"
    assert status.counts == {"unknown": 4}
    assert is_unavailable(status)


def test_a_rejected_first_submission_is_not_submitted_with_the_scheduler_message(tmp_path: Path) -> None:
    env = Env(tmp_path, RejectingSlurm(accounts=("ddtest",)))
    with pytest.raises(InvalidInputError, match="Invalid qos"):
        env.execute()
    env.run_id = next((env.workspace / "runs").iterdir()).name
    status = env.status()
    assert status.state == "not_submitted"
    assert status.counts == {"not_submitted": 4}
    assert status.submission_error is not None
    assert "Invalid qos specification" in status.submission_error
    assert status.scheduler_calls == 0


def test_an_unknown_run_is_not_found_and_a_bad_run_id_invalid(env: Env) -> None:
    env.execute()
    with pytest.raises(NotFoundError):
        run_status("reviews-20990101T000000Z-000000", profile=env.profile, runner=env.fake)
    with pytest.raises(InvalidInputError):
        run_status("not a run", profile=env.profile, runner=env.fake)


def test_a_corrupt_run_record_cannot_be_classified(env: Env) -> None:
    env.execute()
    data = env.layout.run_record.read_bytes()
    env.layout.run_record.write_bytes(data.replace(b'"reviews"', b'"reviewz"', 1))
    with pytest.raises(UnavailableError, match="corrupt"):
        env.status()


def test_wait_polls_until_the_run_ends(env: Env) -> None:
    env.execute()
    seen: list[str] = []
    start = env.fake.clock()
    env.end_attempt(2, "client_error", exit_code=3, message="the client worker exited 3")
    result = wait_run(
        env.run_id,
        profile=env.profile,
        runner=env.fake,
        clock=env.fake.clock,
        sleep=env.fake.advance,
        monotonic=lambda: (env.fake.clock() - start).total_seconds(),
        interval_s=20,
        timeout_s=3600,
        on_poll=lambda status: seen.append(status.state),
    )
    assert result.outcome == "ended"
    assert result.status.counts["failed"] == 1
    assert result.status.counts["scheduler_inconsistent"] == 3
    assert seen[0] == "pending"
    assert seen[-1] == "failed"
    assert result.polls == len(seen)


def test_wait_times_out_with_the_last_status(env: Env) -> None:
    env.execute()
    start = env.fake.clock()
    result = wait_run(
        env.run_id,
        profile=env.profile,
        runner=env.fake,
        clock=env.fake.clock,
        sleep=lambda s: None,
        monotonic=lambda: (env.fake.clock() - start).total_seconds(),
        interval_s=5,
        timeout_s=0,
    )
    assert result.outcome == "timeout"
    assert result.polls == 1
    assert result.status.state == "pending"


def test_cli_status_prints_the_result_and_exits_by_state(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    env.execute()
    env.fake.advance(4)
    env.end_attempt(0, "server_failed_to_start", exit_code=10, message="server writer-0 exited 1 before ready")
    import data_designer.slurm.services.context._context as status_module

    # the CLI builds the process runner itself: hand it the fake (the wall clock then dates the evidence)
    fake = env.fake
    monkeypatch.setattr(status_module, "SubprocessRunner", lambda env=None: fake)
    cli = CliRunner()
    table = cli.invoke(app, ["status", env.run_id, "--profile", str(env.profile)])
    assert table.exit_code == 0, table.output
    assert "server_failed_to_start" in table.output
    assert "SHARD" in table.output
    check = cli.invoke(app, ["status", env.run_id, "--profile", str(env.profile), "--check", "--json"])
    assert check.exit_code == 6
    assert RunStatus.model_validate_json(check.stdout).shards[0].state == "failed"
    csv_out = cli.invoke(app, ["status", env.run_id, "--profile", str(env.profile), "--format", "csv"])
    assert csv_out.exit_code == 0
    assert csv_out.stdout.splitlines()[0].startswith("shard,state,records_done,records_total,reason")
    assert len(csv_out.stdout.splitlines()) == 5
    env.fake.fail("squeue")
    env.fake.fail("sacct")
    down = cli.invoke(app, ["status", env.run_id, "--profile", str(env.profile), "--json"])
    assert down.exit_code == 5
    assert RunStatus.model_validate_json(down.stdout).evidence == "cached"
    missing = cli.invoke(app, ["status", "reviews-20990101T000000Z-000000", "--profile", str(env.profile)])
    assert missing.exit_code == 3
    assert "run_not_found" not in missing.stdout
