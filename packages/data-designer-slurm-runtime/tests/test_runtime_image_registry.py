"""The image registry (write-once generations, tombstones) and the sha256 cached by file identity."""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime
from pathlib import Path

from data_designer.slurm.contracts.records import ImageEntry, Requester
from data_designer.slurm.runtime.images import ImageRegistry, cached_digest, file_identity
from data_designer.slurm.runtime.store import PRIVATE_MODES

WHEN = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
WHO = Requester(user="u", host="h", pid=1, time=WHEN)


def entry(name: str, generation: int, *, removed: bool = False, path: str = "/img/a.sqsh") -> ImageEntry:
    if removed:
        return ImageEntry(name=name, generation=generation, removed=True, added_by=WHO)
    return ImageEntry(
        name=name,
        generation=generation,
        role="serving",
        format="squashfs",
        source=path,
        source_kind="squashfs",
        path=path,
        size=4,
        added_by=WHO,
    )


def test_generations_are_write_once_and_the_newest_is_current(tmp_path: Path) -> None:
    registry = ImageRegistry(tmp_path)
    assert registry.current("vllm") is None
    assert registry.names() == ()
    assert registry.write_generation(entry("vllm", 1), PRIVATE_MODES, clock=lambda: WHEN)
    assert not registry.write_generation(entry("vllm", 1, path="/img/other.sqsh"), PRIVATE_MODES, clock=lambda: WHEN)
    assert registry.current("vllm") == entry("vllm", 1)
    assert registry.write_generation(entry("vllm", 2, path="/img/b.sqsh"), PRIVATE_MODES, clock=lambda: WHEN)
    history = registry.history("vllm")
    assert [e.generation for e in history.entries] == [1, 2]
    assert history.highest == 2
    assert history.current is not None
    assert history.current.path == "/img/b.sqsh"
    assert registry.write_generation(entry("vllm", 3, removed=True), PRIVATE_MODES, clock=lambda: WHEN)
    assert registry.current("vllm") is None  # a tombstone: the name has no image now
    assert registry.names() == ("vllm",)


def test_an_unreadable_generation_is_reported_and_still_counts_for_the_next_number(tmp_path: Path) -> None:
    registry = ImageRegistry(tmp_path)
    registry.write_generation(entry("client", 1), PRIVATE_MODES, clock=lambda: WHEN)
    (registry.name_dir("client") / "0002.json").write_text("{not json", encoding="utf-8")
    history = registry.history("client")
    assert [e.generation for e in history.entries] == [1]
    assert history.highest == 2
    assert history.unreadable
    assert history.unreadable[0].startswith("0002.json")


def test_the_digest_is_hashed_once_per_identity(tmp_path: Path) -> None:
    image = tmp_path / "a.sqsh"
    image.write_bytes(b"hsqs" + b"x" * 5000)
    cache = tmp_path / "digests"
    first = cached_digest(image, cache, PRIVATE_MODES, clock=lambda: WHEN)
    assert first.hashed
    assert first.sha256 == hashlib.sha256(image.read_bytes()).hexdigest()
    again = cached_digest(image, cache, PRIVATE_MODES, clock=lambda: WHEN)
    assert (again.hashed, again.sha256, again.identity) == (False, first.sha256, first.identity)
    os.utime(image, ns=(1, first.identity.mtime_ns + 1_000))  # touched: a new identity, one re-hash
    touched = cached_digest(image, cache, PRIVATE_MODES, clock=lambda: WHEN)
    assert touched.hashed
    assert touched.sha256 == first.sha256
    assert not cached_digest(image, cache, PRIVATE_MODES, clock=lambda: WHEN).hashed
    with image.open("ab") as handle:  # appended: new bytes, new digest
        handle.write(b"more")
    appended = cached_digest(image, cache, PRIVATE_MODES, clock=lambda: WHEN)
    assert appended.hashed
    assert appended.sha256 == hashlib.sha256(image.read_bytes()).hexdigest()
    assert file_identity(image).size == 5008
