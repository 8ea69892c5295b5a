"""``run_logs`` / ``follow_logs`` and the ``logs`` command against run directories the runtime's builders write."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import InvalidInputError, LogFile, NotFoundError, RunLogs
from data_designer.slurm.contracts.records import STATUS_SCHEMA, StatusRecord
from data_designer.slurm.runtime.store import RunLayout, read_appended, read_tail, write_record_once
from data_designer.slurm.runtime.testing import (
    PREFLIGHT_ERROR_TEXT,
    SERVER_FAILURE_LINE,
    FakeSlurm,
    ShardOutcome,
    outcome_cycle,
    register_run_jobs,
    write_run_directory,
)
from data_designer.slurm.services import follow_logs, run_logs

OUTCOMES: tuple[ShardOutcome, ...] = ("succeeded", "running", "pending", "partial", "failed_server", "no_attempt")
"""Shard k ends as OUTCOMES[k]: 0 succeeded, 1 running, 2 pending, 3 partial, 4 failed_server, 5 no_attempt."""
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
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


@pytest.fixture
def layout(tmp_path: Path) -> RunLayout:
    return write_run_directory(
        tmp_path / "ws", shards=len(OUTCOMES), outcome=outcome_cycle(OUTCOMES), clock=lambda: NOW
    )


def logs_of(result: RunLogs, shard: int) -> dict[str, LogFile]:
    """The shard's files by name (``supervisor.log``, ``slurm-..._5.err``)."""
    return {Path(f.path).name: f for f in result.files if f.shard == shard}


def steps_of(result: RunLogs, shard: int) -> list[str]:
    return [f.step for f in result.files if f.shard == shard]


def add_attempt(layout: RunLayout, shard: int, attempt: int, supervisor: str) -> Path:
    logs = layout.logs_dir(shard, attempt)
    logs.mkdir(parents=True)
    (logs / "supervisor.log").write_text(supervisor)
    return logs


def end_attempt(layout: RunLayout, shard: int, attempt: int) -> None:
    record = StatusRecord(status="succeeded", exit_code=0, message="done", records=10, started_at=NOW, finished_at=NOW)
    write_record_once(layout.status(shard, attempt), STATUS_SCHEMA, record)


# -- the selection ------------------------------------------------------------------------------------------------


def test_by_default_the_latest_attempt_of_every_shard_not_succeeded_is_shown_in_shard_order(layout: RunLayout) -> None:
    result = run_logs(layout.run_dir)
    assert result.selection == "not_succeeded"
    assert result.shards == (1, 2, 3, 4, 5)
    assert result.succeeded_skipped == 1
    assert 0 not in {f.shard for f in result.files}
    assert steps_of(result, 1) == ["supervisor", "server", "client"]
    assert steps_of(result, 4) == ["supervisor", "server"]  # the server failed: the client never started
    assert logs_of(result, 4)["server-writer-0.log"].lines[-1] == SERVER_FAILURE_LINE
    assert {f.attempt for f in result.files if f.shard != 5} == {1}
    assert result.notes == (
        "shard 2: no log file yet: no attempt has started and Slurm wrote no batch output (pending?)",
    )


def test_a_shard_that_failed_before_any_attempt_shows_the_batch_scripts_stderr(layout: RunLayout) -> None:
    result = run_logs(layout.run_dir, shard=5)
    assert result.selection == "shard"
    [error] = result.files  # its .out is empty and says nothing
    assert (error.step, error.attempt, error.array_task) == ("batch", None, 5)
    assert error.path == str(layout.run_dir / f"slurm-dd-{layout.run_id}-c0_5.err")
    assert error.lines == tuple(PREFLIGHT_ERROR_TEXT.splitlines())
    assert error.job_id == "1000"
    assert not error.truncated


def test_shard_shows_a_succeeded_shard_and_attempt_picks_an_earlier_one(layout: RunLayout) -> None:
    assert steps_of(run_logs(layout.run_dir, shard=0), 0) == ["supervisor", "server", "client"]
    add_attempt(layout, 4, 2, "attempt two started\n")
    latest = run_logs(layout.run_dir, shard=4)
    assert [(f.attempt, f.step, f.lines) for f in latest.files] == [(2, "supervisor", ("attempt two started",))]
    first = run_logs(layout.run_dir, shard=4, attempt=1)
    assert first.selection == "attempt"
    assert {f.attempt for f in first.files} == {1}
    assert "server_failed_to_start" in logs_of(first, 4)["supervisor.log"].lines[-1]


def test_an_unknown_attempt_names_the_shard_and_the_attempts_it_has(layout: RunLayout) -> None:
    add_attempt(layout, 4, 2, "attempt two\n")
    with pytest.raises(NotFoundError) as unknown:
        run_logs(layout.run_dir, shard=4, attempt=3)
    assert unknown.value.info.message == "shard 4 has no attempt 3 (its attempts: 1, 2)"
    assert unknown.value.info.key_path == ("--attempt",)
    assert int(unknown.value.exit_code) == 3
    with pytest.raises(NotFoundError, match=r"shard 5 has no attempt 1 \(it has no attempt yet\)"):
        run_logs(layout.run_dir, shard=5, attempt=1)
    with pytest.raises(NotFoundError, match=r"has no shard 6 \(its shards: 0-5\)"):
        run_logs(layout.run_dir, shard=6)
    with pytest.raises(InvalidInputError, match="attempt numbers count per shard") as no_shard:
        run_logs(layout.run_dir, attempt=1)
    assert no_shard.value.info.key_path == ("--attempt",)


def test_step_keeps_only_that_steps_files(layout: RunLayout) -> None:
    servers = run_logs(layout.run_dir, step="server")
    assert {f.step for f in servers.files} == {"server"}
    assert [f.shard for f in servers.files] == [1, 3, 4]
    (layout.logs_dir(1, 1) / "server-critic-0.log").write_text("critic up\n")
    assert [Path(f.path).name for f in run_logs(layout.run_dir, shard=1, step="server").files] == [
        "server-critic-0.log",
        "server-writer-0.log",
    ]
    client = run_logs(layout.run_dir, shard=1, step="client")
    assert [f.step for f in client.files] == ["client"]
    batch = run_logs(layout.run_dir, step="batch")
    assert [(f.shard, f.step) for f in batch.files] == [(5, "batch")]
    assert "shard 4: attempt 1 has no batch log yet" in batch.notes
    supervisor = run_logs(layout.run_dir, shard=5, step="supervisor")
    assert supervisor.files == ()
    assert supervisor.notes == (
        "shard 5: no supervisor log: no attempt has started (--step batch shows Slurm's output)",
    )


def test_batch_output_of_a_retry_that_ran_no_attempt_is_shown_with_the_latest_attempt(layout: RunLayout) -> None:
    # shard 4's task wrote batch output too (next to attempt 1, which names it): both belong to attempt 1
    layout.batch_log(f"dd-{layout.run_id}-c0", 4, "err").write_text("srun: step ended\n")
    result = run_logs(layout.run_dir, shard=4)
    assert steps_of(result, 4) == ["batch", "supervisor", "server"]
    assert logs_of(result, 4)[f"slurm-dd-{layout.run_id}-c0_4.err"].lines == ("srun: step ended",)


# -- the tail -----------------------------------------------------------------------------------------------------


def test_tail_shows_the_last_lines_and_says_when_earlier_ones_are_not_shown(layout: RunLayout) -> None:
    client = layout.log_file(1, 1, "client")
    client.write_text("".join(f"line {n}\n" for n in range(50_000)))
    result = run_logs(layout.run_dir, shard=1, step="client", tail=3)
    [log] = result.files
    assert log.lines == ("line 49997", "line 49998", "line 49999")
    assert log.truncated
    assert log.size == client.stat().st_size
    assert result.tail == 3
    whole = run_logs(layout.run_dir, shard=1, step="supervisor", tail=1000)
    assert not whole.files[0].truncated
    with pytest.raises(InvalidInputError, match="--tail 0"):
        run_logs(layout.run_dir, tail=0)


def test_the_tail_reader_reads_from_the_end_within_its_cap(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"first\n" + b"x" * 3_000_000 + b"\n  indented last\r\nno newline")
    tail = read_tail(path, 2, max_bytes=100_000)
    assert tail is not None
    assert tail.lines == ("  indented last", "no newline")  # indentation kept, \r dropped
    assert tail.truncated
    one_line = read_tail(path, 5, max_bytes=1000)  # the cap falls inside the long line: only what it read
    assert one_line is not None
    assert one_line.truncated
    assert one_line.lines[-1] == "no newline"
    assert len(one_line.lines[0]) < 1000
    assert read_tail(tmp_path / "absent.log", 3) is None
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    assert read_tail(empty, 3) == type(tail)(lines=(), truncated=False, end=0)


def test_appended_lines_stop_at_the_last_newline_unless_final(tmp_path: Path) -> None:
    path = tmp_path / "grow.log"
    path.write_bytes(b"a\nb\npart")
    new = read_appended(path, 0)
    assert new is not None
    assert (new.lines, new.end) == (("a", "b"), 4)
    final = read_appended(path, new.end, final=True)
    assert final is not None
    assert (final.lines, final.end) == (("part",), 8)
    path.write_bytes(b"z\n")
    replaced = read_appended(path, 8)
    assert replaced is not None
    assert (replaced.lines, replaced.reset) == (("z",), True)


# -- follow -------------------------------------------------------------------------------------------------------


class Timeline:
    """An injected clock and sleep: each sleep advances the clock and runs the step planned for that poll."""

    def __init__(self, steps: dict[int, Callable[[], None]] | None = None) -> None:
        self.now = 0.0
        self.sleeps = 0
        self.steps = steps or {}

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        step = self.steps.get(self.sleeps)
        if step is not None:
            step()
        assert self.sleeps < 100, "follow did not stop"


def fake_slurm(layout: RunLayout) -> FakeSlurm:
    fake = FakeSlurm()
    register_run_jobs(fake, layout, outcome=outcome_cycle(OUTCOMES))
    return fake


def test_follow_prints_appended_lines_and_stops_one_poll_after_the_status_appears(layout: RunLayout) -> None:
    client = layout.log_file(1, 1, "client")

    def append() -> None:
        with client.open("a") as handle:
            handle.write("new line 1\nnew line 2\n")

    timeline = Timeline({2: append, 3: lambda: end_attempt(layout, 1, 1)})
    seen: list[LogFile] = []
    fake = fake_slurm(layout)
    result = follow_logs(
        layout.run_dir,
        shard=1,
        on_logs=seen.append,
        runner=fake,
        clock=fake.clock,
        sleep=timeline.sleep,
        monotonic=timeline.monotonic,
    )
    assert result.outcome == "ended"
    assert result.followed == (1,)
    assert result.lines == 2
    first = [f.step for f in seen[:3]]
    assert first == ["supervisor", "server", "client"]  # the tails first
    assert [(f.step, f.lines) for f in seen[3:]] == [("client", ("new line 1", "new line 2"))]
    # appended before poll 3, status before poll 4 (it starts closing), closed at poll 5: one poll after it appeared
    assert (timeline.sleeps, result.polls) == (4, 5)
    assert result.scheduler_calls == 2  # one squeue/sacct pair: asked at most every 5 s
    assert [argv[0] for argv in fake.calls].count("squeue") == 1


def test_follow_of_a_shard_that_ended_before_any_attempt_stops_after_the_grace(layout: RunLayout) -> None:
    timeline = Timeline()
    seen: list[LogFile] = []
    fake = fake_slurm(layout)
    result = follow_logs(
        layout.run_dir,
        shard=5,
        on_logs=seen.append,
        runner=fake,
        clock=fake.clock,
        sleep=timeline.sleep,
        monotonic=timeline.monotonic,
        grace_s=10.0,
        scheduler_every_s=5.0,
    )
    assert [f.step for f in seen] == ["batch"]
    assert result.outcome == "ended"
    assert timeline.now == 10.0  # the task was FAILED at the first check; 10 s without new bytes
    assert result.scheduler_calls == 2 * 3  # at 0, 5 and 10 s


def test_follow_picks_up_a_new_attempt_of_a_pending_shard(layout: RunLayout) -> None:
    def start() -> None:
        add_attempt(layout, 2, 1, "attempt one of shard 2\n")

    timeline = Timeline({1: start, 2: lambda: end_attempt(layout, 2, 1)})
    seen: list[LogFile] = []
    fake = fake_slurm(layout)
    follow_logs(
        layout.run_dir,
        shard=2,
        on_logs=seen.append,
        runner=fake,
        clock=fake.clock,
        sleep=timeline.sleep,
        monotonic=timeline.monotonic,
    )
    assert [(f.attempt, f.step, f.lines) for f in seen] == [(1, "supervisor", ("attempt one of shard 2",))]


def test_follow_with_nothing_to_follow_returns_at_once(tmp_path: Path) -> None:
    done = write_run_directory(tmp_path / "ws", shards=2, clock=lambda: NOW)
    timeline = Timeline()
    result = follow_logs(done.run_dir, on_logs=lambda log: None, runner=FakeSlurm(), sleep=timeline.sleep)
    assert result.outcome == "nothing_to_follow"
    assert (timeline.sleeps, result.scheduler_calls) == (0, 0)


# -- the command --------------------------------------------------------------------------------------------------


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["logs", *args])


def test_cli_prints_a_header_per_file_and_the_notes(layout: RunLayout) -> None:
    done = invoke(str(layout.run_dir), "--tail", "2")
    assert done.exit_code == 0, done.output
    out = done.stdout
    err = layout.run_dir / f"slurm-dd-{layout.run_id}-c0_5.err"
    assert f"==> shard 5, no attempt, batch (job 1000_5): {err} <==" in out
    assert "ModuleNotFoundError: No module named 'data_designer.slurm.runtime'" in out
    server = layout.log_file(4, 1, "server-writer-0")
    assert f"==> shard 4, attempt 1, server: {server} <==\n... (earlier lines not shown" in out
    assert out.rstrip().endswith("1 shard(s) succeeded, not shown (--shard K shows one)")
    assert "shard 2: no log file yet" in out


def test_cli_escapes_control_characters_of_names_and_lines(layout: RunLayout) -> None:
    (layout.logs_dir(1, 1) / "server-\x1b[31mred.log").write_text("\x1b[2Jcleared\n")
    out = invoke(str(layout.run_dir), "--shard", "1", "--step", "server").stdout
    assert "\x1b" not in out
    assert "server-\\x1b[31mred.log" in out
    assert "\\x1b[2Jcleared" in out


def test_cli_json_is_the_result_and_errors_are_one_line(layout: RunLayout, tmp_path: Path) -> None:
    done = invoke(str(layout.run_dir), "--shard", "5", "--step", "batch", "--json")
    assert done.exit_code == 0
    assert RunLogs.model_validate_json(done.stdout) == run_logs(layout.run_dir, shard=5, step="batch")
    bad = invoke(str(layout.run_dir), "--shard", "4", "--attempt", "2")
    assert bad.exit_code == 3
    assert bad.stderr.splitlines() == [
        f"error: {layout.attempts_dir(4)}: --attempt: shard 4 has no attempt 2 (its attempts: 1) "
        "(fix: pick one of its attempts, or leave --attempt out for the latest)"
    ]
    both = invoke(str(layout.run_dir), "--follow", "--json")
    assert both.exit_code == 2
    assert '"key_path":["--follow"]' in both.stderr
    assert both.stdout == ""
    no_shard = invoke(str(layout.run_dir), "--attempt", "1")
    assert no_shard.exit_code == 2
    profile = tmp_path / "profile.yaml"
    profile.write_text(PROFILE.format(workspace=tmp_path / "ws", python=sys.executable))
    missing = invoke("reviews-20990101T000000Z-000000", "--profile", str(profile))
    assert missing.exit_code == 3
    assert len(missing.stderr.splitlines()) == 1
    assert "has no run record" in missing.stderr


def test_cli_follow_prints_until_the_attempt_ended_and_ctrl_c_exits_130(
    layout: RunLayout, monkeypatch: pytest.MonkeyPatch
) -> None:
    import data_designer.slurm.services as services

    fake = fake_slurm(layout)
    timeline = Timeline()
    monkeypatch.setattr(
        services,
        "follow_logs",
        functools.partial(follow_logs, runner=fake, sleep=timeline.sleep, monotonic=timeline.monotonic),
    )
    ended = invoke(str(layout.run_dir), "--shard", "3", "--follow", "--step", "supervisor")  # status.json exists
    assert ended.exit_code == 0, ended.output
    assert ended.stdout.startswith(f"==> shard 3, attempt 1, supervisor: {layout.log_file(3, 1, 'supervisor')} <==")
    assert ended.stdout.rstrip().endswith("logs: the followed attempts ended (shards 3; 0 new lines)")

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(services, "follow_logs", functools.partial(follow_logs, runner=fake, sleep=interrupt))
    stopped = invoke(str(layout.run_dir), "--shard", "1", "--follow")
    assert stopped.exit_code == 130
    assert "==> shard 1, attempt 1, client" in stopped.stdout
    assert stopped.stderr.strip() == "error: interrupted"


def test_the_cli_default_tail_is_the_services() -> None:
    from data_designer.slurm.cli import _logs_commands
    from data_designer.slurm.services.runs import _logs

    assert _logs_commands.DEFAULT_TAIL == _logs.DEFAULT_TAIL
