"""``runtime.polling.poll`` against fake clocks: when it checks, how long it sleeps, when it stops."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from data_designer.slurm.runtime.polling import poll


class FakeTime:
    """A float clock that only a sleep moves (by ``late`` more than asked), recording every sleep."""

    def __init__(self, late: float = 0.0) -> None:
        self.now, self.late = 100.0, late
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds + self.late


def test_the_first_check_is_at_once_and_the_last_sleep_ends_at_the_deadline() -> None:
    t = FakeTime()
    checks = [(check, t.now) for check in poll(2.5, 1.0, clock=t.clock, sleep=t.sleep)]
    assert checks == [(1, 100.0), (2, 101.0), (3, 102.0), (4, 102.5)]
    assert t.sleeps == [1.0, 1.0, 0.5]


def test_without_clip_a_sleep_that_would_pass_the_deadline_is_not_taken() -> None:
    t = FakeTime()
    assert list(poll(2.5, 1.0, clock=t.clock, sleep=t.sleep, clip=False)) == [1, 2, 3]
    assert t.sleeps == [1.0, 1.0]
    t = FakeTime()
    assert list(poll(2.0, 1.0, clock=t.clock, sleep=t.sleep, clip=False)) == [1, 2, 3]  # a whole interval fits


@pytest.mark.parametrize("timeout_s", [0.0, -1.0])
def test_a_deadline_already_passed_leaves_one_check_and_no_sleep(timeout_s: float) -> None:
    t = FakeTime()
    assert list(poll(timeout_s, 1.0, clock=t.clock, sleep=t.sleep)) == [1]
    assert t.sleeps == []


def test_the_caller_stops_it_and_nothing_more_is_slept() -> None:
    t = FakeTime()
    for check in poll(60.0, 5.0, clock=t.clock, sleep=t.sleep):
        if check == 3:
            break
    assert t.sleeps == [5.0, 5.0]


def test_the_interval_grows_by_the_backoff_up_to_its_cap() -> None:
    t = FakeTime()
    assert len(list(poll(10.0, 0.5, clock=t.clock, sleep=t.sleep, backoff=2.0, max_interval_s=2.0))) == 8
    assert t.sleeps == [0.5, 1.0, 2.0, 2.0, 2.0, 2.0, 0.5]


def test_a_late_sleep_is_read_from_the_clock() -> None:
    t = FakeTime(late=0.25)
    assert list(poll(2.0, 1.0, clock=t.clock, sleep=t.sleep)) == [1, 2, 3]
    assert t.sleeps == [1.0, 0.75]  # 1.25 s had passed: the next sleep ends at the deadline
    assert t.now == 102.25


def test_the_timeout_counts_from_since_on_a_datetime_clock() -> None:
    moments = iter(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=s) for s in (3.0, 4.5, 5.0))
    sleeps: list[float] = []
    started = datetime(2026, 1, 1, tzinfo=UTC)
    assert list(poll(5.0, 1.5, clock=lambda: next(moments), sleep=sleeps.append, since=started)) == [1, 2, 3]
    assert sleeps == [1.5, 0.5]  # read at 3 s, 4.5 s (the 0.5 s left), 5 s


def test_without_a_clock_the_seconds_slept_count() -> None:
    sleeps: list[float] = []
    assert list(poll(3.0, 2.0, clock=None, sleep=sleeps.append)) == [1, 2, 3]
    assert sleeps == [2.0, 1.0]


def test_without_a_deadline_the_clock_is_never_read() -> None:
    def clock() -> float:
        raise AssertionError("read")

    sleeps: list[float] = []
    for check in poll(None, 0.5, clock=clock, sleep=sleeps.append, backoff=3.0, max_interval_s=2.0):
        if check == 5:
            break
    assert sleeps == [0.5, 1.5, 2.0, 2.0]
