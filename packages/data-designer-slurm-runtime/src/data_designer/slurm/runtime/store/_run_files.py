"""The one way a file inside a run directory is opened for reading: no-follow, non-blocking, regular files only.

Everything in a run directory is written by jobs on other machines, and anyone who can write there can put a
symbolic link, a FIFO or a device where a log, a record or a part should be. A plain ``open`` would follow the link
out of the run (``logs`` printing ``~/.ssh/id_rsa``), or block forever on a FIFO (``status`` and ``runs ls`` of a
whole workspace hanging on one run). So every reader of a run-directory file goes through :func:`open_run_file`:

* ``O_NOFOLLOW``: a symbolic link as the last component is refused by the kernel (``ELOOP``), never followed;
* ``O_NONBLOCK``: a FIFO without a writer opens at once instead of blocking (and is then refused);
* ``fstat`` of what was opened: anything but a regular file is refused, so nothing swapped in after an earlier
  ``lstat`` is read either;
* bounded: :func:`read_run_file` reads at most its cap plus one byte, so a file that grew past it is refused, not
  loaded.

Refusals are :class:`RunFileRefused`, an ``OSError``, so readers that already treat an unreadable file as "no
evidence" keep doing so; ``.kind`` says what was found instead of a regular file. Directory components are not
checked one by one: the run directory itself is refused when it is a link (``store.run_dir_of``), and the names
under it are the store's own layout.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
"""The flags of every run-directory read."""

_READ_CHUNK = 1 << 20


class RunFileRefused(OSError):
    """A run-directory path that holds something other than a regular file (``kind`` says what)."""

    def __init__(self, path: Path | str, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{kind}, not a regular file", str(path))
        self.kind = kind


def file_kind(mode: int) -> str:
    """What an ``st_mode`` is, in words, for messages about files that are not regular."""
    for test, label in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return label
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def open_run_file(path: Path | str) -> int:
    """A descriptor of the regular file at ``path`` (the caller closes it), opened with :data:`OPEN_FLAGS`.

    Raises ``FileNotFoundError`` when nothing is there, :class:`RunFileRefused` for a symbolic link, FIFO,
    directory, socket or device, and the ``OSError`` the filesystem raised otherwise.
    """
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RunFileRefused(path, "a symbolic link") from exc
        if exc.errno == errno.EISDIR:
            raise RunFileRefused(path, "a directory") from exc
        if exc.errno == errno.ENXIO:  # a socket, or a device without its driver
            raise RunFileRefused(path, "a socket or device") from exc
        raise
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise RunFileRefused(path, file_kind(mode))
    return fd


@contextmanager
def run_file(path: Path | str) -> Iterator[BinaryIO]:
    """The regular file at ``path`` as a binary stream (:func:`open_run_file`'s refusals), closed on exit."""
    fd = open_run_file(path)
    try:
        handle = os.fdopen(fd, "rb")
    except Exception:
        os.close(fd)
        raise
    with handle:
        yield handle


def read_run_file(path: Path | str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the regular file at ``path``: a result longer than ``limit`` means the file
    is larger than the caller accepts (the caller says so); refusals as :func:`open_run_file`."""
    fd = open_run_file(path)
    try:
        return read_up_to(fd, limit + 1)
    finally:
        os.close(fd)


def read_up_to(fd: int, limit: int) -> bytes:
    """Read from ``fd`` until end of file or ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, min(_READ_CHUNK, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
