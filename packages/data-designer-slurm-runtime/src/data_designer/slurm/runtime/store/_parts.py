"""Whether the parts a valid manifest lists are still what it says: the cheap check and the verifying one.

:func:`check_part` is what every read of a run does for every part of every valid manifest: one ``lstat``, no
byte read. The part must be one plain name inside its attempt's ``output/``, a regular file (not a link, a FIFO
or a directory) of the manifest's size. :func:`verify_parts` (``status --verify``, ``retry --verify``) also
hashes every part that passed it against the manifest's sha256: in parallel threads (``hashlib`` releases the
GIL while it hashes), each streaming its file through one reusable buffer, so memory is bounded by the number of
workers, never by a part's size. Files are opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked to be regular
after the open: a link or a FIFO swapped in after the ``lstat`` is refused, never followed or blocked on.

A damaged part counts for nothing (``store.coverage_from``): its range is missing again.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from data_designer.slurm.contracts import PartDamage, VerifySummary, find_control_character
from data_designer.slurm.contracts.records import IndexRange, OutputPart
from data_designer.slurm.runtime.store._run_files import OPEN_FLAGS

HASH_BUFFER_BYTES = 1 << 20
"""Each worker's read buffer: large reads keep the hash, not the system calls, the cost."""

Progress = Callable[[int, int, int, int], None]
"""``(parts done, parts total, bytes done, bytes total)``, called from the calling thread as parts finish."""


@dataclass(frozen=True)
class PartRef:
    """One part of one attempt's valid manifest, located in the run directory."""

    shard: int
    attempt: int
    part: OutputPart
    path: str
    """Relative to the run directory: ``shards/NNNNN/attempts/NNNN/output/<part>``."""

    @property
    def range(self) -> IndexRange:
        return IndexRange(self.part.first_index, self.part.first_index + self.part.records)

    def damage(self, problem: str, detail: str) -> PartDamage:
        return PartDamage(
            shard=self.shard,
            attempt=self.attempt,
            path=self.path,
            range=self.range,
            problem=problem,  # type: ignore[arg-type]  # one of PartProblem, by the callers below
            detail=detail,
        )


def plain_part_name(name: str) -> bool:
    """A manifest's part path is one plain file name inside its ``output/``: no separator, no ``..``, not hidden."""
    return (
        bool(name)
        and "/" not in name
        and "\\" not in name
        and not name.startswith(".")
        and (find_control_character(name) is None)
    )


def looks_intact(output_dir: str, part: OutputPart) -> bool:
    """The cheap check's fast path (what every read does for every part, 10,000s per ``status``): True when the
    part is a plain name of a regular file of the manifest's size in ``output_dir``; False sends the caller to
    :func:`check_part` for the reason."""
    name = part.path
    if "/" in name or name.startswith(".") or not name.isprintable():
        return False
    try:
        found = os.lstat(f"{output_dir}/{name}")
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_size == part.bytes


def check_part(run_dir: str, ref: PartRef) -> PartDamage | None:
    """The cheap check: a plain name, a regular file, the manifest's size (one ``lstat``); None when it holds."""
    if not plain_part_name(ref.part.path):
        return ref.damage("bad_path", f"its manifest names {ref.part.path!r}, not one plain name inside output/")
    try:
        found = os.lstat(f"{run_dir}/{ref.path}")
    except FileNotFoundError:
        return ref.damage("missing", "the file is gone")
    except OSError as exc:
        return ref.damage("unreadable", f"it cannot be examined: {exc.strerror or exc}")
    if not stat.S_ISREG(found.st_mode):
        return ref.damage("not_a_file", f"it is {_kind(found.st_mode)}, not a regular file")
    if found.st_size != ref.part.bytes:
        return ref.damage("size", f"it holds {found.st_size} bytes, its manifest says {ref.part.bytes}")
    return None


def hash_part(run_dir: str, ref: PartRef, buffer: bytearray | None = None) -> PartDamage | None:
    """The verifying check: the cheap one, then the file's sha256 against the manifest's, streamed through
    ``buffer`` (memory bounded by its size); None when every byte is what the manifest says."""
    cheap = check_part(run_dir, ref)
    if cheap is not None:
        return cheap
    view = memoryview(buffer if buffer is not None else bytearray(HASH_BUFFER_BYTES))
    try:
        fd = os.open(f"{run_dir}/{ref.path}", OPEN_FLAGS)
    except OSError as exc:
        return ref.damage("unreadable", f"it cannot be opened: {exc.strerror or exc}")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ref.damage("not_a_file", "it was replaced by something that is not a regular file")
        found, size = stream_sha256(fd, view)
    except OSError as exc:
        return ref.damage("unreadable", f"it cannot be read: {exc.strerror or exc}")
    finally:
        os.close(fd)
    if size != ref.part.bytes:
        return ref.damage("size", f"it holds {size} bytes, its manifest says {ref.part.bytes}")
    if found != ref.part.sha256:
        return ref.damage("sha256", f"its sha256 is {found[:12]}..., its manifest says {ref.part.sha256[:12]}...")
    return None


def stream_sha256(fd: int, view: memoryview) -> tuple[str, int]:
    """The sha256 (hex) of everything left to read on ``fd`` and how many bytes that was, read through ``view``:
    memory bounded by its size, whatever the file's."""
    digest = hashlib.sha256()
    size = 0
    while True:
        n = os.readv(fd, [view])
        if n == 0:
            return digest.hexdigest(), size
        digest.update(view[:n])
        size += n


def default_workers() -> int:
    """One hashing thread per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def verify_parts(
    run_dir: str,
    refs: Sequence[PartRef],
    *,
    workers: int | None = None,
    on_progress: Progress | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> tuple[tuple[PartDamage, ...], VerifySummary]:
    """Hash every part of ``refs`` (``workers`` threads, default one per core); the damaged ones, in ``refs``'
    order, and what was hashed. Parts are taken largest first so the last worker does not finish alone."""
    count = max(1, min(workers or default_workers(), len(refs) or 1))
    started = monotonic()
    total_bytes = sum(ref.part.bytes for ref in refs)
    order = sorted(range(len(refs)), key=lambda i: -refs[i].part.bytes)
    local = threading.local()
    found: dict[int, PartDamage] = {}
    done_parts = done_bytes = 0

    def one(i: int) -> tuple[int, PartDamage | None]:
        buffer = getattr(local, "buffer", None)
        if buffer is None:
            buffer = local.buffer = bytearray(HASH_BUFFER_BYTES)
        return i, hash_part(run_dir, refs[i], buffer)

    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="verify") as pool:
        for future in as_completed([pool.submit(one, i) for i in order]):
            i, damage = future.result()
            if damage is not None:
                found[i] = damage
            done_parts += 1
            done_bytes += refs[i].part.bytes
            if on_progress is not None:
                on_progress(done_parts, len(refs), done_bytes, total_bytes)
    damages = tuple(found[i] for i in sorted(found))
    summary = VerifySummary(
        parts=len(refs),
        bytes=total_bytes,
        seconds=max(0.0, monotonic() - started),
        workers=count,
        damaged=len(damages),
    )
    return damages, summary


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "a special file"
