"""``poll``: the checks of a wait, a sleep between two, until the caller stops or the deadline passes.

A caller writes its check as the body of ``for check in poll(...)``: ``break`` (or ``return``) when it holds;
the loop ending means the deadline passed (``for ... else`` reads that). No sleep runs past the deadline:
the last one is shortened to end at it, so the last check is made there (``clip=False``: it is not taken,
so the last check is the last one a whole interval before the deadline allows). The clock is injected (a
float or a ``datetime`` clock; ``None`` counts the seconds slept, for callers whose only seam is a sleep),
and it is read only to decide whether to sleep again: never without a deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import TypeVar

Moment = TypeVar("Moment", float, datetime)


def poll(
    timeout_s: float | None,
    interval_s: float,
    *,
    clock: Callable[[], Moment] | None,
    sleep: Callable[[float], None] = time.sleep,
    since: Moment | None = None,
    backoff: float = 1.0,
    max_interval_s: float = float("inf"),
    clip: bool = True,
) -> Iterator[int]:
    """Yield 1, 2, ...: the number of each check, the first at once, each next one after a sleep.

    ``timeout_s`` counts from ``since`` (default: the first check), ``None`` polls until the caller stops. The
    sleep starts at ``interval_s`` and is multiplied by ``backoff`` after each, up to ``max_interval_s``.
    """
    begun = since if since is not None or clock is None or timeout_s is None else clock()
    slept, pause, check = 0.0, interval_s, 1
    while True:
        yield check
        check += 1
        if timeout_s is None:  # no deadline: the clock is never read
            sleep(pause)
        else:
            left = timeout_s - (slept if clock is None or begun is None else _seconds(begun, clock()))
            if left <= 0 or (not clip and pause > left):
                return
            sleep(min(pause, left))
            slept = timeout_s if pause >= left else slept + pause
        pause = min(pause * backoff, max_interval_s)


def _seconds(begun: Moment, now: Moment) -> float:
    gone = now - begun
    return gone.total_seconds() if isinstance(gone, timedelta) else gone
