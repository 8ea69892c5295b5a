"""What the allocation writes into an attempt directory: the verbs of the supervisor and the client worker, which
the test fixtures write through too (``docs/architecture/run-directory.md`` names the verb of every file).

Each verb of :class:`AttemptWriter` keeps its file's protocol (``_record_io``): write-once (False: something is
there already), replaced atomically (one writer each: ``attempt.json``, ``heartbeat.json``, ``progress.json``, ``requests.json``) or
appended (logs); directories are made as the processes always made them (``mkdir -p`` under the supervisor's umask).
``durable=False`` is for fixtures that write thousands of attempts (``testing.write_run_directory``): the same bytes,
each file created exclusively in place (0644 less the umask) without temporary file, fsync or ``link(2)``, and
FileExistsError for any file already there.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, TypeVar

from pydantic import BaseModel

from data_designer.slurm.contracts.records import (
    ATTEMPT_SCHEMA,
    CLAIM_SCHEMA,
    CLIENT_ERROR_SCHEMA,
    ENDPOINTS_SCHEMA,
    HEARTBEAT_SCHEMA,
    MANIFEST_SCHEMA,
    PORT_SCHEMA,
    PROGRESS_SCHEMA,
    REQUESTS_SCHEMA,
    SERVER_METRICS_SCHEMA,
    STATUS_SCHEMA,
    AttemptRecord,
    ClaimOwner,
    ClientErrorRecord,
    EndpointsRecord,
    HeartbeatRecord,
    OutputManifest,
    OutputPart,
    PortRecord,
    RecordSchema,
    RequestEvidence,
    ServerSamplesRecord,
    StatusRecord,
    WorkerProgress,
)
from data_designer.slurm.planner import write_all
from data_designer.slurm.runtime._launch import port_record_name
from data_designer.slurm.runtime.store._claims import AlreadyClaimed, AttemptClaim, Claimed, claim, next_attempt_number
from data_designer.slurm.runtime.store._layout import RunLayout, check_component
from data_designer.slurm.runtime.store._record_io import (
    Clock,
    encode_record,
    publish_bytes_once,
    publish_bytes_replace,
    system_clock,
)

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class AttemptWriter:
    """The one writer of one attempt's directory (``durable=False``: fixtures only, see the module docstring)."""

    layout: RunLayout
    shard: int
    attempt: int
    clock: Clock = system_clock
    durable: bool = True

    def at(self, when: datetime) -> AttemptWriter:
        """This writer stamping its records with ``when`` (a fixture replaying a timeline)."""
        return replace(self, clock=lambda: when)

    def claim(self, owner: ClaimOwner) -> Claimed | AlreadyClaimed:
        """Take this attempt's ``claim`` for ``owner`` (its ``attempt`` set to this one) unless anyone holds it."""
        path, mine = self.layout.claim(*self._key), owner.model_copy(update={"attempt": self.attempt})
        if not self.durable:
            _create(path, encode_record(CLAIM_SCHEMA, mine, written_at=mine.time)[0])
            return Claimed(path, mine)
        path.parent.mkdir(parents=True, exist_ok=True)
        return claim(path, mine)

    def write_attempt(self, record: AttemptRecord) -> None:
        self._record(self.layout.attempt_record(*self._key), ATTEMPT_SCHEMA, record, "supervisor.attempt", True)

    def write_heartbeat(self, record: HeartbeatRecord) -> None:
        self._record(self.layout.heartbeat(*self._key), HEARTBEAT_SCHEMA, record, "heartbeat", True)

    def write_progress(self, record: WorkerProgress) -> None:
        self._record(self.layout.progress(*self._key), PROGRESS_SCHEMA, record, "worker.progress", True)

    def write_requests(self, record: RequestEvidence) -> None:
        """``requests.json``: the worker's request evidence (bounded; replaced periodically and at its end)."""
        self._record(self.layout.requests(*self._key), REQUESTS_SCHEMA, record, "worker.requests", True)

    def write_server_metrics(self, record: ServerSamplesRecord) -> None:
        """``server-metrics.json``: the replicas' ``/metrics`` samples (the supervisor's scraper; replaced)."""
        path = self.layout.server_metrics(*self._key)
        self._record(path, SERVER_METRICS_SCHEMA, record, "supervisor.server_metrics", True)

    def make_ports_dir(self) -> Path:
        """``ports/``, where the launchers publish their port records themselves (``runtime/_launch.py``)."""
        return _make(self.layout.ports_dir(*self._key))

    def write_port(self, record: PortRecord) -> bool:
        """A launcher's port record, as ``_launch`` writes it (for fixtures)."""
        path = self.layout.ports_dir(*self._key) / port_record_name(record.alias, record.replica, record.task)
        return self._record(path, PORT_SCHEMA, record, "record.write")

    def write_endpoints(self, record: EndpointsRecord) -> bool:
        return self._record(self.layout.endpoints(*self._key), ENDPOINTS_SCHEMA, record, "record.write")

    def make_worker_home(self) -> Path:
        return _make(self.layout.worker_home(*self._key))

    def publish_part(self, part: int, data: bytes, *, records: int, first_index: int) -> OutputPart | None:
        """``output/part-<part>.parquet`` holding ``data`` once, as the manifest lists it; None: it exists already."""
        path = self.layout.output_part(*self._key, part)
        if not self._put(path, data, "worker.write_part"):
            return None
        digest = hashlib.sha256(data).hexdigest()
        return OutputPart(path=path.name, records=records, first_index=first_index, sha256=digest, bytes=len(data))

    def publish_manifest(self, manifest: OutputManifest) -> bool:
        """``output/manifest.json``, written last: after every part it lists."""
        return self._record(self.layout.output_manifest(*self._key), MANIFEST_SCHEMA, manifest, "worker.write_manifest")

    def write_client_error(self, record: ClientErrorRecord) -> bool:
        return self._record(self.layout.client_error(*self._key), CLIENT_ERROR_SCHEMA, record, "worker.client_error")

    def write_status(self, record: StatusRecord) -> bool:
        return self._record(self.layout.status(*self._key), STATUS_SCHEMA, record, "supervisor.status")

    def publish_file(self, name: str, data: bytes) -> bool:
        """``<attempt>/<name>`` (one plain component) once: a file the layout has no name for (a stand-in's evidence)."""
        return self._put(self.layout.attempt_dir(*self._key) / check_component(name, "file name"), data, "record.write")

    def open_log(self, step: str) -> BinaryIO:
        """``logs/<step>.log`` opened for appending (a child's stdout and stderr), its directory made."""
        path = self.layout.log_file(*self._key, step)
        try:
            return path.open("ab")
        except FileNotFoundError:
            _make(path.parent)
            return path.open("ab")

    def append_log(self, step: str, text: str) -> None:
        with self.open_log(step) as stream:
            stream.write(text.encode("utf-8"))

    @property
    def _key(self) -> tuple[int, int]:
        return self.shard, self.attempt

    def _record(self, path: Path, schema: RecordSchema[M], payload: M, operation: str, replace: bool = False) -> bool:
        return self._put(path, encode_record(schema, payload, written_at=self.clock())[0], operation, replace)

    def _put(self, path: Path, data: bytes, operation: str, replace: bool = False) -> bool:
        if not self.durable:
            _create(path, data)
        elif replace:
            publish_bytes_replace(path, data, operation=operation)
        else:
            return publish_bytes_once(path, data, operation=operation)
        return True


def claim_next_attempt(layout: RunLayout, shard: int, owner: ClaimOwner) -> AttemptClaim:
    """Claim the next free attempt number of ``shard`` for ``owner`` (a retry, or a requeued task's)."""
    return next_attempt_number(layout.attempts_dir(shard), owner)


def write_batch_log(layout: RunLayout, job_name: str, array_task: int, stream: str, data: bytes) -> None:
    """A fixture's ``slurm-<job name>_<task>.<stream>`` (Slurm writes the real ones), created exclusively."""
    _create(layout.batch_log(job_name, array_task, stream), data)


def _make(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _create(path: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:
        fd = os.open(_make(path.parent) / path.name, flags, 0o644)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
