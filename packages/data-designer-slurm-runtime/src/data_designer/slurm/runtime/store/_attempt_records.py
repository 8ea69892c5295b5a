"""What the allocation writes into an attempt directory: the verbs of the supervisor and the client worker, which
the test fixtures write through too (``docs/architecture/run-directory.md`` names the verb of every file).

:class:`AttemptWriter` is bound to one attempt (layout, shard, attempt) and a clock. Each verb keeps its file's
protocol (``_record_io``): the claim, ``endpoints.json``, the ports, the output parts and manifest,
``client-error.json`` and ``status.json`` are written once (False: something is already there); ``attempt.json``,
``heartbeat.json`` and ``progress.json`` have one writer each and are replaced atomically; logs are appended.
Directories are made as the processes have always made them (``mkdir -p`` under the umask the supervisor set).

``durable=False`` is for fixtures that write thousands of attempts (``runtime.testing.write_run_directory``): the
same bytes, but every file created exclusively in place (mode 0644 less the umask, missing directories made on the
way), without the temporary file, fsync and ``link(2)``; any file already there raises FileExistsError.
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
    StatusRecord,
    WorkerProgress,
)
from data_designer.slurm.runtime._launch import port_record_name
from data_designer.slurm.runtime.store._claims import AlreadyClaimed, AttemptClaim, Claimed, claim, next_attempt_number
from data_designer.slurm.runtime.store._files import write_all
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
    """The writer of one attempt's directory (``durable=False``: fixtures only, see the module docstring)."""

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
        path = self.layout.claim(self.shard, self.attempt)
        mine = owner.model_copy(update={"attempt": self.attempt})
        if not self.durable:
            _create(path, encode_record(CLAIM_SCHEMA, mine, written_at=mine.time)[0])
            return Claimed(path, mine)
        path.parent.mkdir(parents=True, exist_ok=True)
        return claim(path, mine)

    def write_attempt(self, record: AttemptRecord) -> None:
        self._replace(
            self.layout.attempt_record(self.shard, self.attempt), ATTEMPT_SCHEMA, record, "supervisor.attempt"
        )

    def write_heartbeat(self, record: HeartbeatRecord) -> None:
        self._replace(self.layout.heartbeat(self.shard, self.attempt), HEARTBEAT_SCHEMA, record, "heartbeat")

    def write_progress(self, record: WorkerProgress) -> None:
        self._replace(self.layout.progress(self.shard, self.attempt), PROGRESS_SCHEMA, record, "worker.progress")

    def make_ports_dir(self) -> Path:
        """``ports/``, made for the launchers, which publish their port records there themselves (``_launch``)."""
        path = self.layout.ports_dir(self.shard, self.attempt)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def write_port(self, record: PortRecord) -> bool:
        """A launcher's port record, as ``_launch`` writes it (fixtures: the launcher writes its own)."""
        name = port_record_name(record.alias, record.replica, record.task)
        return self._once(self.layout.ports_dir(self.shard, self.attempt) / name, PORT_SCHEMA, record, "record.write")

    def write_endpoints(self, record: EndpointsRecord) -> bool:
        return self._once(self.layout.endpoints(self.shard, self.attempt), ENDPOINTS_SCHEMA, record, "record.write")

    def make_worker_home(self) -> Path:
        """The client worker's ``home/`` (``$HOME`` of the host: its settings and caches)."""
        path = self.layout.worker_home(self.shard, self.attempt)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def publish_part(self, part: int, data: bytes, *, records: int, first_index: int) -> OutputPart | None:
        """``output/part-<part>.parquet`` holding ``data`` once, as the manifest lists it; None: it exists already."""
        path = self.layout.output_part(self.shard, self.attempt, part)
        if not self._publish(path, data, "worker.write_part"):
            return None
        digest = hashlib.sha256(data).hexdigest()
        return OutputPart(path=path.name, records=records, first_index=first_index, sha256=digest, bytes=len(data))

    def publish_manifest(self, manifest: OutputManifest) -> bool:
        """``output/manifest.json``, written last: after every part it lists."""
        path = self.layout.output_manifest(self.shard, self.attempt)
        return self._once(path, MANIFEST_SCHEMA, manifest, "worker.write_manifest")

    def write_client_error(self, record: ClientErrorRecord) -> bool:
        path = self.layout.client_error(self.shard, self.attempt)
        return self._once(path, CLIENT_ERROR_SCHEMA, record, "worker.client_error")

    def write_status(self, record: StatusRecord) -> bool:
        return self._once(self.layout.status(self.shard, self.attempt), STATUS_SCHEMA, record, "supervisor.status")

    def publish_file(self, name: str, data: bytes) -> bool:
        """``<attempt>/<name>`` (one plain component) holding ``data`` once: a file the layout has no name for, such
        as a test stand-in's evidence (``runtime.testing.stand_in_worker``)."""
        path = self.layout.attempt_dir(self.shard, self.attempt) / check_component(name, "file name")
        return self._publish(path, data, "record.write")

    def open_log(self, step: str) -> BinaryIO:
        """``logs/<step>.log`` opened for appending (a child's stdout and stderr), its directory made."""
        path = self.layout.log_file(self.shard, self.attempt, step)
        try:
            return path.open("ab")
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            return path.open("ab")

    def append_log(self, step: str, text: str) -> None:
        with self.open_log(step) as stream:
            stream.write(text.encode("utf-8"))

    def _once(self, path: Path, schema: RecordSchema[M], payload: M, operation: str) -> bool:
        return self._publish(path, encode_record(schema, payload, written_at=self.clock())[0], operation)

    def _publish(self, path: Path, data: bytes, operation: str) -> bool:
        if not self.durable:
            _create(path, data)
            return True
        return publish_bytes_once(path, data, operation=operation)

    def _replace(self, path: Path, schema: RecordSchema[M], payload: M, operation: str) -> None:
        data = encode_record(schema, payload, written_at=self.clock())[0]
        if self.durable:
            publish_bytes_replace(path, data, operation=operation)
        else:
            _create(path, data)


def claim_next_attempt(layout: RunLayout, shard: int, owner: ClaimOwner) -> AttemptClaim:
    """Claim the next free attempt number of ``shard`` for ``owner`` (``next_attempt_number``)."""
    return next_attempt_number(layout.attempts_dir(shard), owner)


def write_batch_log(layout: RunLayout, job_name: str, array_task: int, stream: str, data: bytes) -> None:
    """A fixture's ``slurm-<job name>_<task>.<stream>`` (Slurm writes the real ones), created exclusively."""
    _create(layout.batch_log(job_name, array_task, stream), data)


def _create(path: Path, data: bytes) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileNotFoundError:
        os.makedirs(path.parent, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
