"""Checksummed records: write-once never replaces, replacement is atomic, corruption is detected, races have one winner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from data_designer.slurm.contracts import InternalError, UnavailableError
from data_designer.slurm.contracts.records import RecordEnvelope, RecordSchema
from data_designer.slurm.planner import canonical_json, canonical_json_data, sha256_digest
from data_designer.slurm.runtime.store._record_io import (
    RecordAppended,
    RecordConflict,
    RecordCorrupt,
    RecordMissing,
    RecordOk,
    RecordUnreadable,
    RecordWritten,
    RecordWrongSchema,
    append_record,
    decode_record,
    encode_record,
    format_timestamp,
    is_temporary_name,
    read_record,
    replace_record,
    sequence_numbers,
    write_record_once,
)

T0 = datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC)


class Beat(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    writer: str
    count: int
    tags: tuple[str, ...] = ()


BEAT = RecordSchema("heartbeat", 1, Beat)
BEAT_V2 = RecordSchema("heartbeat", 2, Beat)
OTHER = RecordSchema("progress", 1, Beat)


def fixed_clock() -> datetime:
    return T0


def visible(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def test_write_once_then_read_round_trips_the_payload_and_envelope(tmp_path: Path) -> None:
    path = tmp_path / "a" / "heartbeat.json"
    payload = Beat(writer="w", count=3, tags=("x", "ü"))
    written = write_record_once(path, BEAT, payload, clock=fixed_clock)
    assert isinstance(written, RecordWritten)
    result = read_record(path, BEAT)
    assert isinstance(result, RecordOk)
    assert result.status == "ok"
    assert result.payload == payload
    assert result.envelope == written.envelope
    assert result.envelope.schema_name == "heartbeat"
    assert result.envelope.schema_version == 1
    assert result.envelope.written_at == T0
    assert visible(path.parent) == ["heartbeat.json"]


def test_the_file_is_the_canonical_envelope_with_a_checksum_over_every_other_field(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_record_once(path, BEAT, Beat(writer="w", count=1), clock=fixed_clock)
    data = path.read_bytes()
    raw = json.loads(data)
    assert data == canonical_json(raw) + b"\n"
    assert raw["written_at"] == "2026-11-29T12:00:00.123456Z"
    assert raw["payload"] == {"writer": "w", "count": 1, "tags": []}
    assert raw["checksum"] == sha256_digest({k: v for k, v in raw.items() if k != "checksum"})
    assert data == encode_record(BEAT, Beat(writer="w", count=1), written_at=T0)[0]


def test_timestamps_are_utc_and_a_naive_clock_is_a_bug() -> None:
    plus_two = datetime(2026, 1, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert format_timestamp(plus_two) == "2026-01-01T12:00:00.000000Z"
    with pytest.raises(InternalError):
        format_timestamp(datetime(2026, 1, 1))
    with pytest.raises(InternalError):
        write_record_once(
            Path("/nonexistent/x.json"), BEAT, Beat(writer="w", count=1), clock=lambda: datetime(2026, 1, 1)
        )


def test_write_once_never_replaces_and_the_loser_reads_the_winner_back(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    assert isinstance(write_record_once(path, BEAT, Beat(writer="first", count=1), clock=fixed_clock), RecordWritten)
    before = path.read_bytes()
    inode = path.stat().st_ino
    second = write_record_once(path, BEAT, Beat(writer="second", count=2), clock=fixed_clock)
    assert isinstance(second, RecordConflict)
    assert isinstance(second.existing, RecordOk)
    assert second.existing.payload.writer == "first"
    assert path.read_bytes() == before
    assert path.stat().st_ino == inode
    assert visible(tmp_path) == ["run.json"]


def test_write_once_does_not_replace_a_foreign_or_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(b"garbage")
    result = write_record_once(path, BEAT, Beat(writer="w", count=1), clock=fixed_clock)
    assert isinstance(result, RecordConflict)
    assert isinstance(result.existing, RecordCorrupt)
    assert path.read_bytes() == b"garbage"


def test_concurrent_threads_writing_once_have_exactly_one_winner(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    barrier = threading.Barrier(8)
    results: dict[int, object] = {}

    def write(index: int) -> None:
        barrier.wait()
        results[index] = write_record_once(path, BEAT, Beat(writer=f"t{index}", count=index), clock=fixed_clock)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [i for i, r in results.items() if isinstance(r, RecordWritten)]
    assert len(winners) == 1
    assert all(isinstance(r, RecordConflict) for i, r in results.items() if i != winners[0])
    final = read_record(path, BEAT)
    assert isinstance(final, RecordOk)
    assert final.payload.writer == f"t{winners[0]}"
    assert visible(tmp_path) == ["plan.json"]


_CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    from datetime import UTC, datetime
    from pathlib import Path
    from pydantic import BaseModel, ConfigDict
    from data_designer.slurm.contracts.records import RecordSchema
    from data_designer.slurm.runtime.store._record_io import RecordWritten, append_record, write_record_once

    class Beat(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
        writer: str
        count: int
        tags: tuple[str, ...] = ()

    mode, target, go, index = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    Path(str(go) + f".ready-{index}").touch()
    while not go.exists():
        time.sleep(0.001)
    schema = RecordSchema("heartbeat", 1, Beat)
    payload = Beat(writer=f"p{index}", count=index)
    if mode == "once":
        result = write_record_once(target, schema, payload, clock=lambda: datetime.now(UTC))
        print(json.dumps({"won": isinstance(result, RecordWritten)}))
    else:
        appended = append_record(target, schema, payload, clock=lambda: datetime.now(UTC))
        print(json.dumps({"sequence": appended.sequence}))
    """
)


def run_children(mode: str, target: Path, go: Path, count: int) -> list[dict[str, object]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, mode, str(target), str(go), str(i)], stdout=subprocess.PIPE, text=True
        )
        for i in range(count)
    ]
    try:
        deadline = time.monotonic() + 60
        while sum(1 for i in range(count) if Path(f"{go}.ready-{i}").exists()) < count:
            assert time.monotonic() < deadline, "children did not start"
            assert all(p.poll() is None for p in procs), "a child died before the start line"
            time.sleep(0.01)
        go.touch()
        outputs = []
        for proc in procs:
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == 0
            outputs.append(json.loads(out))
        return outputs
    finally:
        for proc in procs:  # never leave a child behind when an assertion fails
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.mark.slow
def test_concurrent_processes_writing_once_have_exactly_one_winner(tmp_path: Path) -> None:
    target = tmp_path / "records" / "run.json"
    outputs = run_children("once", target, tmp_path / "go", 6)
    assert sum(1 for out in outputs if out["won"]) == 1
    assert isinstance(read_record(target, BEAT), RecordOk)
    assert visible(target.parent) == ["run.json"]


@pytest.mark.slow
def test_concurrent_processes_appending_get_distinct_numbers(tmp_path: Path) -> None:
    directory = tmp_path / "submissions"
    outputs = run_children("append", directory, tmp_path / "go", 6)
    assert sorted(int(str(out["sequence"])) for out in outputs) == [1, 2, 3, 4, 5, 6]
    assert sequence_numbers(directory) == [1, 2, 3, 4, 5, 6]
    writers = set()
    for number in range(1, 7):
        result = read_record(directory / f"{number:04d}.json", BEAT)
        assert isinstance(result, RecordOk)
        writers.add(result.payload.writer)
    assert writers == {f"p{i}" for i in range(6)}


def test_replace_swaps_the_whole_record(tmp_path: Path) -> None:
    path = tmp_path / "heartbeat.json"
    replace_record(path, BEAT, Beat(writer="w", count=1), clock=fixed_clock)
    replace_record(path, BEAT, Beat(writer="w", count=2), clock=lambda: T0 + timedelta(seconds=5))
    result = read_record(path, BEAT)
    assert isinstance(result, RecordOk)
    assert result.payload.count == 2
    assert result.envelope.written_at == T0 + timedelta(seconds=5)
    assert visible(tmp_path) == ["heartbeat.json"]


def test_a_crash_between_temp_write_and_rename_leaves_the_old_record(tmp_path: Path) -> None:
    path = tmp_path / "heartbeat.json"
    replace_record(path, BEAT, Beat(writer="w", count=1), clock=fixed_clock)
    new_bytes, _ = encode_record(BEAT, Beat(writer="w", count=2), written_at=T0)
    # What a writer killed before rename(2) leaves behind: a (possibly partial) hidden temp file.
    (tmp_path / ".heartbeat.json.0123456789abcdef.tmp").write_bytes(new_bytes[: len(new_bytes) // 2])
    result = read_record(path, BEAT)
    assert isinstance(result, RecordOk)
    assert result.payload.count == 1
    assert [name for name in visible(tmp_path) if not is_temporary_name(name)] == ["heartbeat.json"]
    # The next writer is not disturbed by the leftover either.
    replace_record(path, BEAT, Beat(writer="w", count=3), clock=fixed_clock)
    after = read_record(path, BEAT)
    assert isinstance(after, RecordOk)
    assert after.payload.count == 3


def test_readers_racing_a_replacing_writer_only_ever_see_whole_records(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    replace_record(path, BEAT, Beat(writer="w", count=0, tags=("x" * 5000,)), clock=fixed_clock)
    stop = threading.Event()
    seen: list[int] = []
    bad: list[object] = []

    def read_loop() -> None:
        while not stop.is_set():
            result = read_record(path, BEAT)
            if isinstance(result, RecordOk):
                seen.append(result.payload.count)
            else:
                bad.append(result)

    reader = threading.Thread(target=read_loop)
    reader.start()
    try:
        for count in range(1, 200):
            replace_record(path, BEAT, Beat(writer="w", count=count, tags=("x" * 5000,)), clock=fixed_clock)
    finally:
        stop.set()
        reader.join()
    assert bad == []
    assert seen
    assert seen == sorted(seen)


def test_missing_and_directory_and_unopenable_records(tmp_path: Path) -> None:
    assert read_record(tmp_path / "absent.json", BEAT) == RecordMissing(tmp_path / "absent.json")
    (tmp_path / "file").write_bytes(b"x")
    assert isinstance(read_record(tmp_path / "file" / "below.json", BEAT), RecordMissing)
    (tmp_path / "dir.json").mkdir()
    assert isinstance(read_record(tmp_path / "dir.json", BEAT), RecordCorrupt)
    (tmp_path / "locked.json").write_bytes(good_bytes())
    (tmp_path / "locked.json").chmod(0)
    if os.geteuid() != 0:  # root reads anything
        unreadable = read_record(tmp_path / "locked.json", BEAT)
        assert isinstance(unreadable, RecordUnreadable)
        assert unreadable.status == "unreadable"
        assert "EACCES" in unreadable.reason


def test_links_fifos_and_devices_are_never_followed_or_blocked_on(tmp_path: Path) -> None:
    """A record's name holding anything but a regular file is corrupt: a link (even to a good record) is not
    followed, a FIFO without a writer does not block the reader, a device is not read."""
    good = tmp_path / "good.json"
    good.write_bytes(good_bytes())
    assert isinstance(read_record(good, BEAT), RecordOk)
    link = tmp_path / "link.json"
    link.symlink_to(good)
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    device = tmp_path / "zero.json"
    device.symlink_to("/dev/zero")
    for path, kind in (
        (link, "a symbolic link"),
        (loop, "a symbolic link"),
        (fifo, "a FIFO"),
        (device, "a symbolic link"),
    ):
        found = read_record(path, BEAT)
        assert isinstance(found, RecordCorrupt), path
        assert found.reason == f"is {kind}, not a regular file"


def good_bytes() -> bytes:
    return encode_record(BEAT, Beat(writer="writer", count=42, tags=("a", "é")), written_at=T0)[0]


def test_every_truncation_is_corrupt() -> None:
    data = good_bytes()
    for length in range(len(data)):
        result = decode_record(data[:length], BEAT, path=Path("r.json"))
        assert isinstance(result, RecordCorrupt), length


def test_every_flipped_bit_is_corrupt_never_ok_nor_wrong_schema() -> None:
    data = good_bytes()
    for position in range(len(data)):
        for bit in range(8):
            edited = bytearray(data)
            edited[position] ^= 1 << bit
            result = decode_record(bytes(edited), BEAT, path=Path("r.json"))
            assert isinstance(result, RecordCorrupt), (position, bit)


@given(position=st.integers(min_value=0), value=st.integers(min_value=0, max_value=255))
def test_any_replaced_byte_is_corrupt(position: int, value: int) -> None:
    data = bytearray(good_bytes())
    position %= len(data)
    if data[position] == value:
        return
    data[position] = value
    assert isinstance(decode_record(bytes(data), BEAT, path=Path("r.json")), RecordCorrupt)


def test_appended_bytes_and_pretty_printing_are_corrupt() -> None:
    data = good_bytes()
    assert isinstance(decode_record(data + b"\n", BEAT, path=Path("r")), RecordCorrupt)
    assert isinstance(decode_record(data[:-1], BEAT, path=Path("r")), RecordCorrupt)
    pretty = json.dumps(json.loads(data), indent=2).encode()
    assert isinstance(decode_record(pretty, BEAT, path=Path("r")), RecordCorrupt)
    assert isinstance(decode_record(b"", BEAT, path=Path("r")), RecordCorrupt)
    assert isinstance(decode_record(b"\xff\xfe", BEAT, path=Path("r")), RecordCorrupt)


def reencode(raw: dict[str, object]) -> bytes:
    """An envelope with a recomputed checksum: intact as far as the checksum goes."""
    body = {k: v for k, v in raw.items() if k != "checksum"}
    return canonical_json({**body, "checksum": sha256_digest(body)}) + b"\n"


def test_an_intact_record_of_another_schema_or_version_is_wrong_schema(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_record_once(path, OTHER, Beat(writer="w", count=1), clock=fixed_clock)
    result = read_record(path, BEAT)
    assert result == RecordWrongSchema(path, ("heartbeat", 1), ("progress", 1))
    assert result.status == "wrong_schema"
    assert isinstance(read_record(path, OTHER), RecordOk)
    newer = tmp_path / "v2.json"
    write_record_once(newer, BEAT_V2, Beat(writer="w", count=1), clock=fixed_clock)
    assert read_record(newer, BEAT) == RecordWrongSchema(newer, ("heartbeat", 1), ("heartbeat", 2))


def test_a_checksummed_payload_that_does_not_validate_is_corrupt() -> None:
    raw = json.loads(good_bytes())
    raw["payload"] = {"writer": "w", "count": "not a number"}
    result = decode_record(reencode(raw), BEAT, path=Path("r"))
    assert isinstance(result, RecordCorrupt)
    assert "payload" in result.reason


def test_envelope_problems_are_corrupt() -> None:
    raw = json.loads(good_bytes())
    for broken in (
        {**raw, "extra": 1},
        {k: v for k, v in raw.items() if k != "schema_version"},
        {**raw, "written_at": "yesterday"},
        {**raw, "schema_name": "Not A Name"},
        {**raw, "payload": [1, 2]},
    ):
        assert isinstance(decode_record(reencode(broken), BEAT, path=Path("r")), RecordCorrupt), broken
    no_checksum = {k: v for k, v in raw.items() if k != "checksum"}
    assert isinstance(decode_record(canonical_json(no_checksum) + b"\n", BEAT, path=Path("r")), RecordCorrupt)
    assert isinstance(decode_record(b"[1]\n", BEAT, path=Path("r")), RecordCorrupt)
    assert isinstance(decode_record(b'{"a":NaN}\n', BEAT, path=Path("r")), RecordCorrupt)
    assert isinstance(decode_record(b"[" * 100_000 + b"]" * 100_000 + b"\n", BEAT, path=Path("r")), RecordCorrupt)


def test_a_record_without_a_write_time_is_valid() -> None:
    data, envelope = encode_record(BEAT, Beat(writer="w", count=1), written_at=None)
    assert envelope.written_at is None
    result = decode_record(data, BEAT, path=Path("r"))
    assert isinstance(result, RecordOk)
    assert isinstance(result.envelope, RecordEnvelope)


def test_oversized_files_are_corrupt_without_being_loaded(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    write_record_once(path, BEAT, Beat(writer="w" * 1000, count=1), clock=fixed_clock)
    result = read_record(path, BEAT, max_bytes=100)
    assert isinstance(result, RecordCorrupt)
    assert "larger" in result.reason
    assert isinstance(read_record(path, BEAT, max_bytes=path.stat().st_size), RecordOk)


def test_append_numbers_records_and_ignores_strays(tmp_path: Path) -> None:
    directory = tmp_path / "submissions"
    assert sequence_numbers(directory) == []
    first = append_record(directory, BEAT, Beat(writer="w", count=1), clock=fixed_clock)
    assert first == RecordAppended(1, directory / "0001.json", first.envelope)
    for name in (".0002.json.abc.tmp", "2.json", "00003.json", "0000.json", "notes.txt", "0002.json.bak"):
        (directory / name).write_bytes(b"x")
    second = append_record(directory, BEAT, Beat(writer="w", count=2), clock=fixed_clock)
    assert second.sequence == 2
    assert second.path.name == "0002.json"
    assert sequence_numbers(directory) == [1, 2]
    (directory / "0007.json").write_bytes(b"taken")
    assert append_record(directory, BEAT, Beat(writer="w", count=3), clock=fixed_clock).sequence == 8
    assert (directory / "0007.json").read_bytes() == b"taken"


def test_concurrent_threads_appending_get_distinct_numbers(tmp_path: Path) -> None:
    directory = tmp_path / "submissions"
    barrier = threading.Barrier(8)
    numbers: list[int] = []
    lock = threading.Lock()

    def append(index: int) -> None:
        barrier.wait()
        appended = append_record(directory, BEAT, Beat(writer=f"t{index}", count=index), clock=fixed_clock)
        with lock:
            numbers.append(appended.sequence)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(numbers) == list(range(1, 9))


def test_wrong_payload_type_and_bad_schema_definitions_are_bugs(tmp_path: Path) -> None:
    class Other(BaseModel):
        x: int = 0

    with pytest.raises(InternalError):
        write_record_once(tmp_path / "r.json", BEAT, Other(), clock=fixed_clock)  # type: ignore[misc]
    assert not (tmp_path / "r.json").exists()
    with pytest.raises(InternalError):
        RecordSchema("Bad Name", 1, Beat)
    with pytest.raises(InternalError):
        RecordSchema("ok", 0, Beat)


def test_an_unwritable_location_is_an_error_not_a_result(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(UnavailableError) as caught:
        write_record_once(tmp_path / "file" / "r.json", BEAT, Beat(writer="w", count=1), clock=fixed_clock)
    assert caught.value.info.file == str(tmp_path / "file" / "r.json")
    with pytest.raises(UnavailableError):
        replace_record(tmp_path / "file" / "r.json", BEAT, Beat(writer="w", count=1), clock=fixed_clock)


_JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(data=st.dictionaries(st.text(max_size=8), _JSON, max_size=6))
def test_the_fast_encoder_writes_exactly_the_canonical_bytes(data: dict[str, object]) -> None:
    # encode_record and plan_digest encode JSON data with one json.dumps: it must equal canonical_json
    assert canonical_json_data(data) == canonical_json(data)
