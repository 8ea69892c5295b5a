"""Bounded reads of the files a user names: regular files only, and never more than a cap.

A path may name anything: a FIFO blocks a plain ``open`` forever, ``/dev/zero`` (or a symbolic link to it)
reads until memory runs out, and a 50 MB YAML file takes a minute to parse. :func:`read_bounded` opens
without blocking (``O_NONBLOCK``: a FIFO without a writer opens at once), checks what it opened with
``fstat`` (a symbolic link to a regular file is fine, since the check is on what it points at), refuses a size
over the cap before reading, and reads at most the cap plus one byte, so a file growing meanwhile is refused
too. The caps are the contracts' ``MAX_INPUT_FILE_BYTES`` (authored YAML/JSON) and ``MAX_SEED_FILE_BYTES``.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from data_designer.slurm.contracts import (
    MAX_INPUT_FILE_BYTES,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
    describe_bytes,
)

TOO_LARGE_HINT = (
    "profiles, run, benchmark and Data Designer config files are small YAML or JSON; put bulk data in a seed dataset"
)

_CHUNK = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bounded(
    path: Path, *, operation: str, limit: int = MAX_INPUT_FILE_BYTES, too_large_hint: str = TOO_LARGE_HINT
) -> bytes:
    """The bytes of the regular file ``path``, refused (exit 2) when it is anything else or holds over ``limit``."""
    name = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _open_error(exc, name, operation) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((what for test, what in _KINDS if test(info.st_mode)), "not a regular file")
            raise _not_a_file(name, kind, operation)
        if info.st_size > limit:
            raise _too_large(name, f"is {describe_bytes(info.st_size)}", limit, too_large_hint, operation)
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, _CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise _too_large(name, "grew while it was read", limit, too_large_hint, operation)
        return b"".join(chunks)
    except OSError as exc:
        raise UnavailableError(
            f"cannot read {name!r}: {exc.strerror}", code="filesystem_unavailable", operation=operation, file=name
        ) from exc
    finally:
        os.close(fd)


def _open_error(exc: OSError, name: str, operation: str) -> Exception:
    if isinstance(exc, FileNotFoundError):
        return NotFoundError(
            f"{name!r} does not exist", code="file_not_found", operation=operation, file=name, hint="check the path"
        )
    if isinstance(exc, IsADirectoryError):
        return _not_a_file(name, "a directory", operation)
    if exc.errno == errno.ENXIO:  # a socket, or a device without its driver
        return _not_a_file(name, "a socket or device", operation)
    if isinstance(exc, PermissionError):
        return InvalidInputError(
            f"{name!r} is not readable",
            code="permission_denied",
            operation=operation,
            file=name,
            hint="fix its permissions",
        )
    if exc.errno == errno.ELOOP:
        return InvalidInputError(
            f"{name!r} is a loop of symbolic links",
            code="not_a_file",
            operation=operation,
            file=name,
            hint="point the link at a regular file",
        )
    return UnavailableError(
        f"cannot read {name!r}: {exc.strerror}", code="filesystem_unavailable", operation=operation, file=name
    )


def _not_a_file(name: str, kind: str, operation: str) -> InvalidInputError:
    return InvalidInputError(
        f"{name!r} is {kind}, not a regular file",
        code="not_a_file",
        operation=operation,
        file=name,
        hint="name a regular file (a symbolic link to one is fine)",
    )


def _too_large(name: str, what: str, limit: int, hint: str, operation: str) -> InvalidInputError:
    return InvalidInputError(
        f"{name!r} {what}, above the limit of {describe_bytes(limit)}",
        code="file_too_large",
        operation=operation,
        file=name,
        hint=hint,
    )
