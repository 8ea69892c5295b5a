"""An image file's sha256, computed once per file identity and cached beside its registry entry.

The identity is (inode, size, mtime in ns): not the device number, which differs between the nodes that mount one
shared filesystem. :func:`cached_digest` stats the file; when ``digests/<inode>-<size>-<mtime_ns>.json`` exists it
is the answer (no byte of the image read); otherwise the file is hashed (streamed in 1 MiB reads, the identity
checked again afterwards so a file that changed while being read is never cached) and the record written once.
Touching or appending to the image changes its identity: exactly one re-hash follows.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import NotFoundError, UnavailableError
from data_designer.slurm.contracts.records import DIGEST_SCHEMA, DigestRecord, FileIdentity
from data_designer.slurm.runtime.store import (
    Clock,
    FileModes,
    RecordOk,
    make_directories,
    read_record,
    system_clock,
    write_record_once,
)

CHUNK = 1 << 20
_OPERATION = "images.digest"


@dataclass(frozen=True)
class DigestLookup:
    sha256: str
    identity: FileIdentity
    hashed: bool
    """Whether the bytes were read now (False: the cached record of this identity answered)."""


def file_identity(path: Path) -> FileIdentity:
    """The identity of ``path`` (NotFoundError when it is gone, UnavailableError when it cannot be stat'ed)."""
    try:
        info = os.stat(path)
    except FileNotFoundError as exc:
        raise NotFoundError(
            f"image file {str(path)!r} does not exist",
            code="image_missing",
            operation=_OPERATION,
            file=str(path),
            hint="restore the file, or register the image again with 'data-designer slurm image add'",
        ) from exc
    except OSError as exc:
        raise UnavailableError(
            f"cannot stat image file {str(path)!r}: {exc.strerror}",
            code="filesystem_unavailable",
            operation=_OPERATION,
            file=str(path),
        ) from exc
    return FileIdentity(inode=info.st_ino, size=info.st_size, mtime_ns=info.st_mtime_ns)


def digest_file_name(identity: FileIdentity) -> str:
    return f"{identity.inode}-{identity.size}-{identity.mtime_ns}.json"


def cached_digest(
    path: Path, cache_dir: Path, modes: FileModes | None = None, *, clock: Clock = system_clock
) -> DigestLookup:
    """The sha256 of ``path``'s bytes: from the cache when its identity is known there, else hashed and cached."""
    identity = file_identity(path)
    record_path = cache_dir / digest_file_name(identity)
    found = read_record(record_path, DIGEST_SCHEMA)
    if isinstance(found, RecordOk) and found.payload.identity == identity:
        return DigestLookup(found.payload.sha256, identity, hashed=False)
    sha256 = hash_file(path)
    after = file_identity(path)
    if after != identity:
        raise UnavailableError(
            f"image file {str(path)!r} changed while it was hashed",
            code="image_changed",
            operation=_OPERATION,
            file=str(path),
            hint="wait until whatever writes the image has finished, then try again",
        )
    if modes is not None:
        make_directories(cache_dir, modes)
    else:
        cache_dir.mkdir(parents=True, exist_ok=True)
    record = DigestRecord(path=str(path), identity=identity, sha256=sha256, hashed_at=clock())
    write_record_once(record_path, DIGEST_SCHEMA, record, clock=clock, operation=_OPERATION)
    return DigestLookup(sha256, identity, hashed=True)


def hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb", buffering=0) as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise UnavailableError(
            f"cannot read image file {str(path)!r}: {exc.strerror}",
            code="filesystem_unavailable",
            operation=_OPERATION,
            file=str(path),
        ) from exc
    return digest.hexdigest()
