"""Checksummed, versioned records on the shared filesystem: write-once, atomically replaced, or appended.

Every record file is ``canonical_json(envelope) + "\\n"`` (:class:`RecordEnvelope`). Three ways to write:

* :func:`write_record_once`: the bytes go to a unique temporary file in the target's directory,
  are fsynced, then ``link(2)``-ed to the final name, which fails if any record is already
  there: an existing record is never replaced, and of concurrent writers exactly one wins.
  ``link(2)`` is atomic on NFS and Lustre; when an NFS reply is lost and the retransmitted
  call answers EEXIST, the temporary file's link count (2) still tells that our link won
  (the recipe of ``open(2)``).
* :func:`replace_record`: temporary file, fsync, ``rename(2)`` over the final name. A reader sees the
  old record or the new one, never a mix. Mutable records have exactly one writer (the holder of
  the claim), so no lock is taken: ``flock`` is unreliable on some Lustre mounts.
* :func:`append_record`: write-once records numbered ``0001.json``, ``0002.json`` ... in a directory;
  concurrent appenders get distinct numbers, nobody's record is lost.

Temporary files are named ``.<final name>.<random>.tmp``: readers ignore names starting with ``.``
(:func:`is_temporary_name`), so a writer that crashed before its rename leaves nothing that counts.

:func:`read_record` re-opens the file every time (no cached handle, no mtime shortcut) and returns a
value, never raising for what it finds on disk: :class:`RecordOk`, :class:`RecordMissing`,
:class:`RecordCorrupt` (not framed as a record, bad envelope, checksum mismatch over the bytes, payload
invalid), :class:`RecordWrongSchema` (an intact record of another schema or version) or
:class:`RecordUnreadable` (the filesystem refused). Only ``RecordOk`` is evidence of anything.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Generic, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ValidationError

from data_designer.slurm.contracts import InternalError, InvalidInputError, UnavailableError
from data_designer.slurm.contracts.records import RecordEnvelope, RecordSchema
from data_designer.slurm.planner import (
    canonical_json,
    canonical_json_data,
    fsync_directory,
    make_directories,
    modes_of_directory,
    write_new_file,
)
from data_designer.slurm.runtime.store._run_files import RunFileRefused, read_run_file

M = TypeVar("M", bound=BaseModel)

Clock = Callable[[], datetime]
"""Returns the current time as an aware datetime; injected wherever a time is recorded."""

DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024
"""Reads stop here: a larger file is reported corrupt instead of being loaded whole."""

_SEQUENCE_NAME = re.compile(r"^([0-9]{4,})\.json$")
_MAX_APPEND_TRIES = 100_000


def system_clock() -> datetime:
    """The wall clock in UTC: the default :data:`Clock`."""
    return datetime.now(UTC)


def format_timestamp(when: datetime) -> str:
    """``when`` in UTC as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``; a naive datetime is a bug."""
    if when.tzinfo is None or when.utcoffset() is None:
        raise InternalError(f"the clock returned a naive datetime {when!r}", code="naive_datetime")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(text: str) -> datetime:
    """An ISO-8601 time as records and Slurm observations write it (``...Z`` or an offset), as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def is_temporary_name(name: str) -> bool:
    """Whether a directory entry is a writer's temporary file (or otherwise hidden): readers skip it."""
    return name.startswith(".")


@dataclass(frozen=True)
class RecordOk(Generic[M]):
    status: ClassVar[Literal["ok"]] = "ok"
    path: Path
    payload: M
    header: RecordEnvelope
    """The envelope's own fields (schema, time, checksum) as read; its ``payload`` is left empty."""

    @property
    def written_at(self) -> datetime | None:
        return self.header.written_at

    @property
    def envelope(self) -> RecordEnvelope:
        """The whole envelope, the payload as JSON data (built on demand: readers rarely need it)."""
        return self.header.model_copy(update={"payload": self.payload.model_dump(mode="json")})


@dataclass(frozen=True)
class RecordMissing:
    status: ClassVar[Literal["missing"]] = "missing"
    path: Path


@dataclass(frozen=True)
class RecordCorrupt:
    status: ClassVar[Literal["corrupt"]] = "corrupt"
    path: Path
    reason: str


@dataclass(frozen=True)
class RecordWrongSchema:
    status: ClassVar[Literal["wrong_schema"]] = "wrong_schema"
    path: Path
    expected: tuple[str, int]
    found: tuple[str, int]


@dataclass(frozen=True)
class RecordUnreadable:
    status: ClassVar[Literal["unreadable"]] = "unreadable"
    path: Path
    reason: str


ReadResult: TypeAlias = RecordOk[M] | RecordMissing | RecordCorrupt | RecordWrongSchema | RecordUnreadable
"""What a read found. Only :class:`RecordOk` is evidence; every other outcome is evidence of nothing."""


@dataclass(frozen=True)
class RecordWritten:
    path: Path
    envelope: RecordEnvelope


@dataclass(frozen=True)
class RecordConflict(Generic[M]):
    """A write-once record already existed (its bytes untouched); ``existing`` is what was read back."""

    path: Path
    existing: ReadResult[M]


@dataclass(frozen=True)
class RecordAppended:
    sequence: int
    path: Path
    envelope: RecordEnvelope


def encode_record(schema: RecordSchema[M], payload: M, *, written_at: datetime | None) -> tuple[bytes, RecordEnvelope]:
    """The exact bytes of a record file (pure) and the envelope they hold: ``canonical_json(envelope) + "\\n"``.

    Assembled in the canonical key order (checksum, payload, schema_name, schema_version, written_at) from the
    payload's canonical JSON, which is encoded once; the checksum is the sha256 of the same bytes without it.
    """
    if not isinstance(payload, schema.model):
        raise InternalError(
            f"payload of record {schema.name!r} is a {type(payload).__name__}, not a {schema.model.__name__}",
            code="record_payload_type",
        )
    plain = payload.model_dump(mode="json")
    when = None if written_at is None else format_timestamp(written_at)
    tail = canonical_json({"schema_name": schema.name, "schema_version": schema.version, "written_at": when})
    body = b'{"payload":' + canonical_json_data(plain) + b"," + tail[1:]
    checksum = hashlib.sha256(body).hexdigest()
    data = _CHECKSUM_PREFIX + checksum.encode("ascii") + b'",' + body[1:] + b"\n"
    envelope = RecordEnvelope(
        schema_name=schema.name, schema_version=schema.version, checksum=checksum, written_at=written_at, payload=plain
    )
    return data, envelope


def decode_record(data: bytes, schema: RecordSchema[M], *, path: Path) -> ReadResult[M]:
    """Check and decode the bytes of a record file (pure); ``path`` only labels the result.

    A record is ``canonical_json(envelope) + "\\n"`` and canonical JSON sorts the envelope's keys as checksum,
    payload, schema_name, schema_version, written_at. So the checksummed body (every field but the checksum) is
    an exact slice of the bytes: the checksum is verified over the bytes as they are on disk, and any changed,
    added or removed byte after it reads as corrupt, without parsing and re-encoding the JSON. Then the envelope's
    fields are validated (schema name and version must be the expected ones) and the payload, parsed once, must be
    a valid instance of the schema's model. Linear in the bytes.
    """
    start = _BODY_START + len(_PAYLOAD_KEY)
    end = data.rfind(_AFTER_PAYLOAD)
    framed = (
        data.startswith(_CHECKSUM_PREFIX)
        and data.startswith(b'",' + _PAYLOAD_KEY, _BODY_START - 2)
        and data.endswith(b"}\n")
        and end > start
    )
    if not framed:
        return RecordCorrupt(path, "not a record: expected canonical JSON of checksum, payload, schema and time")
    try:
        # the envelope's own fields; the payload's bytes are validated against the schema below
        header = RecordEnvelope.model_validate_json(data[:start] + b"{}" + data[end:])
    except ValidationError as exc:
        return RecordCorrupt(path, f"not a record envelope: {exc.error_count()} problem(s)")
    body = b"{" + data[_BODY_START:-1]  # the canonical JSON of every field but the checksum
    if header.checksum != hashlib.sha256(body).hexdigest():
        return RecordCorrupt(path, "checksum mismatch (the bytes were changed after they were written)")
    if (header.schema_name, header.schema_version) != (schema.name, schema.version):
        return RecordWrongSchema(path, (schema.name, schema.version), (header.schema_name, header.schema_version))
    try:
        payload = schema.model.model_validate_json(data[start:end])
    except ValidationError as exc:
        return RecordCorrupt(
            path, f"payload is not a valid {schema.name!r} v{schema.version}: {exc.error_count()} problem(s)"
        )
    return RecordOk(path, payload, header)


_CHECKSUM_PREFIX = b'{"checksum":"'
_BODY_START = len(_CHECKSUM_PREFIX) + 64 + 2
_PAYLOAD_KEY = b'"payload":'
_AFTER_PAYLOAD = b',"schema_name":'


def read_record(path: Path, schema: RecordSchema[M], *, max_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> ReadResult[M]:
    """Open ``path`` afresh and decode it; never raises for what is (or is not) on disk."""
    for retry in (True, False):
        try:
            data = read_run_file(path, max_bytes)
        except RunFileRefused as exc:
            return RecordCorrupt(path, f"is {exc.kind}, not a regular file")
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return RecordMissing(path)
            if exc.errno == errno.ESTALE and retry:  # NFS: the name now points at a new inode; open it again
                continue
            return RecordUnreadable(path, f"{errno.errorcode.get(exc.errno or 0, 'error')}: {exc.strerror}")
        break
    if len(data) > max_bytes:
        return RecordCorrupt(path, f"larger than {max_bytes} bytes")
    return decode_record(data, schema, path=path)


def write_record_once(
    path: Path, schema: RecordSchema[M], payload: M, *, clock: Clock = system_clock, operation: str = "record.write"
) -> RecordWritten | RecordConflict[M]:
    """Create ``path`` holding the record unless any file exists there; never replaces, never half-visible."""
    data, envelope = encode_record(schema, payload, written_at=clock())
    if publish_bytes_once(path, data, operation=operation):
        return RecordWritten(path, envelope)
    return RecordConflict(path, read_record(path, schema))


def replace_record(
    path: Path, schema: RecordSchema[M], payload: M, *, clock: Clock = system_clock, operation: str = "record.write"
) -> RecordWritten:
    """Atomically replace (or create) the mutable record at ``path``; readers see old or new, never a mix."""
    data, envelope = encode_record(schema, payload, written_at=clock())
    publish_bytes_replace(path, data, operation=operation)
    return RecordWritten(path, envelope)


def append_record(
    directory: Path,
    schema: RecordSchema[M],
    payload: M,
    *,
    clock: Clock = system_clock,
    operation: str = "record.write",
) -> RecordAppended:
    """Write the record as the next free ``NNNN.json`` in ``directory`` (write-once; distinct under races)."""
    data, envelope = encode_record(schema, payload, written_at=clock())
    sequence = max(sequence_numbers(directory), default=0) + 1
    for _ in range(_MAX_APPEND_TRIES):
        path = directory / f"{sequence:04d}.json"
        if publish_bytes_once(path, data, operation=operation):
            return RecordAppended(sequence, path, envelope)
        sequence += 1
    raise InternalError(f"no free record number in {str(directory)!r}", code="append_exhausted", file=str(directory))


def sequence_numbers(directory: Path) -> list[int]:
    """The numbers of the appended records in ``directory`` (ascending; temporary files and strays skipped)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise _unavailable(directory, exc, "record.list") from exc
    numbers = []
    for name in names:
        match = _SEQUENCE_NAME.fullmatch(name)
        if match and f"{int(match.group(1)):04d}" == match.group(1) and int(match.group(1)) > 0:
            numbers.append(int(match.group(1)))
    return sorted(numbers)


def publish_bytes_once(path: Path, data: bytes, *, operation: str = "record.write", mode: int | None = None) -> bool:
    """Create ``path`` with ``data`` via temp file + fsync + ``link(2)``; False when something is already there.

    ``mode`` defaults to the file mode of the directory's workspace (``modes_of_directory``).
    """
    temp = _write_temp(path, data, operation, mode)
    try:
        try:
            os.link(temp, path)
        except FileExistsError:
            # A lost NFS reply can turn our own successful link into EEXIST: the link count tells.
            if os.stat(temp).st_nlink < 2:
                return False
        fsync_directory(path.parent)
        return True
    except OSError as exc:
        raise _write_error(path, exc, operation) from exc
    finally:
        _unlink_quietly(temp)


def publish_bytes_replace(path: Path, data: bytes, *, operation: str = "record.write", mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` via temp file + fsync + ``rename(2)``."""
    temp = _write_temp(path, data, operation, mode)
    try:
        os.replace(temp, path)
        fsync_directory(path.parent)
    except OSError as exc:
        _unlink_quietly(temp)
        raise _write_error(path, exc, operation) from exc


def _write_temp(path: Path, data: bytes, operation: str, mode: int | None) -> Path:
    modes = modes_of_directory(path.parent)
    try:
        make_directories(path.parent, modes)
    except OSError as exc:
        raise _write_error(path, exc, operation) from exc
    temp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    try:
        write_new_file(temp, data, modes.file if mode is None else mode)
    except OSError as exc:
        _unlink_quietly(temp)
        raise _write_error(path, exc, operation) from exc
    return temp


def _unlink_quietly(path: Path) -> None:
    # Already gone, or the directory went away: nothing a reader would count is left behind.
    with contextlib.suppress(OSError):
        os.unlink(path)


def _write_error(path: Path, exc: OSError, operation: str) -> InvalidInputError | UnavailableError:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return InvalidInputError(
            f"cannot write {str(path)!r}: {exc.strerror}",
            code="permission_denied",
            operation=operation,
            file=str(path),
            hint="choose a writable workspace",
        )
    return _unavailable(path, exc, operation)


def _unavailable(path: Path, exc: OSError, operation: str) -> UnavailableError:
    hint = "the workspace filesystem must support hard links" if exc.errno in (errno.EMLINK, errno.ENOTSUP) else None
    return UnavailableError(
        f"cannot access {str(path)!r}: {exc.strerror}",
        code="filesystem_unavailable",
        operation=operation,
        file=str(path),
        hint=hint,
    )
