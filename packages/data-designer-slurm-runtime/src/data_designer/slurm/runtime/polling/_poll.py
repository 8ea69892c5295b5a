"""``poll``: the checks of a wait, a sleep between two, until the caller breaks or the deadline passes."""

from __future__ import annotations

import math
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
    max_interval_s: float = math.inf,
    clip: bool = True,
) -> Iterator[int]:
    """Yield each check's number (1, 2, ...): the first at once, each next after a sleep. The caller breaks when its
    check holds; the loop ends once ``timeout_s`` passed (counted from ``since``, else the first check; ``None``:
    never). A sleep starts at ``interval_s``, grows by ``backoff`` up to ``max_interval_s`` and never ends past the
    deadline: the last is shortened to end there (``clip=False``: not taken, so the last check is the last a whole
    interval allows). ``clock`` reads floats or datetimes; ``None`` counts the seconds slept instead (for callers
    whose only seam is the sleep). Without a deadline the clock is never read."""
    begun = since if since is not None or clock is None or timeout_s is None else clock()
    slept, pause, check = 0.0, interval_s, 1
    while True:
        yield check
        check += 1
        left = math.inf
        if timeout_s is not None:
            gone = slept if clock is None or begun is None else _elapsed(clock(), begun)
            left = timeout_s - gone
        if left <= 0 or (not clip and pause > left):
            return
        sleep(min(pause, left))
        slept = slept + pause if pause < left else math.inf  # slept up to the deadline: the next check is the last
        pause = min(pause * backoff, max_interval_s)


def _elapsed(now: Moment, begun: Moment) -> float:
    gone = now - begun
    return gone.total_seconds() if isinstance(gone, timedelta) else gone
