"""The worker's drain (``runtime._worker_drain``): when it settles, when it gives up, who publishes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from data_designer.slurm.runtime.worker._drain import CompletedBatch, Drain, batch_range, exact_batches


class FakeGate:
    def __init__(self, outstanding: int = 0) -> None:
        self.outstanding = outstanding
        self.held = False

    def hold(self) -> None:
        self.held = True


def test_a_warning_holds_every_gate_and_settles_once_nothing_is_in_flight() -> None:
    gate = FakeGate(outstanding=1)
    drain = Drain(warning_grace_s=30, settle_s=0.1)
    drain.watch([gate], unwatched=False)
    drain.request("SIGUSR1")
    assert gate.held
    threading.Timer(0.3, lambda: setattr(gate, "outstanding", 0)).start()
    started = time.monotonic()
    outcome = drain.wait_until_done()
    elapsed = time.monotonic() - started
    assert (outcome.signal, outcome.settled) == ("SIGUSR1", True)
    assert 0.3 <= elapsed < 5


def test_a_batch_completing_restarts_the_settle_time() -> None:
    drain = Drain(warning_grace_s=30, settle_s=0.3)
    drain.watch([FakeGate()], unwatched=False)
    drain.request("SIGUSR1")
    batch = CompletedBatch(Path("batch_00000.parquet"), 0, 5)
    threading.Timer(0.2, lambda: drain.batch_done(batch)).start()
    started = time.monotonic()
    outcome = drain.wait_until_done()
    assert time.monotonic() - started >= 0.45
    assert outcome.batches == (batch,)


def test_a_gate_that_never_empties_gives_up_at_the_deadline() -> None:
    drain = Drain(warning_grace_s=0.8, settle_s=0.05)
    drain.watch([FakeGate(outstanding=3)], unwatched=False)
    drain.request("SIGUSR1")
    started = time.monotonic()
    outcome = drain.wait_until_done()
    assert not outcome.settled
    assert 0.55 <= time.monotonic() - started < 5  # the grace minus its publication reserve (a quarter)


def test_an_alias_without_a_router_cannot_be_watched_so_the_drain_waits_for_the_deadline() -> None:
    drain = Drain(warning_grace_s=0.4, settle_s=0.05)
    drain.watch([FakeGate()], unwatched=True)
    drain.request("SIGUSR1")
    assert not drain.wait_until_done().settled


def test_a_termination_publishes_at_once_and_hurries_a_running_warning_drain() -> None:
    drain = Drain(warning_grace_s=60, settle_s=0.05)
    drain.watch([FakeGate(outstanding=1)], unwatched=False)
    drain.request("SIGUSR1")
    threading.Timer(0.2, lambda: drain.request("SIGTERM")).start()
    started = time.monotonic()
    outcome = drain.wait_until_done()
    assert outcome.signal == "SIGUSR1"  # the first signal names the drain
    assert not outcome.settled
    assert time.monotonic() - started < 5


def test_gates_watched_after_the_signal_are_held_too() -> None:
    drain = Drain(warning_grace_s=60)
    drain.request("SIGTERM")
    gate = FakeGate()
    drain.watch([gate], unwatched=False)
    assert gate.held
    assert drain.requested


def test_exactly_one_publisher() -> None:
    drain = Drain(warning_grace_s=1)
    assert drain.claim_publication("worker")
    assert not drain.claim_publication("drain")


def test_batch_ranges_follow_the_host_s_batch_numbers() -> None:
    assert batch_range(100, 125, 0, 10) == (100, 110)
    assert batch_range(100, 125, 2, 10) == (120, 125)
    assert batch_range(100, 125, 3, 10) is None
    assert batch_range(100, 125, -1, 10) is None


def test_only_batches_with_exactly_their_rows_are_published(capsys: pytest.CaptureFixture[str]) -> None:
    rows = {"a": 10, "b": 7, "c": 5}
    batches = [
        CompletedBatch(Path("c"), 20, 5),
        CompletedBatch(Path("a"), 0, 10),
        CompletedBatch(Path("b"), 10, 10),
        CompletedBatch(Path("gone"), 30, 10),
    ]

    def rows_of(path: Path) -> int:
        return rows[str(path)]

    kept = exact_batches(batches, rows_of)
    assert [b.path.name for b in kept] == ["a", "c"]
    err = capsys.readouterr().err
    assert "has 7 of 10 rows" in err
    assert "'gone' not published" in err
