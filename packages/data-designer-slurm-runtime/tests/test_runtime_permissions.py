"""Workspace modes and durable writes: private 0700/0600 or group 0770+setgid/0660 whatever the umask; every byte
written despite short writes; every directory created fsynced into its parent."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts.records import HEARTBEAT_SCHEMA, HeartbeatRecord
from data_designer.slurm.runtime.scheduler import SubprocessRunner
from data_designer.slurm.runtime.store import (
    GROUP_MODES,
    PRIVATE_MODES,
    _record_io,
    append_record,
    make_directories,
    modes_for,
    modes_of_directory,
    publish_bytes_once,
    publish_bytes_replace,
    read_record,
    replace_record,
    snapshot_mode,
    write_record_once,
    write_text_atomic,
)

WHEN = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def heartbeat_payload() -> HeartbeatRecord:
    return HeartbeatRecord(pid=1, hostname="node1", phase="client_running", beat=0, time=WHEN)


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="modes and setgid directories as Linux has them")


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask() -> Iterator[None]:
    """A permissive umask 000: nothing the writers produce may depend on it."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def write_every_kind(base: Path) -> list[Path]:
    """One file of every writer, each in directories that do not exist yet; returns the files."""
    payload = heartbeat_payload()
    text = base / "a" / "b" / "text.yaml"
    write_text_atomic(text, "x: 1\n", overwrite=False, operation="test")
    once = base / "c" / "once.json"
    written = write_record_once(once, HEARTBEAT_SCHEMA, payload)
    assert not isinstance(written, _record_io.RecordConflict)
    replaced = base / "d" / "e" / "mutable.json"
    replace_record(replaced, HEARTBEAT_SCHEMA, payload)
    replace_record(replaced, HEARTBEAT_SCHEMA, payload)
    appended = append_record(base / "f" / "observations", HEARTBEAT_SCHEMA, payload).path
    part = base / "g" / "output" / "part-00000.parquet"
    assert publish_bytes_once(part, b"PAR1")
    bytes_replaced = base / "h" / "progress.json"
    publish_bytes_replace(bytes_replaced, b"{}\n")
    return [text, once, replaced, appended, part, bytes_replaced]


def entries(base: Path) -> tuple[list[Path], list[Path]]:
    """Every directory (base excluded) and every file below ``base``."""
    directories: list[Path] = []
    files: list[Path] = []
    for root, dirs, names in os.walk(base):
        directories += [Path(root) / d for d in dirs]
        files += [Path(root) / n for n in names]
    return directories, files


def test_a_private_workspace_gets_0700_directories_and_0600_files_under_a_permissive_umask(
    tmp_path: Path, umask: None
) -> None:
    base = tmp_path / "ws"
    os.mkdir(base)
    os.chmod(base, 0o700)
    written = write_every_kind(base)
    directories, files = entries(base)
    assert sorted(files) == sorted(written)  # no temporary file is left behind
    assert {str(d.relative_to(base)): mode_of(d) for d in directories} == dict.fromkeys(
        (str(d.relative_to(base)) for d in directories), 0o700
    )
    assert {f.name: mode_of(f) for f in files} == {f.name: 0o600 for f in files}
    assert isinstance(read_record(written[1], HEARTBEAT_SCHEMA), _record_io.RecordOk)


def test_a_group_workspace_gets_setgid_0770_directories_and_0660_files_under_a_strict_umask(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    os.mkdir(base)
    os.chmod(base, 0o2770)
    previous = os.umask(0o077)  # the user's private umask must not strip the group bits
    try:
        written = write_every_kind(base)
    finally:
        os.umask(previous)
    directories, files = entries(base)
    assert sorted(files) == sorted(written)
    assert len(directories) == 10
    for directory in directories:
        assert mode_of(directory) == 0o2770, directory
        assert os.stat(directory).st_gid == os.stat(base).st_gid
    assert {f.name: mode_of(f) for f in files} == {f.name: 0o660 for f in files}


def test_the_modes_follow_the_nearest_existing_directory(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    os.mkdir(shared)
    os.chmod(shared, 0o2770)
    private = tmp_path / "private"
    os.mkdir(private, 0o700)
    assert modes_of_directory(shared / "not" / "yet") is GROUP_MODES
    assert modes_of_directory(private / "not" / "yet") is PRIVATE_MODES
    assert (modes_for("group"), modes_for("private")) == (GROUP_MODES, PRIVATE_MODES)
    assert (GROUP_MODES.umask, PRIVATE_MODES.umask) == (0o007, 0o077)


def test_make_directories_sets_the_modes_explicitly_and_exclusive_refuses_an_existing_directory(
    tmp_path: Path,
) -> None:
    previous = os.umask(0o077)
    try:
        created = make_directories(tmp_path / "a" / "b", GROUP_MODES)
    finally:
        os.umask(previous)
    assert created == [tmp_path / "a", tmp_path / "a" / "b"]
    assert [mode_of(p) for p in created] == [0o2770, 0o2770]
    assert make_directories(tmp_path / "a" / "b", PRIVATE_MODES) == []  # existing ones are left alone
    assert mode_of(tmp_path / "a" / "b") == 0o2770
    with pytest.raises(FileExistsError):
        make_directories(tmp_path / "a" / "b", PRIVATE_MODES, exclusive=True)
    assert make_directories(tmp_path / "a" / "c", PRIVATE_MODES, exclusive=True) == [tmp_path / "a" / "c"]
    assert mode_of(tmp_path / "a" / "c") == 0o700


@pytest.mark.parametrize(
    ("modes", "source", "expected"),
    [
        (PRIVATE_MODES, 0o644, 0o600),  # a world-readable input becomes private
        (GROUP_MODES, 0o600, 0o600),  # a private seed stays private in a shared workspace
        (GROUP_MODES, 0o644, 0o640),
        (GROUP_MODES, 0o666, 0o660),
        (PRIVATE_MODES, 0o400, 0o400),  # never more than the source
    ],
)
def test_a_snapshot_keeps_at_most_its_source_permissions(modes: Any, source: int, expected: int) -> None:
    assert snapshot_mode(modes, stat.S_IFREG | source) == expected


def test_an_explicit_mode_is_applied_to_a_published_file(tmp_path: Path, umask: None) -> None:
    target = tmp_path / "inputs" / "seed.csv"
    assert publish_bytes_once(target, b"topic\na\n", mode=0o400)
    assert mode_of(target) == 0o400
    assert target.read_bytes() == b"topic\na\n"


class ShortWrites:
    """``os.write`` as a slow NFS server answers it: at most 3 bytes per call."""

    def __init__(self) -> None:
        self.calls = 0
        self.real = os.write

    def __call__(self, fd: int, data: bytes | memoryview) -> int:
        self.calls += 1
        return self.real(fd, bytes(data[:3]))


def test_short_writes_are_resumed_until_every_byte_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    short = ShortWrites()
    monkeypatch.setattr(os, "write", short)
    text = "line one\nline two, a little longer\n"
    write_text_atomic(tmp_path / "t.yaml", text, overwrite=False, operation="test")
    assert (tmp_path / "t.yaml").read_text(encoding="utf-8") == text
    record = write_record_once(tmp_path / "r.json", HEARTBEAT_SCHEMA, heartbeat_payload())
    assert not isinstance(record, _record_io.RecordConflict)
    assert isinstance(read_record(tmp_path / "r.json", HEARTBEAT_SCHEMA), _record_io.RecordOk)
    assert short.calls > len(text) // 3


def test_a_write_that_makes_no_progress_fails_instead_of_spinning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "write", lambda fd, data: 0)
    with pytest.raises(Exception, match="no progress"):
        write_text_atomic(tmp_path / "t.yaml", "x\n", overwrite=False, operation="test")
    assert list(tmp_path.iterdir()) == []  # the temporary file is removed


def test_every_directory_created_is_fsynced_into_its_parent_and_the_final_directory_after_the_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path = tmp_path.resolve()  # the fsynced paths below are read back from /proc, resolved
    synced: list[Path] = []
    real = os.fsync

    def record(fd: int) -> None:
        target = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if target.is_dir():  # files are fsynced too; this test is about the directories
            synced.append(target)
        real(fd)

    monkeypatch.setattr(os, "fsync", record)
    write_text_atomic(tmp_path / "a" / "b" / "c.yaml", "x\n", overwrite=False, operation="test")
    assert synced == [tmp_path, tmp_path / "a", tmp_path / "a" / "b"]
    synced.clear()
    assert publish_bytes_once(tmp_path / "d" / "e" / "part", b"data")
    assert synced == [tmp_path, tmp_path / "d", tmp_path / "d" / "e"]
    synced.clear()
    assert publish_bytes_once(tmp_path / "d" / "e" / "other", b"data")  # nothing created: only the final directory
    assert synced == [tmp_path / "d" / "e"]


def test_sbatch_runs_with_the_workspace_umask(tmp_path: Path) -> None:
    sbatch = tmp_path / "sbatch"  # a stand-in that prints the umask Slurm would hand the job (SLURM_UMASK)
    sbatch.write_text("#!/bin/sh\numask\n", encoding="utf-8")
    sbatch.chmod(0o755)
    for umask, expected in ((PRIVATE_MODES.umask, "0077"), (GROUP_MODES.umask, "0007")):
        done = SubprocessRunner(env={"PATH": os.environ["PATH"]}, umask=umask).run([str(sbatch)], timeout_s=10)
        assert (done.returncode, done.stdout.strip()) == (0, expected)
