"""The supervisor's heartbeat: ``heartbeat.json`` atomically replaced every few seconds from a thread."""

from __future__ import annotations

import os
import socket
import sys
import threading

from data_designer.slurm.contracts.records import HeartbeatRecord, Phase
from data_designer.slurm.runtime.store import AttemptWriter

DEFAULT_HEARTBEAT_S = 5.0


class Heartbeat:
    """Beats at once on :meth:`start`, then every ``interval_s`` and on every phase change, until :meth:`stop`."""

    def __init__(self, writer: AttemptWriter, *, interval_s: float = DEFAULT_HEARTBEAT_S) -> None:
        self._writer = writer
        self._interval_s = interval_s
        self._phase: Phase = "starting"
        self._beat = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    @property
    def interval_s(self) -> float:
        return self._interval_s

    def start(self) -> None:
        self.beat()
        self._thread.start()

    def set_phase(self, phase: Phase) -> None:
        with self._lock:
            self._phase = phase
        self.beat()

    def beat(self) -> None:
        with self._lock:
            record = HeartbeatRecord(
                pid=os.getpid(),
                hostname=socket.gethostname(),
                phase=self._phase,
                beat=self._beat,
                time=self._writer.clock(),
            )
            self._beat += 1
            try:
                self._writer.write_heartbeat(record)
            except Exception as exc:  # a missed beat is evidence for observers, never a reason to stop the attempt
                print(f"supervisor: heartbeat not written: {exc}", file=sys.stderr)

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            self.beat()
