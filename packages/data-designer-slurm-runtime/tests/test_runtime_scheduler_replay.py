"""SlurmScheduler.observe over real squeue/sacct outputs captured together on the local cluster."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from data_designer.slurm.runtime.scheduler import CommandResult, SlurmScheduler

DATA = Path(__file__).parent / "data"


class ReplayRunner:
    """Answers squeue and sacct with captured files."""

    def __init__(self, squeue: str, sacct: str) -> None:
        self.outputs = {
            "squeue": (DATA / squeue).read_text(encoding="utf-8"),
            "sacct": (DATA / sacct).read_text(encoding="utf-8"),
        }

    def run(
        self, argv: Sequence[str], *, timeout_s: float, stdin: str | None = None, environment: object = None
    ) -> CommandResult:
        return CommandResult(tuple(argv), 0, self.outputs[argv[0]], "", 0.05)


def observe(squeue: str, sacct: str, ids: list[str]) -> dict[tuple[str, int | None], tuple[str, str, int | None]]:
    scheduler = SlurmScheduler(
        ReplayRunner(squeue, sacct), clock=lambda: datetime(2026, 11, 29, 15, 27, 13, tzinfo=UTC)
    )
    observation = scheduler.observe(ids)
    assert observation.observed_at == "2026-11-29T15:27:13.000000Z"
    assert observation.calls == 2
    return {(t.job_id, t.array_index): (t.state, t.source, t.exit_code) for t in observation.tasks}


def test_squeue_wins_while_sacct_lags_and_sacct_wins_once_terminal() -> None:
    tasks = observe("squeue_array_throttled.txt", "sacct_array_throttled.txt", ["189", "190", "191"])
    assert tasks[("189", 0)] == ("completed", "sacct", 0)
    assert tasks[("189", 2)] == ("running", "squeue", None)  # sacct still says PENDING
    assert tasks[("189", 4)] == ("pending", "squeue", None)
    assert tasks[("190", None)] == ("failed", "sacct", 3)
    assert tasks[("191", 1)] == ("running", "squeue", None)
    assert len(tasks) == 10


def test_placeholders_are_lag_and_never_a_state() -> None:
    scheduler = SlurmScheduler(ReplayRunner("squeue_array_throttled.txt", "sacct_placeholders_mixed.txt"))
    observation = scheduler.observe(["190", "191"])
    assert observation.accounting_lag
    assert {(t.job_id, t.state, t.source) for t in observation.tasks} == {
        ("190", "failed", "squeue"),
        ("191", "running", "squeue"),
    }


def test_requeued_job_counts_a_restart() -> None:
    tasks = SlurmScheduler(ReplayRunner("squeue_cancel_requeue.txt", "sacct_cancel_requeue.txt")).observe(["31", "33"])
    by_key = {(t.job_id, t.array_index): t for t in tasks.tasks}
    requeued = by_key[("33", None)]
    assert (requeued.state, requeued.raw_state, requeued.restarts, requeued.reason) == (
        "requeued",
        "PENDING",
        1,
        "BeginTime",
    )
    cancelled = by_key[("31", 1)]
    assert (cancelled.state, cancelled.raw_state, cancelled.source) == ("cancelled", "CANCELLED by 0", "sacct")


def test_purged_jobs_are_read_from_sacct_only() -> None:
    final = SlurmScheduler(ReplayRunner("squeue_final_empty.txt", "sacct_final.txt")).observe(
        ["30", "31", "32", "33", "34"]
    )
    by_key = {(t.job_id, t.array_index): t for t in final.tasks}
    assert all(t.source == "sacct" for t in final.tasks)
    assert by_key[("33", None)].restarts == 1
    assert by_key[("33", None)].state == "completed"
    assert by_key[("30", None)].state == "timeout"
    assert by_key[("32", None)].state == "out_of_memory"
    assert final.missing_job_ids == ()
