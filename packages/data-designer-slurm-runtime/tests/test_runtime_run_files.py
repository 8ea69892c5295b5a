"""The file-reading rule: every read of a run-directory file is no-follow, non-blocking, regular files only, bounded.

Each reader is tried against what a careless or hostile writer of the shared disk can leave where a log, a record,
a plan or a part belongs: a symbolic link (to a secret outside the run, or to a device), a FIFO with no writer, a
directory. None may follow, block or read past its bound. A reader that would block runs in a thread with a
deadline, so a regression fails here instead of hanging the suite.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from data_designer.slurm.contracts import CheckFailedError, ConflictError
from data_designer.slurm.runtime.merge import PartReader, merge_sources
from data_designer.slurm.runtime.store import (
    RunFileRefused,
    RunLayout,
    load_plan_file,
    open_run_file,
    read_appended,
    read_run,
    read_run_file,
    read_tail,
    run_file,
)
from data_designer.slurm.runtime.testing import write_run_directory

T = TypeVar("T")
SECRET = "SECRET-CANARY-7f3a"


def finishes(call: Callable[[], T], seconds: float = 20.0) -> T:
    """``call()``'s result, failing (not hanging) when it blocks."""
    box: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box.append(call())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the reader blocked"
    if errors:
        raise errors[0]
    return box[0]


def hostile(directory: Path) -> dict[str, Path]:
    """A regular file, and the things that must never be read as one."""
    directory.mkdir(parents=True, exist_ok=True)
    secret = directory.parent / "secret.txt"
    secret.write_text(f"{SECRET}\n")
    regular = directory / "regular.log"
    regular.write_text("line one\nline two\n")
    link = directory / "link.log"
    link.symlink_to(secret)
    dangling = directory / "dangling.log"
    dangling.symlink_to(directory / "nowhere")
    device = directory / "device.log"
    device.symlink_to("/dev/zero")
    fifo = directory / "fifo.log"
    os.mkfifo(fifo)
    (directory / "dir.log").mkdir()
    return {
        "regular": regular,
        "link": link,
        "dangling": dangling,
        "device": device,
        "fifo": fifo,
        "dir": directory / "dir.log",
    }


def test_open_run_file_refuses_everything_but_a_regular_file(tmp_path: Path) -> None:
    paths = hostile(tmp_path / "run")
    fd = open_run_file(paths["regular"])
    os.close(fd)
    kinds = {"link": "a symbolic link", "dangling": "a symbolic link", "device": "a symbolic link"}
    kinds |= {"fifo": "a FIFO", "dir": "a directory"}
    for name, kind in kinds.items():
        with pytest.raises(RunFileRefused) as refused:
            finishes(lambda path=paths[name]: open_run_file(path))  # type: ignore[misc]
        assert refused.value.kind == kind, name
        assert isinstance(refused.value, OSError)
    with pytest.raises(FileNotFoundError):
        open_run_file(tmp_path / "run" / "absent.log")


def test_read_run_file_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"x" * 1000)
    assert read_run_file(path, 2000) == b"x" * 1000
    assert len(read_run_file(path, 10)) == 11  # one byte more than the cap: the caller knows it is too large
    with run_file(path) as handle:
        assert handle.read(3) == b"xxx"


def test_log_tails_never_follow_a_link_or_block_on_a_fifo(tmp_path: Path) -> None:
    paths = hostile(tmp_path / "logs")
    tail = read_tail(paths["regular"], 5)
    assert tail is not None
    assert tail.lines == ("line one", "line two")
    for name in ("link", "dangling", "device", "fifo", "dir"):
        assert finishes(lambda path=paths[name]: read_tail(path, 5)) is None, name  # type: ignore[misc]
        assert finishes(lambda path=paths[name]: read_appended(path, 0, final=True)) is None, name  # type: ignore[misc]


@pytest.fixture
def layout(tmp_path: Path) -> RunLayout:
    root = tmp_path / "ws"
    root.mkdir()
    return write_run_directory(root, shards=2, records_per_shard=10, parquet_parts=True)


def test_a_plan_that_is_a_link_or_a_fifo_is_refused_not_followed(layout: RunLayout, tmp_path: Path) -> None:
    plan = layout.plan_record
    copy = tmp_path / "plan-copy.json"
    copy.write_bytes(plan.read_bytes())
    load_plan_file(plan)
    plan.unlink()
    plan.symlink_to(copy)
    with pytest.raises(ConflictError, match="symbolic link"):
        load_plan_file(plan)
    plan.unlink()
    os.mkfifo(plan)
    with pytest.raises(ConflictError, match="FIFO"):
        finishes(lambda: load_plan_file(plan))


def test_status_and_the_snapshot_do_not_hang_on_fifos_where_records_and_logs_belong(layout: RunLayout) -> None:
    status = layout.status(0, 1)
    status.unlink()
    os.mkfifo(status)
    heartbeat = layout.heartbeat(1, 1)
    heartbeat.unlink(missing_ok=True)
    os.mkfifo(heartbeat)
    logs = layout.logs_dir(1, 1)
    logs.mkdir(parents=True, exist_ok=True)
    for name in ("supervisor.log", "client.log"):
        (logs / name).unlink(missing_ok=True)
        os.mkfifo(logs / name)
    snapshot = finishes(lambda: read_run(layout))
    assert [shard.plan.shard for shard in snapshot.shards] == [0, 1]


def test_a_part_swapped_for_a_link_after_the_snapshot_is_refused_by_the_merge(
    layout: RunLayout, tmp_path: Path
) -> None:
    snapshot = read_run(layout)
    sources = merge_sources(snapshot)
    source = sources.slices[0]
    part = layout.run_dir / source.path
    copy = tmp_path / "outside.parquet"
    copy.write_bytes(part.read_bytes())  # the very bytes: only the link itself is wrong
    reader = PartReader(layout.run_dir, run_id=snapshot.run.run_id, plan_digest=snapshot.plan.digest)
    assert reader.rows(source).num_rows == source.take.records
    part.unlink()
    part.symlink_to(copy)
    fresh = PartReader(layout.run_dir, run_id=snapshot.run.run_id, plan_digest=snapshot.plan.digest)
    with pytest.raises(CheckFailedError, match="symbolic link, not a regular file"):
        fresh.rows(source)
    part.unlink()
    os.mkfifo(part)
    with pytest.raises(CheckFailedError, match="FIFO, not a regular file"):
        finishes(lambda: fresh.whole(source))


def test_a_part_claiming_a_large_size_is_hashed_with_constant_memory_before_it_is_refused(
    layout: RunLayout,
) -> None:
    """A manifest claiming 96 MiB over a file of that size whose bytes are not the manifest's: refused after a
    streamed hash, never loaded (the old reader held the whole part, twice, before hashing it)."""
    snapshot = read_run(layout)
    source = merge_sources(snapshot).slices[0]
    size = 96 * 1024 * 1024
    part = layout.run_dir / source.path
    part.unlink()
    with open(part, "wb") as handle:
        handle.truncate(size)  # sparse: cheap to write, read back as zeros
    claimed = dataclasses.replace(source, part=source.part.model_copy(update={"bytes": size}))
    reader = PartReader(layout.run_dir, run_id=snapshot.run.run_id, plan_digest=snapshot.plan.digest)
    tracemalloc.start()
    try:
        with pytest.raises(CheckFailedError, match="sha256"):
            reader.whole(claimed)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes while hashing a {size}-byte part"
