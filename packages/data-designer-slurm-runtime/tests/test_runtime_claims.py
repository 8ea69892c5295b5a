"""Claims by link(2): exactly one claimant wins, the owner is read back, attempt numbers are distinct under races."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from data_designer.slurm.contracts.records import CLAIM_SCHEMA, ClaimOwner
from data_designer.slurm.runtime.store._claims import (
    AlreadyClaimed,
    AttemptClaim,
    Claimed,
    attempt_numbers,
    claim,
    next_attempt_number,
    owner_from_environment,
)
from data_designer.slurm.runtime.store._record_io import RecordCorrupt, RecordOk, read_record

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def owner(pid: int = 100, **changes: object) -> ClaimOwner:
    base = ClaimOwner(host="node-1", pid=pid, job_id="4242", array_task=3, time=T0)
    return base.model_copy(update=changes)


def test_a_free_claim_is_taken_and_records_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "claim"
    result = claim(path, owner())
    assert result == Claimed(path, owner())
    stored = read_record(path, CLAIM_SCHEMA)
    assert isinstance(stored, RecordOk)
    assert stored.payload == owner()
    assert stored.envelope.written_at == T0
    assert os.listdir(tmp_path) == ["claim"]


def test_a_held_claim_is_not_taken_and_names_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "claim"
    claim(path, owner(pid=1))
    before = path.read_bytes()
    result = claim(path, owner(pid=2))
    assert isinstance(result, AlreadyClaimed)
    assert result.owner == owner(pid=1)
    assert isinstance(result.evidence, RecordOk)
    assert path.read_bytes() == before


def test_a_corrupt_claim_still_blocks_and_is_reported_as_unreadable_owner(tmp_path: Path) -> None:
    path = tmp_path / "claim"
    path.write_bytes(b"{")
    result = claim(path, owner())
    assert isinstance(result, AlreadyClaimed)
    assert result.owner is None
    assert isinstance(result.evidence, RecordCorrupt)
    assert path.read_bytes() == b"{"


def test_threads_racing_for_one_claim_have_exactly_one_winner(tmp_path: Path) -> None:
    path = tmp_path / "claim"
    barrier = threading.Barrier(10)
    results: list[Claimed | AlreadyClaimed] = []
    lock = threading.Lock()

    def take(pid: int) -> None:
        barrier.wait()
        result = claim(path, owner(pid=pid))
        with lock:
            results.append(result)

    threads = [threading.Thread(target=take, args=(pid,)) for pid in range(1, 11)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [r for r in results if isinstance(r, Claimed)]
    assert len(winners) == 1
    losers = [r for r in results if isinstance(r, AlreadyClaimed)]
    assert len(losers) == 9
    assert all(r.owner == winners[0].owner for r in losers)


def test_attempt_numbers_count_up_and_skip_strays(tmp_path: Path) -> None:
    attempts = tmp_path / "shards" / "00000" / "attempts"
    assert attempt_numbers(attempts) == []
    first = next_attempt_number(attempts, owner())
    assert first.number == 1
    assert first.directory == attempts / "0001"
    assert first.claim.owner.attempt == 1
    assert first.claim.path == attempts / "0001" / "claim"
    second = next_attempt_number(attempts, owner())
    assert second.number == 2
    stored = read_record(second.claim.path, CLAIM_SCHEMA)
    assert isinstance(stored, RecordOk)
    assert stored.payload.attempt == 2
    for stray in (".0003.tmp", "3", "00003", "0000", "notes"):
        (attempts / stray).mkdir()
    assert attempt_numbers(attempts) == [1, 2]
    assert next_attempt_number(attempts, owner()).number == 3


def test_an_unclaimed_or_blocked_number_is_skipped_never_reused(tmp_path: Path) -> None:
    attempts = tmp_path / "attempts"
    (attempts / "0001").mkdir(parents=True)  # a claimant died between mkdir and link
    (attempts / "0002").write_bytes(b"a file, not a directory")
    result = next_attempt_number(attempts, owner())
    assert result.number == 3
    assert not (attempts / "0001" / "claim").exists()
    # A directory that exists below the highest number is never revisited.
    assert next_attempt_number(attempts, owner()).number == 4


def test_threads_racing_for_attempts_get_distinct_numbers(tmp_path: Path) -> None:
    attempts = tmp_path / "attempts"
    barrier = threading.Barrier(8)
    taken: list[AttemptClaim] = []
    lock = threading.Lock()

    def take(pid: int) -> None:
        barrier.wait()
        result = next_attempt_number(attempts, owner(pid=pid))
        with lock:
            taken.append(result)

    threads = [threading.Thread(target=take, args=(pid,)) for pid in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(t.number for t in taken) == list(range(1, 9))
    for attempt in taken:
        stored = read_record(attempt.claim.path, CLAIM_SCHEMA)
        assert isinstance(stored, RecordOk)
        assert stored.payload == attempt.claim.owner


_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from datetime import UTC, datetime
    from pathlib import Path
    from data_designer.slurm.contracts.records import ClaimOwner
    from data_designer.slurm.runtime.store._claims import Claimed, claim, next_attempt_number

    mode, target, go, index = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    Path(str(go) + f".ready-{index}").touch()
    while not go.exists():
        time.sleep(0.001)
    me = ClaimOwner(host="h", pid=index + 1, time=datetime.now(UTC))
    if mode == "claim":
        print(json.dumps({"won": isinstance(claim(target, me), Claimed)}))
    else:
        print(json.dumps({"number": next_attempt_number(target, me).number}))
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
def test_processes_racing_for_one_claim_have_exactly_one_winner(tmp_path: Path) -> None:
    outputs = run_children("claim", tmp_path / "claim", tmp_path / "go", 6)
    assert sum(1 for out in outputs if out["won"]) == 1
    assert isinstance(read_record(tmp_path / "claim", CLAIM_SCHEMA), RecordOk)


@pytest.mark.slow
def test_processes_racing_for_attempts_get_distinct_numbers(tmp_path: Path) -> None:
    attempts = tmp_path / "attempts"
    outputs = run_children("attempt", attempts, tmp_path / "go", 6)
    assert sorted(int(str(out["number"])) for out in outputs) == [1, 2, 3, 4, 5, 6]
    assert attempt_numbers(attempts) == [1, 2, 3, 4, 5, 6]
    pids = set()
    for number in range(1, 7):
        stored = read_record(attempts / f"{number:04d}" / "claim", CLAIM_SCHEMA)
        assert isinstance(stored, RecordOk)
        assert stored.payload.attempt == number
        pids.add(stored.payload.pid)
    assert pids == set(range(1, 7))


def test_owner_from_a_slurm_array_task_environment() -> None:
    environ = {
        "SLURM_JOB_ID": "4245",
        "SLURM_ARRAY_JOB_ID": "4242",
        "SLURM_ARRAY_TASK_ID": "3",
        "SLURM_RESTART_COUNT": "2",
    }
    got = owner_from_environment(environ, clock=lambda: T0, host="node-7", pid=77)
    assert got == ClaimOwner(host="node-7", pid=77, job_id="4242", array_task=3, restart_count=2, time=T0)


def test_owner_outside_slurm_uses_this_process() -> None:
    got = owner_from_environment({"SLURM_ARRAY_TASK_ID": "x"}, clock=lambda: T0)
    assert got.pid == os.getpid()
    assert got.host
    assert got.job_id is None
    assert got.array_task is None
    assert got.restart_count == 0
    assert got.attempt is None
