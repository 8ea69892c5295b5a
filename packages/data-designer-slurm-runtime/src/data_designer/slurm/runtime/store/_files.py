"""Durable file writes and reads on the shared filesystem.

Writes go to a temporary file in the target's directory, are fsynced, then renamed (replace)
or hard-linked (create-only, which fails if the target appeared meanwhile: ``link(2)`` is
atomic on NFS and Lustre where ``O_EXCL`` on the final name may not be). Nothing is ever left
half-written under the final name.
"""

from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path

from data_designer.slurm.contracts import (
    MAX_INPUT_FILE_BYTES,
    ConflictError,
    InvalidInputError,
    UnavailableError,
)
from data_designer.slurm.runtime.store._input_files import read_bounded
from data_designer.slurm.runtime.store._permissions import FileModes, modes_of_directory


def read_text(path: Path, *, operation: str, limit: int = MAX_INPUT_FILE_BYTES) -> str:
    """Read a UTF-8 text file of at most ``limit`` bytes (:func:`read_bounded`: regular files only), mapping
    failures onto the error tree."""
    data = read_bounded(path, operation=operation, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{str(path)!r} is not UTF-8 text",
            code="not_utf8",
            operation=operation,
            file=str(path),
            hint="save it as UTF-8",
        ) from exc


def write_text_atomic(
    path: Path, text: str, *, overwrite: bool, operation: str, mode: int | None = None, modes: FileModes | None = None
) -> bool:
    """Write ``text`` to ``path`` atomically; returns whether an existing file was replaced.

    With ``overwrite=False`` an existing file is never touched and :class:`ConflictError` is raised.
    Missing directories are made with ``modes`` (default: those of the nearest existing directory,
    :func:`modes_of_directory`); the file gets ``mode`` (default: ``modes.file``).
    """
    directory = path.parent
    chosen = modes_of_directory(directory) if modes is None else modes
    try:
        make_directories(directory, chosen)
    except OSError as exc:
        raise UnavailableError(
            f"cannot create directory {str(directory)!r}: {exc.strerror}",
            code="filesystem_unavailable",
            operation=operation,
            file=str(path),
        ) from exc
    existed = path.exists()
    if existed and not overwrite:
        raise _exists(path, operation)
    temp = directory / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        write_new_file(temp, text.encode("utf-8"), chosen.file if mode is None else mode)
        if overwrite:
            os.replace(temp, path)
        else:
            try:
                os.link(temp, path)
            except FileExistsError as exc:
                raise _exists(path, operation) from exc
            finally:
                os.unlink(temp)
        _fsync_directory(directory)
    except OSError as exc:
        if temp.exists():
            temp.unlink()
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise InvalidInputError(
                f"cannot write {str(path)!r}: {exc.strerror}",
                code="permission_denied",
                operation=operation,
                file=str(path),
                hint="choose a writable location",
            ) from exc
        raise UnavailableError(
            f"cannot write {str(path)!r}: {exc.strerror}",
            code="filesystem_unavailable",
            operation=operation,
            file=str(path),
        ) from exc
    return existed


def _exists(path: Path, operation: str) -> ConflictError:
    return ConflictError(
        f"{str(path)!r} already exists",
        code="file_exists",
        operation=operation,
        file=str(path),
        hint="pass --force to overwrite it",
    )


def make_directories(directory: Path, modes: FileModes, *, exclusive: bool = False) -> list[Path]:
    """``mkdir -p`` with ``modes.directory`` set explicitly (setgid included, whatever the umask) on every
    directory created, each created one fsynced into its parent; returns the directories created, outermost first.

    A directory that already exists is left as it is (a concurrent creator's is fine), except ``directory``
    itself with ``exclusive``: then :class:`FileExistsError` says someone else has it.
    """
    missing: list[Path] = []
    for candidate in (directory, *directory.parents):
        if os.path.isdir(candidate):
            break
        missing.append(candidate)
    if exclusive and not missing:
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(directory))
    created: list[Path] = []
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            if os.path.isdir(path) and not (exclusive and path == directory):
                continue
            raise
        os.chmod(path, modes.directory)
        created.append(path)
        _fsync_directory(path.parent)
    return created


def write_new_file(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` (exclusively) holding exactly ``data`` with ``mode``, fsynced; short writes are resumed.

    Created 0600 and widened to ``mode`` with ``fchmod`` only once it is complete: the umask plays no part.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        write_all(fd, data)
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``: ``os.write`` may write fewer bytes than asked (signals, NFS, quotas)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # never for a regular file; refuse to spin
            raise OSError(errno.EIO, "write made no progress")
        view = view[written:]


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - some filesystems refuse opening directories; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - fsync on a directory is unsupported on some filesystems
        pass
    finally:
        os.close(fd)
