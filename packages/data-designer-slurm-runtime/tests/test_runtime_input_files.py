"""Bounded reads: regular files only (a symbolic link to one is fine), never more than the cap, never blocking.

Each refusal is an exit-2 error naming the file; the ones that would hang or exhaust memory with a plain read
(a FIFO, ``/dev/zero``) run in a thread joined with a timeout, so a regression fails instead of hanging.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from data_designer.slurm.contracts import (
    MAX_INPUT_FILE_BYTES,
    ExitCode,
    InvalidInputError,
    NotFoundError,
    SlurmExtensionError,
    UnavailableError,
)
from data_designer.slurm.runtime.store import read_bounded, read_text

GUARD_S = 10.0


def _refusal(action: Callable[[], object]) -> SlurmExtensionError:
    """The error ``action`` raises, run in a thread that must finish within :data:`GUARD_S`."""
    outcome: list[BaseException | object] = []

    def target() -> None:
        try:
            outcome.append(action())
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(GUARD_S)
    assert not thread.is_alive(), f"the read did not return within {GUARD_S} s"
    assert len(outcome) == 1
    error = outcome[0]
    assert isinstance(error, SlurmExtensionError), error
    return error


def _not_a_file(path: Path, kind: str) -> None:
    error = _refusal(lambda: read_text(path, operation="test"))
    assert isinstance(error, InvalidInputError)
    assert error.exit_code == ExitCode.INVALID_INPUT
    assert error.info.code == "not_a_file"
    assert error.info.file == str(path)
    assert kind in error.info.message
    assert error.info.hint


def test_a_regular_file_and_a_symbolic_link_to_one_are_read(tmp_path: Path) -> None:
    target = tmp_path / "run.yaml"
    target.write_bytes(b"name: r\r\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    assert read_bounded(target, operation="test") == b"name: r\r\n"
    assert read_text(link, operation="test") == "name: r\r\n"  # bytes as they are: no newline translation


def test_a_file_at_the_cap_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    at = tmp_path / "at.yaml"
    at.write_bytes(b"a" * MAX_INPUT_FILE_BYTES)
    assert len(read_text(at, operation="test")) == MAX_INPUT_FILE_BYTES
    over = tmp_path / "over.yaml"
    over.write_bytes(b"a" * (MAX_INPUT_FILE_BYTES + 1))
    with pytest.raises(InvalidInputError) as caught:
        read_text(over, operation="test")
    assert caught.value.info.code == "file_too_large"
    assert f"{MAX_INPUT_FILE_BYTES + 1:,} bytes" in caught.value.info.message
    assert f"{MAX_INPUT_FILE_BYTES:,} bytes" in caught.value.info.message
    assert caught.value.info.hint


def test_a_50_mb_file_is_refused_from_its_size_without_being_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "profile.yaml"
    with big.open("wb") as stream:
        stream.truncate(50 * 2**20)  # sparse: the size is what is checked
    real_read = os.read
    reads: list[int] = []

    def counting_read(fd: int, size: int) -> bytes:
        reads.append(size)
        return real_read(fd, size)

    monkeypatch.setattr(os, "read", counting_read)
    error = _refusal(lambda: read_text(big, operation="test"))
    assert error.info.code == "file_too_large"
    assert "50 MiB" in error.info.message
    assert reads == []


def test_a_caller_may_set_a_larger_cap_and_its_own_hint(tmp_path: Path) -> None:
    seed = tmp_path / "seed.csv"
    seed.write_bytes(b"x" * 100)
    assert read_bounded(seed, operation="test", limit=100) == b"x" * 100
    with pytest.raises(InvalidInputError) as caught:
        read_bounded(seed, operation="test", limit=99, too_large_hint="split it")
    assert caught.value.info.hint == "split it"


def test_a_file_that_grows_past_the_cap_while_read_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "growing.yaml"
    target.write_bytes(b"a" * 200)
    real_fstat = os.fstat

    def small_fstat(fd: int) -> os.stat_result:  # as if the size was taken before the file grew
        info = real_fstat(fd)
        fields = list(info)
        fields[6] = 10  # st_size
        return os.stat_result(fields)

    monkeypatch.setattr(os, "fstat", small_fstat)
    with pytest.raises(InvalidInputError) as caught:
        read_bounded(target, operation="test", limit=100)
    assert caught.value.info.code == "file_too_large"
    assert "grew while it was read" in caught.value.info.message


def test_dev_zero_behind_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "profile.yaml"
    link.symlink_to("/dev/zero")
    _not_a_file(link, "character device")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "run.yaml"
    os.mkfifo(fifo)
    _not_a_file(fifo, "FIFO")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    _not_a_file(tmp_path, "directory")


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        _not_a_file(path, "socket")
    finally:
        server.close()


def test_a_missing_file_is_not_found_and_a_link_loop_is_invalid(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError) as missing:
        read_text(tmp_path / "absent.yaml", operation="test")
    assert missing.value.info.code == "file_not_found"
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    with pytest.raises(InvalidInputError) as looped:
        read_text(loop, operation="test")
    assert looped.value.info.code == "not_a_file"


def test_an_error_while_reading_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "t.yaml"
    target.write_bytes(b"x\n")
    error = OSError(errno.EIO, "Input/output error")

    def fail(fd: int, size: int) -> bytes:
        raise error

    monkeypatch.setattr(os, "read", fail)
    with pytest.raises(UnavailableError) as caught:
        read_text(target, operation="test")
    assert caught.value.info.code == "filesystem_unavailable"
    assert caught.value.__cause__ is error
