"""Durable file writes and reads: create-only never overwrites, replacements are atomic, OS errors are mapped."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from data_designer.slurm.contracts import (
    ConflictError,
    ExitCode,
    InvalidInputError,
    NotFoundError,
    SlurmExtensionError,
    UnavailableError,
)
from data_designer.slurm.runtime.store import read_text, write_text_atomic


def test_create_only_writes_a_new_file(tmp_path: Path) -> None:
    target = tmp_path / "profile.yaml"
    assert write_text_atomic(target, "a: 1\n", overwrite=False, operation="test") is False
    assert target.read_bytes() == b"a: 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.yaml"]


def test_create_only_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "profile.yaml"
    target.write_bytes(b"original \xff bytes")
    with pytest.raises(ConflictError) as caught:
        write_text_atomic(target, "replacement\n", overwrite=False, operation="profile.init")
    assert target.read_bytes() == b"original \xff bytes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.yaml"]
    info = caught.value.info
    assert caught.value.exit_code == ExitCode.CONFLICT
    assert info.code == "file_exists"
    assert info.operation == "profile.init"
    assert info.file == str(target)
    assert info.hint
    assert str(target) in info.message


def test_overwrite_replaces_the_file_and_reports_it(tmp_path: Path) -> None:
    target = tmp_path / "profile.yaml"
    target.write_text("old\n", encoding="utf-8")
    assert write_text_atomic(target, "new ü\n", overwrite=True, operation="test") is True
    assert target.read_bytes() == "new ü\n".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.yaml"]


def test_overwrite_of_a_missing_file_creates_it(tmp_path: Path) -> None:
    target = tmp_path / "new.yaml"
    assert write_text_atomic(target, "x\n", overwrite=True, operation="test") is False
    assert target.read_text(encoding="utf-8") == "x\n"


def test_overwrite_replaces_a_new_inode_so_readers_never_see_half_a_file(tmp_path: Path) -> None:
    target = tmp_path / "profile.yaml"
    target.write_text("old\n", encoding="utf-8")
    with target.open(encoding="utf-8") as reader:
        write_text_atomic(target, "new\n", overwrite=True, operation="test")
        assert reader.read() == "old\n"
    assert target.read_text(encoding="utf-8") == "new\n"


def test_parent_directories_are_created(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c" / "profile.yaml"
    write_text_atomic(target, "x\n", overwrite=False, operation="test")
    assert target.read_text(encoding="utf-8") == "x\n"
    assert [p.name for p in target.parent.iterdir()] == ["profile.yaml"]


def test_the_mode_is_applied_to_new_files(tmp_path: Path) -> None:
    target = tmp_path / "secret.yaml"
    old_umask = os.umask(0o022)
    try:
        write_text_atomic(target, "x\n", overwrite=False, operation="test", mode=0o600)
        default = tmp_path / "default.yaml"
        write_text_atomic(default, "x\n", overwrite=False, operation="test")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(default.stat().st_mode) == 0o600  # private by default, whatever the umask


def test_text_round_trips_through_read_text(tmp_path: Path) -> None:
    target = tmp_path / "t.txt"
    text = "line 1\nünïcødé \U0001f600\r\nno newline at end"
    write_text_atomic(target, text, overwrite=False, operation="test")
    assert target.read_bytes() == text.encode("utf-8")


def test_read_text_reads_utf8(tmp_path: Path) -> None:
    target = tmp_path / "t.yaml"
    target.write_bytes("a: ü\n".encode())
    assert read_text(target, operation="test") == "a: ü\n"


def test_read_text_of_a_missing_file_is_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(NotFoundError) as caught:
        read_text(missing, operation="profile.load")
    info = caught.value.info
    assert caught.value.exit_code == ExitCode.NOT_FOUND
    assert (info.code, info.operation, info.file) == ("file_not_found", "profile.load", str(missing))
    assert info.hint
    assert isinstance(caught.value.__cause__, FileNotFoundError)


def test_read_text_of_a_directory_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as caught:
        read_text(tmp_path, operation="profile.load")
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    assert caught.value.info.code == "not_a_file"
    assert caught.value.info.file == str(tmp_path)
    assert caught.value.info.hint


def test_read_text_of_non_utf8_bytes_is_invalid_input(tmp_path: Path) -> None:
    target = tmp_path / "latin1.yaml"
    target.write_bytes("a: \xe9\n".encode("latin-1"))
    with pytest.raises(InvalidInputError) as caught:
        read_text(target, operation="profile.load")
    assert caught.value.info.code == "not_utf8"
    assert caught.value.info.hint
    assert isinstance(caught.value.__cause__, UnicodeDecodeError)


@pytest.mark.parametrize(
    ("error", "expected", "code"),
    [
        (PermissionError(errno.EACCES, "Permission denied"), InvalidInputError, "permission_denied"),
        (OSError(errno.EIO, "Input/output error"), UnavailableError, "filesystem_unavailable"),
        (OSError(errno.ESTALE, "Stale file handle"), UnavailableError, "filesystem_unavailable"),
    ],
)
def test_read_text_maps_other_os_errors(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    error: OSError,
    expected: type[SlurmExtensionError],
    code: str,
) -> None:
    target = tmp_path / "t.yaml"
    target.write_text("x\n", encoding="utf-8")

    real_open = os.open

    def fail(path: str | Path, flags: int, mode: int = 0o777) -> int:
        if Path(path) == target:
            raise error
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", fail)
    with pytest.raises(expected) as caught:
        read_text(target, operation="test")
    assert caught.value.info.code == code
    assert caught.value.info.file == str(target)
    assert caught.value.__cause__ is error


def test_a_file_that_appears_during_a_create_only_write_is_a_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "profile.yaml"
    real_link = os.link

    def racing_link(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        Path(dst).write_text("theirs\n", encoding="utf-8")
        real_link(src, dst)

    monkeypatch.setattr(os, "link", racing_link)
    with pytest.raises(ConflictError):
        write_text_atomic(target, "ours\n", overwrite=False, operation="test")
    assert target.read_text(encoding="utf-8") == "theirs\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.yaml"]


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_failed_write_leaves_neither_a_temporary_nor_a_target_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overwrite: bool
) -> None:
    target = tmp_path / "profile.yaml"

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(UnavailableError) as caught:
        write_text_atomic(target, "x\n", overwrite=overwrite, operation="test")
    assert caught.value.info.code == "filesystem_unavailable"
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_location_is_invalid_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "profile.yaml"
    real_open = os.open

    def read_only_open(path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", read_only_open)
    with pytest.raises(InvalidInputError) as caught:
        write_text_atomic(target, "x\n", overwrite=False, operation="test")
    assert caught.value.info.code == "permission_denied"
    assert caught.value.info.hint
    assert list(tmp_path.iterdir()) == []


def test_write_into_a_path_below_a_file_fails_without_side_effects(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x\n", encoding="utf-8")
    with pytest.raises(SlurmExtensionError) as caught:
        write_text_atomic(blocker / "profile.yaml", "y\n", overwrite=False, operation="test")
    assert isinstance(caught.value, UnavailableError | InvalidInputError)
    assert caught.value.info.file == str(blocker / "profile.yaml")
    assert blocker.read_text(encoding="utf-8") == "x\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
