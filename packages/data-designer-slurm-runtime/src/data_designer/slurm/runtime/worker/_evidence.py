"""``requests.json`` of the worker: its routers' request evidence, replaced every :data:`INTERVAL_S` while it
generates and once more, ``final``, before the manifest (or when the worker fails), through the store.

A write that fails is logged, never raised: the evidence explains a run, it decides nothing about its records.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping

from data_designer.slurm.contracts.records import RequestEvidence
from data_designer.slurm.runtime.store import AttemptWriter
from data_designer.slurm.runtime.worker._router import Router

INTERVAL_S = 10.0
"""Seconds between two periodic snapshots."""


class EvidencePublisher:
    """Writes the routers' evidence periodically (a daemon thread) and once finally; one writer of the file."""

    def __init__(self, writer: AttemptWriter, routers: Mapping[str, Router], interval_s: float = INTERVAL_S) -> None:
        self._writer = writer
        self._routers = dict(routers)
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._final = False
        self._thread: threading.Thread | None = None

    def start(self) -> EvidencePublisher:
        if self._routers:
            self._thread = threading.Thread(target=self._loop, name="ddslurm-requests", daemon=True)
            self._thread.start()
        return self

    def evidence(self, *, final: bool) -> RequestEvidence:
        return RequestEvidence(
            shard=self._writer.shard,
            attempt=self._writer.attempt,
            final=final,
            aliases={alias: router.requests.snapshot() for alias, router in sorted(self._routers.items())},
        )

    def publish(self, *, final: bool = False) -> bool:
        """Replace ``requests.json`` (nothing after the final one, nor for a worker without routers)."""
        with self._lock:
            if self._final or not self._routers:
                return False
            self._final = final
            try:
                self._writer.write_requests(self.evidence(final=final))
            except Exception as exc:
                print(f"ddslurm-worker: requests.json not written: {exc}", file=sys.stderr)
                return False
            return True

    def close(self) -> None:
        """The final snapshot (unless written already), and the periodic thread stopped."""
        self._stopped.set()
        self.publish(final=True)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stopped.wait(self._interval_s):
            self.publish()
