"""The client worker's drain: on a signal, stop admitting work, let in-flight requests finish, publish what is done.

The supervisor forwards the time-limit warning to the worker as ``SIGUSR1`` and a termination (``scancel``,
preemption, requeue, the time limit itself) as ``SIGTERM``; Slurm may also signal the worker directly. The
first signal starts one drain (:class:`Drain`); later ones can only make it hurry.

* ``SIGUSR1`` (the warning, servers still up): every model router holds new requests (they are never sent),
  requests already sent run to their end, and the drain has *settled* once every router has had nothing
  outstanding, and no batch has completed, for ``settle_s``: the batches whose requests were all in flight
  have been written by then. An alias reached without a router (an external endpoint) cannot be watched, so
  a drain with one waits for the deadline. The deadline is the grace (the plan's ``drain_grace_s``) minus
  a reserve for publication.
* ``SIGTERM``: Slurm is terminating the job's steps (the servers) at the same moment, so nothing in flight
  can still finish: publish at once, before ``KillWait`` runs out.

Publication takes the completed batches (the host's ``batch_NNNNN.parquet`` files reported by its
``on_batch_complete`` callback) that hold exactly the rows their index range needs; a batch with dropped
rows is left for the next attempt. Exactly one of the drain and the normal end publishes
(:meth:`Drain.claim_publication`); the drain ends the process with :data:`EXIT_DRAINED` once its manifest is
written, without waiting for the host's threads.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Protocol

from data_designer.slurm.contracts.records import EXIT_CLIENT_ERROR, DrainSignal
from data_designer.slurm.runtime.store import system_clock

DEFAULT_SETTLE_S = 1.0
_POLL_S = 0.05
_SIGNALS: dict[int, DrainSignal] = {signal.SIGUSR1: "SIGUSR1", signal.SIGTERM: "SIGTERM"}


class Gate(Protocol):
    """What the drain needs from a model router: stop forwarding new requests, and count those in flight."""

    def hold(self) -> None: ...

    @property
    def outstanding(self) -> int: ...


@dataclass(frozen=True)
class CompletedBatch:
    """A batch file the host finished, and the global indices its rows must have."""

    path: Path
    first_index: int
    expected_rows: int


@dataclass(frozen=True)
class DrainOutcome:
    signal: DrainSignal
    requested_at: datetime
    settled: bool
    batches: tuple[CompletedBatch, ...]


def batch_range(item_start: int, item_stop: int, number: int, batch_size: int) -> tuple[int, int] | None:
    """The global ``[start, stop)`` of batch ``number`` of a create call over ``[item_start, item_stop)``."""
    start = item_start + number * batch_size
    if number < 0 or start >= item_stop:
        return None
    return start, min(start + batch_size, item_stop)


class Drain:
    """One worker's drain state; :meth:`install` the signal handlers, :meth:`start` the thread that acts."""

    def __init__(
        self,
        *,
        warning_grace_s: float,
        settle_s: float = DEFAULT_SETTLE_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.warning_grace_s = warning_grace_s
        self.settle_s = settle_s
        self._monotonic = monotonic
        # Reentrant: the signal handler runs request() on the main thread, maybe while it holds the lock.
        self._lock = threading.RLock()
        self._requested = threading.Event()
        self._hurry = threading.Event()
        self._signal: DrainSignal | None = None
        self._requested_at: datetime | None = None
        self._requested_mono = 0.0
        self._gates: list[Gate] = []
        self._unwatched = False
        self._batches: list[CompletedBatch] = []
        self._last_batch_mono = 0.0
        self._published_by: str | None = None

    # -- inputs ----------------------------------------------------------------------------------------------

    def install(self) -> None:
        for signum in _SIGNALS:
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.request(_SIGNALS[signum])

    def request(self, what: DrainSignal) -> None:
        """Start the drain (first call), or make a running warning drain publish at once (a later SIGTERM)."""
        with self._lock:
            if self._signal is None:
                self._signal = what
                self._requested_at = system_clock()
                self._requested_mono = self._monotonic()
                for gate in self._gates:
                    gate.hold()
                self._requested.set()
            if what == "SIGTERM":
                self._hurry.set()

    def watch(self, gates: Sequence[Gate], *, unwatched: bool) -> None:
        """The routers in front of the model endpoints; ``unwatched``: some alias is reached without one."""
        with self._lock:
            self._gates = list(gates)
            self._unwatched = unwatched
            if self._signal is not None:
                for gate in self._gates:
                    gate.hold()

    def batch_done(self, batch: CompletedBatch) -> None:
        with self._lock:
            self._batches.append(batch)
            self._last_batch_mono = self._monotonic()

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    def claim_publication(self, by: str) -> bool:
        """True for the first caller (the drain or the normal end); everyone later must not publish."""
        with self._lock:
            if self._published_by is not None:
                return False
            self._published_by = by
            return True

    # -- the drain -------------------------------------------------------------------------------------------

    def wait_until_done(self) -> DrainOutcome:
        """Block until a signal arrives, then until the drain settles or its deadline passes."""
        self._requested.wait()
        settled = False
        if not self._hurry.is_set():
            reserve = min(10.0, self.warning_grace_s * 0.25)
            deadline = self._requested_mono + max(0.0, self.warning_grace_s - reserve)
            settled = self._settle(deadline)
        with self._lock:
            assert self._signal is not None
            assert self._requested_at is not None
            return DrainOutcome(self._signal, self._requested_at, settled, tuple(self._batches))

    def _settle(self, deadline: float) -> bool:
        idle_since: float | None = None
        while not self._hurry.is_set():
            now = self._monotonic()
            if now >= deadline:
                return False
            with self._lock:
                idle = not self._unwatched and all(gate.outstanding == 0 for gate in self._gates)
                last_batch = self._last_batch_mono
            if idle:
                idle_since = now if idle_since is None else idle_since
                if now - max(idle_since, last_batch) >= self.settle_s:
                    return True
            else:
                idle_since = None
            self._hurry.wait(_POLL_S)
        return False

    def start(self, publish: Callable[[DrainOutcome], int]) -> threading.Thread:
        """A daemon thread that waits for the drain, publishes through ``publish`` (its exit code) and exits."""

        def run() -> None:
            outcome = self.wait_until_done()
            if not self.claim_publication("drain"):
                return  # the normal end publishes; the process exits with its code
            try:
                code = publish(outcome)
            except BaseException:
                traceback.print_exc()
                code = EXIT_CLIENT_ERROR
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

        thread = threading.Thread(target=run, name="ddslurm-drain", daemon=True)
        thread.start()
        return thread


def exact_batches(batches: Sequence[CompletedBatch], rows_of: Callable[[Path], int]) -> list[CompletedBatch]:
    """The batches holding exactly the rows their range needs, in index order (others are left out)."""
    kept = []
    for batch in sorted(batches, key=lambda item: item.first_index):
        try:
            rows = rows_of(batch.path)
        except Exception as exc:  # an unreadable batch file: its indices are left for the next attempt
            print(f"ddslurm-worker: batch {str(batch.path)!r} not published: {exc}", file=sys.stderr)
            continue
        if rows == batch.expected_rows:
            kept.append(batch)
        else:
            print(
                f"ddslurm-worker: batch {str(batch.path)!r} has {rows} of {batch.expected_rows} rows; "
                "its indices are left for the next attempt",
                file=sys.stderr,
            )
    return kept
