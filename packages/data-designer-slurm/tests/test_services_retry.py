"""``retry_run`` / ``cancel_run`` and the ``retry`` / ``cancel`` commands against the fake Slurm and real records.

Run directories come from ``runtime.testing.write_run_directory`` (every record a real one) and their jobs are
registered in the fake cluster in the states the shards' outcomes imply, so ``status`` classifies them as a real
run's: shard k of ``OUTCOMES`` is succeeded, partial (time limit, first half published), failed (server), cancelled,
failed at the batch preflight (no attempt), running.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import (
    CancelResult,
    ConflictError,
    InvalidInputError,
    RetryResult,
    RunStatus,
    UnavailableError,
)
from data_designer.slurm.contracts.records import (
    CANCELLATION_SCHEMA,
    RETRY_SCHEMA,
    STATUS_SCHEMA,
    SUBMISSION_SCHEMA,
    IndexRange,
    StatusRecord,
)
from data_designer.slurm.runtime.scheduler import CommandResult
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record, replace_record, sequence_numbers
from data_designer.slurm.runtime.testing import (
    FakeSlurm,
    ShardOutcome,
    outcome_cycle,
    register_run_jobs,
    write_run_directory,
)
from data_designer.slurm.services import cancel_run, retry_run, run_status

OUTCOMES: tuple[ShardOutcome, ...] = ("succeeded", "partial", "failed_server", "cancelled", "no_attempt", "running")
RETRYABLE = [1, 2, 3, 4]


class Run:
    """A run directory on disk and the fake cluster that holds its jobs (its virtual clock is every service's)."""

    def __init__(self, root: Path, outcomes: Sequence[ShardOutcome] = OUTCOMES, **kwargs: Any) -> None:
        self.fake = FakeSlurm(accounts=("ddtest",))
        (root / "ws").mkdir()
        pick = outcome_cycle(outcomes)
        self.layout = write_run_directory(
            root / "ws", shards=len(outcomes), outcome=pick, clock=self.fake.clock, **kwargs
        )
        self.jobs = register_run_jobs(self.fake, self.layout, outcome=pick)
        self.ref = str(self.layout.run_dir)

    def retry(self, runner: Any = None, **kwargs: Any) -> RetryResult:
        return retry_run(self.ref, runner=runner or self.fake, clock=self.fake.clock, environ={}, **kwargs)

    def cancel(self, **kwargs: Any) -> CancelResult:
        return cancel_run(
            self.ref, runner=self.fake, clock=self.fake.clock, environ={}, sleep=self.fake.sleep, **kwargs
        )

    def status(self) -> RunStatus:
        return run_status(self.ref, runner=self.fake, clock=self.fake.clock, environ={})

    def sbatch_calls(self) -> list[tuple[str, ...]]:
        return [argv for argv in self.fake.calls if argv[0] == "sbatch"]

    def submissions(self) -> list[dict[str, Any]]:
        out = []
        for number in sequence_numbers(self.layout.submissions_dir):
            found = read_record(self.layout.submission_record(number), SUBMISSION_SCHEMA)
            assert isinstance(found, RecordOk)
            out.append(found.payload.model_dump(mode="json"))
        return out


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)


def test_dry_run_selects_failed_partial_cancelled_and_preflight_shards_with_their_exact_ranges(run: Run) -> None:
    result = run.retry(dry_run=True)

    assert [s.shard for s in result.shards] == RETRYABLE
    by_shard = {s.shard: s for s in result.shards}
    assert by_shard[1].state == "partial"
    assert by_shard[1].ranges == (IndexRange(15, 20),)
    assert by_shard[2].ranges == (IndexRange(20, 30),)
    assert by_shard[2].reason == "server_failed_to_start"
    assert by_shard[3].state == "cancelled"
    assert by_shard[4].reason == "environment_mismatch"
    assert result.records == 5 + 10 + 10 + 10
    assert "5" in result.skipped
    assert result.skipped["5"].startswith("running")
    assert "0" not in result.skipped  # succeeded shards are not retried, and not listed
    assert result.generation is None
    assert not result.jobs
    assert run.sbatch_calls() == []
    assert not run.layout.retries_dir.exists()


def test_retry_writes_its_intent_before_sbatch_and_records_the_generation(run: Run) -> None:
    seen_intent: list[bool] = []

    class Watching:
        def run(self, argv: Sequence[str], **kwargs: Any) -> CommandResult:
            if argv[0] == "sbatch":
                seen_intent.append(run.layout.retry_intent(1).exists())
            return run.fake.run(argv, **kwargs)

    result = run.retry(runner=Watching())

    assert seen_intent == [True]
    assert result.generation == 1
    assert [s.shard for s in result.shards] == RETRYABLE
    intent = read_record(run.layout.retry_intent(1), RETRY_SCHEMA)
    assert isinstance(intent, RecordOk)
    assert [s.shard for s in intent.payload.shards] == RETRYABLE
    (sbatch,) = run.sbatch_calls()
    assert f"--job-name=dd-{run.layout.run_id}-r1-c0" in sbatch
    assert "--array=1-4" in sbatch
    assert any(arg.startswith("--export=") and "DDSLURM_ATTEMPT=next" in arg for arg in sbatch)
    last = run.submissions()[-1]
    assert last["generation"] == 1
    assert [j["generation"] for j in last["jobs"]] == [1]
    assert result.jobs[0].job_name.endswith("-r1-c0")
    assert result.sbatch_calls == 1

    status = run.status()  # the new generation's tasks hold the shards now
    assert {s.shard: s.state for s in status.shards if s.shard in RETRYABLE} == dict.fromkeys(RETRYABLE, "pending")
    again = run.retry()  # idempotent: nothing is due while they are pending
    assert again.generation is None
    assert again.shards == ()
    assert len(run.sbatch_calls()) == 1
    assert set(again.skipped) == {"1", "2", "3", "4", "5"}


def test_named_shards_that_cannot_be_retried_are_refused_naming_them(run: Run) -> None:
    with pytest.raises(ConflictError) as running:
        run.retry(shards=[5, 2])
    assert running.value.info.exit_code == 4
    assert "shard 5 is running" in running.value.info.message
    with pytest.raises(ConflictError) as done:
        run.retry(shards=[0])
    assert "shard 0 already succeeded" in done.value.info.message
    with pytest.raises(InvalidInputError) as unknown:
        run.retry(shards=[6])
    assert unknown.value.info.key_path == ("--shard",)
    assert "no shard 6" in unknown.value.info.message
    assert run.sbatch_calls() == []

    result = run.retry(shards=[2])  # --shard narrows the selection
    assert [s.shard for s in result.shards] == [2]
    assert "--array=2" in run.sbatch_calls()[0]


def _end_invalid_config(run: Run, shard: int) -> None:
    path = run.layout.status(shard, 1)
    found = read_record(path, STATUS_SCHEMA)
    assert isinstance(found, RecordOk)
    ended: StatusRecord = found.payload.model_copy(update={"status": "invalid_config", "message": "bad config"})
    replace_record(path, STATUS_SCHEMA, ended)


def test_shards_that_ended_invalid_config_need_force(run: Run) -> None:
    _end_invalid_config(run, 2)

    plain = run.retry(dry_run=True)
    assert 2 not in [s.shard for s in plain.shards]
    assert "invalid_config" in plain.skipped["2"]
    with pytest.raises(ConflictError) as refused:
        run.retry(shards=[2])
    assert refused.value.info.code == "invalid_config_retry"
    assert "--force" in (refused.value.info.hint or "")

    forced = run.retry(shards=[2], force=True)
    assert [s.shard for s in forced.shards] == [2]
    intent = read_record(run.layout.retry_intent(1), RETRY_SCHEMA)
    assert isinstance(intent, RecordOk)
    assert intent.payload.forced


class Serialised:
    """The fake behind a lock (its state is not thread-safe); both callers meet at a barrier before observing, so
    each has read the run before either writes an intent."""

    def __init__(self, fake: FakeSlurm, parties: int) -> None:
        self.fake = fake
        self.lock = threading.Lock()
        self.barrier = threading.Barrier(parties, timeout=10)
        self.met: set[int] = set()

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        stdin: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> CommandResult:
        me = threading.get_ident()
        if argv[0] == "squeue" and me not in self.met:
            self.met.add(me)
            self.barrier.wait()
        with self.lock:
            return self.fake.run(argv, timeout_s=timeout_s, stdin=stdin, environment=environment)


def test_two_retries_started_together_submit_one_generation(run: Run) -> None:
    runner = Serialised(run.fake, 2)
    results: list[object] = []

    def one() -> None:
        try:
            results.append(run.retry(runner=runner))
        except Exception as exc:
            results.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    generations = sorted((getattr(r, "generation", None) or 0) for r in results)
    assert generations == [0, 1], results  # exactly one took generation 1; the other found its shards taken
    assert len(run.sbatch_calls()) == 1
    assert sorted(int(p.stem) for p in run.layout.retries_dir.glob("*.json")) == [1]
    loser = next(r for r in results if getattr(r, "generation", 1) is None)
    skipped = loser.skipped  # type: ignore[attr-defined]
    assert all(skipped[str(shard)].startswith("pending") for shard in RETRYABLE), skipped


def test_a_lost_sbatch_reply_is_recovered_by_name_without_a_second_sbatch(run: Run) -> None:
    run.fake.lose_sbatch_replies(1)
    with pytest.raises(UnavailableError) as lost:
        run.retry()
    assert "retry RUN' again" in (lost.value.info.hint or "")
    assert run.layout.retry_intent(1).exists()
    assert all(s["generation"] == 0 for s in run.submissions())
    assert len(run.sbatch_calls()) == 1
    status = run.status()  # the intent holds its shards while its holder may still be submitting
    assert {s.reason for s in status.shards if s.shard in RETRYABLE} == {"retry_submitting"}

    held = run.retry()  # the holder (this very process) is alive: nothing is submitted twice
    assert held.generation is None
    assert len(run.sbatch_calls()) == 1

    resumed = run.retry(alive=lambda who: False)  # its holder is gone: the intent is completed, found by name
    assert resumed.resumed == (1,)
    assert resumed.recovered == 1
    assert resumed.sbatch_calls == 0
    assert len(run.sbatch_calls()) == 1
    assert run.layout.resume_claim(1, 1).exists()
    last = run.submissions()[-1]
    assert last["generation"] == 1
    assert last["recovered"] == 1
    assert resumed.generation is None  # nothing else was due: the resumed generation holds every retryable shard


def test_an_orphaned_intent_ages_into_missing_with_the_fix(run: Run) -> None:
    run.fake.lose_sbatch_replies(1)
    with pytest.raises(UnavailableError):
        run.retry()
    run.fake.advance(400)  # past the retry grace
    status = run.status()
    shard = next(s for s in status.shards if s.shard == 2)
    assert shard.state == "missing"
    assert shard.reason == "retry_unsubmitted"
    assert "retry RUN' again" in (shard.message or "")


def test_a_retry_spanning_chunks_runs_them_one_after_another(tmp_path: Path) -> None:
    run = Run(tmp_path, ("failed_server",) * 5, max_array_size=2, max_concurrent_shards=1)
    result = run.retry()

    assert [job.chunk for job in result.jobs] == [0, 1, 2]
    first, second, third = run.sbatch_calls()
    assert not any(a.startswith("--dependency") for a in first)
    assert f"--dependency=afterany:{result.jobs[0].job_id}" in second
    assert f"--dependency=afterany:{result.jobs[1].job_id}" in third


def test_cancel_a_shard_cancels_its_retry_generation_only_and_records_who(run: Run) -> None:
    retried = run.retry(shards=[2])
    (job,) = retried.jobs

    result = run.cancel(shards=[2])

    assert result.targets == (f"{job.job_id}_2",)
    assert result.generations == (1,)
    assert result.confirmed
    assert run.fake.jobs[int(run.jobs[0])].tasks[5].state == "RUNNING"  # shard 5 untouched
    record = read_record(Path(result.record or ""), CANCELLATION_SCHEMA)
    assert isinstance(record, RecordOk)
    assert record.payload.shards == (2,)
    assert not record.payload.whole_run
    status = run.status()
    shard = next(s for s in status.shards if s.shard == 2)
    assert shard.state == "cancelled"
    assert shard.reason == "cancelled_by_user"
    assert "data-designer slurm cancel" in (shard.message or "")

    again = run.cancel(shards=[2])  # nothing live: nothing to cancel, nothing recorded
    assert again.targets == ()
    assert again.already_ended == (2,)
    assert again.record is None


def test_cancel_the_whole_run_and_retry_takes_the_cancelled_shards(run: Run) -> None:
    result = run.cancel()
    assert result.whole_run
    assert result.targets == (run.jobs[0],)
    assert result.already_ended == (0, 1, 2, 3, 4)
    status = run.status()
    assert next(s for s in status.shards if s.shard == 5).reason == "cancelled_by_user"
    assert 5 in [s.shard for s in run.retry(dry_run=True).shards]


def test_retry_and_cancel_refuse_without_a_live_observation(run: Run) -> None:
    run.fake.fail("squeue")
    run.fake.fail("sacct")
    with pytest.raises(UnavailableError) as retry_down:
        run.retry()
    assert retry_down.value.info.exit_code == 5
    assert run.sbatch_calls() == []
    with pytest.raises(UnavailableError):
        run.cancel()
    assert not run.layout.cancellations_dir.exists()


# -- the CLI --------------------------------------------------------------------------------------------------


def _cli(run: Run, *args: str) -> tuple[int, str, str]:
    def patched_retry(ref: str, **kwargs: Any) -> RetryResult:
        kwargs.pop("profile"), kwargs.pop("cluster")
        return retry_run(ref, runner=run.fake, clock=run.fake.clock, environ={}, **kwargs)

    def patched_cancel(ref: str, **kwargs: Any) -> CancelResult:
        kwargs.pop("profile"), kwargs.pop("cluster")
        return cancel_run(ref, runner=run.fake, clock=run.fake.clock, environ={}, sleep=run.fake.sleep, **kwargs)

    import data_designer.slurm.services as services

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(services, "retry_run", patched_retry)
        patch.setattr(services, "cancel_run", patched_cancel)
        result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_cli_retry_dry_run_json_and_table(run: Run) -> None:
    code, out, _ = _cli(run, "retry", run.ref, "--dry-run", "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["dry_run"] is True
    assert [s["shard"] for s in shown["shards"]] == RETRYABLE
    assert shown["shards"][0]["ranges"] == [[15, 20]]

    code, out, _ = _cli(run, "retry", run.ref, "--dry-run", "--shard", "1", "--shard", "3")
    assert code == 0
    assert "would retry 2 shard(s), 15 record(s); nothing submitted" in out
    assert "15-19" in out


def test_cli_retry_refusal_is_one_line_with_exit_4(run: Run) -> None:
    code, out, err = _cli(run, "retry", run.ref, "--shard", "5", "--json")
    assert code == 4
    assert out == ""
    error = json.loads(err)
    assert error["code"] == "shard_not_retryable"
    assert error["key_path"] == ["--shard"]


def test_cli_cancel_json(run: Run) -> None:
    code, out, _ = _cli(run, "cancel", run.ref, "--shard", "5", "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["targets"] == [f"{run.jobs[0]}_5"]
    assert shown["confirmed"] is True
    code, out, _ = _cli(run, "cancel", run.ref, "--shard", "5")
    assert code == 0
    assert "nothing to cancel" in out


def test_cli_missing_run_exits_3(tmp_path: Path) -> None:
    missing = tmp_path / "ws" / "runs" / "reviews-20260101T000000Z-abcdef"
    result = CliRunner().invoke(app, ["retry", str(missing), "--json"])
    assert result.exit_code == 3
    assert json.loads(result.stderr)["code"] == "run_not_found"


def test_layout_names(tmp_path: Path) -> None:
    layout = RunLayout.of(tmp_path, "reviews-20260101T000000Z-abcdef")
    assert layout.retry_intent(3).name == "0003.json"
    assert layout.resume_claim(3, 2).name == "0003.resume-2"
    assert layout.cancellations_dir.name == "cancellations"


def test_a_stale_shard_s_old_task_is_cancelled_before_its_new_attempt(run: Run) -> None:
    run.fake.advance(40)  # shard 5's heartbeat (written "now") is older than 4 beats while Slurm says RUNNING
    assert next(s for s in run.status().shards if s.shard == 5).state == "stale"

    dry = run.retry(shards=[5], dry_run=True)
    assert dry.stopped == (f"{run.jobs[0]}_5",)
    assert run.fake.jobs[int(run.jobs[0])].tasks[5].state == "RUNNING"  # a dry run stops nothing

    result = run.retry(shards=[5])
    assert result.stopped == (f"{run.jobs[0]}_5",)
    assert run.fake.jobs[int(run.jobs[0])].tasks[5].state.startswith("CANCELLED")
    scancel = next(i for i, argv in enumerate(run.fake.calls) if argv[0] == "scancel")
    sbatch = next(i for i, argv in enumerate(run.fake.calls) if argv[0] == "sbatch")
    assert scancel < sbatch  # never two attempts of the shard at once
