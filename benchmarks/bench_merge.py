"""``merge`` of 100 and 1,000 shards of real Parquet parts: throughput against a plain copy, and peak memory.

The fixtures are synthetic run directories (``runtime.testing.write_run_directory(parquet_parts=True)``), every
shard succeeded, each shard's one part holding ``ROWS_QUICK`` (full mode: ``ROWS_FULL``) records whose column
``a`` carries about ``TEXT_BYTES`` bytes of prose-like words (``part_text_bytes``), written with Parquet's default
codec as the client worker writes them. Each merge runs in a fresh interpreter (``benchmarks/_merge_probe.py``:
``services.merge_run(RUN_DIR, output=...)``, the process doing nothing else), into a new directory on the same
filesystem as the fixture; the copy, in this process, is ``shutil.copyfile`` of every source part into a new
directory there too.

- **merge throughput**: the source parts' bytes over the ``merge_run`` call's wall time (MB/s, 10**6 bytes), and
  records per second; **copy throughput**: the same bytes over the copy's wall time; **merge/copy**: their ratio
  (target at least 0.5).
- **peak RSS**: the merge process's peak resident set (Arrow's buffers are invisible to ``tracemalloc``), read as
  ``VmHWM``: its ``ru_maxrss`` (in the note) starts at this process's RSS when it forked, which Linux carries over
  ``execve``, so it would measure the benchmark runner. The note gives the peak after the imports, before the merge; **peak RSS 1,000/100 shards**: target at most 1.10 (memory
  bounded by a row group and a part, not by the run).

Quick mode: one merge and one copy per size; full mode: the median of 3, with 4x the rows per shard. The fixtures
are cached under ``/dev/shm`` when it has room (else the benchmark cache) and rebuilt when the writer, contracts
or planner change (``bench_status.writer_digest``) or the sizes do.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._harness import Benchmark, Figure, RunContext, Target, file_lock
from benchmarks.bench_status import writer_digest
from data_designer.slurm.runtime.testing import write_run_directory

HERE = Path(__file__).resolve().parent
PROBE = HERE / "_merge_probe.py"
SIZES = (100, 1_000)
ROWS_QUICK = 1_000
ROWS_FULL = 4_000
TEXT_BYTES = 300
RATIO_TARGET = 0.5
RSS_RATIO_TARGET = 1.10
SHM = Path("/dev/shm")
SHM_ROOM_BYTES = 2 << 30
MARKER = "fixture.json"
PROBE_TIMEOUT_S = 600
MB = 1e6
MIB = 1024 * 1024


def _base(ctx: RunContext) -> tuple[Path, str]:
    if SHM.is_dir() and os.access(SHM, os.W_OK) and shutil.disk_usage(SHM).free >= SHM_ROOM_BYTES:
        return SHM / "data-designer-slurm-benchmarks" / "merge", "fixtures on /dev/shm (tmpfs)"
    return ctx.cache / "merge", f"fixtures under the cache dir {ctx.cache} (/dev/shm missing or short of room)"


@dataclass(frozen=True)
class Fixture:
    shards: int
    rows: int
    run_dir: Path
    parts: tuple[Path, ...]
    bytes: int
    built_s: float | None


def fixture(base: Path, shards: int, rows: int, digest: str) -> Fixture:
    """The cached run of ``shards`` shards of ``rows`` records, written unless a complete one is there."""
    home = base / f"shards-{shards}-rows-{rows}"
    marker = home / MARKER
    key = {"digest": digest, "shards": shards, "rows": rows, "text_bytes": TEXT_BYTES}
    built_s: float | None = None
    found: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        found = json.loads(marker.read_text(encoding="utf-8"))
    if found.get("key") != key:
        shutil.rmtree(home, ignore_errors=True)
        (home / "ws").mkdir(parents=True)
        start = time.perf_counter()
        layout = write_run_directory(
            home / "ws", shards=shards, records_per_shard=rows, parquet_parts=True, part_text_bytes=TEXT_BYTES
        )
        built_s = time.perf_counter() - start
        found = {"key": key, "run_dir": str(layout.run_dir)}
        marker.write_text(json.dumps(found), encoding="utf-8")
    run_dir = Path(found["run_dir"])
    parts = tuple(sorted(run_dir.glob("shards/*/attempts/*/output/part-*.parquet")))
    if len(parts) < shards:
        raise RuntimeError(f"{run_dir} holds {len(parts)} part(s) for {shards} shards: remove {home} and rerun")
    return Fixture(shards, rows, run_dir, parts, sum(p.stat().st_size for p in parts), built_s)


def probe(run_dir: Path, output: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-I", str(PROBE), str(run_dir), str(output)],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{PROBE.name} {run_dir} exited {done.returncode}:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def copy_seconds(parts: tuple[Path, ...], into: Path) -> float:
    """Wall time of ``shutil.copyfile`` of every part into a new directory ``into`` (removed afterwards)."""
    into.mkdir()
    try:
        start = time.perf_counter()
        for number, part in enumerate(parts):
            shutil.copyfile(part, into / f"{number:05d}.parquet")
        return time.perf_counter() - start
    finally:
        shutil.rmtree(into, ignore_errors=True)


@dataclass(frozen=True)
class Measured:
    item: Fixture
    merges: list[dict[str, Any]]
    copies: list[float]

    @property
    def merge_s(self) -> float:
        return statistics.median(float(m["merge_s"]) for m in self.merges)

    @property
    def copy_s(self) -> float:
        return statistics.median(self.copies)

    @property
    def rss_kib(self) -> int:
        return max(int(m["hwm_kib"]) for m in self.merges)


def measure(item: Fixture, work: Path, repeats: int) -> Measured:
    merges: list[dict[str, Any]] = []
    copies: list[float] = []
    for attempt in range(max(1, repeats)):
        output = work / f"merge-{item.shards}-{attempt}"
        try:
            merges.append(probe(item.run_dir, output))
        finally:
            shutil.rmtree(output, ignore_errors=True)
        copies.append(copy_seconds(item.parts, work / f"copy-{item.shards}-{attempt}"))
    expected = item.shards * item.rows
    for merged in merges:
        if merged["outcome"] != "merged" or merged["records"] != expected or not merged["complete"]:
            raise RuntimeError(f"the merge of {item.run_dir} answered {merged}, expected {expected:,} records merged")
    return Measured(item, merges, copies)


def figures(m: Measured, built: str) -> list[Figure]:
    item = m.item
    label = f"{item.shards:,} shards"
    last = m.merges[-1]
    merge_mb_s = item.bytes / MB / m.merge_s
    copy_mb_s = item.bytes / MB / m.copy_s
    source = f"{len(item.parts):,} part(s) of {item.rows:,} records, {item.bytes / MB:.1f} MB of Parquet"
    walls = ", ".join(f"{float(s['merge_s']):.2f}" for s in m.merges)
    merge_note = (
        f"{source} in {m.merge_s:.2f}s (merges {walls}); wrote "
        f"{last['files']} file(s), {int(last['bytes']) / MB:.1f} MB; imports {float(last['imports_s']):.2f}s; {built}"
    )
    copy_note = f"shutil.copyfile of the {len(item.parts):,} parts: {', '.join(f'{s:.3f}s' for s in m.copies)}"
    rss_note = (
        f"VmHWM of the merge's process; after the imports, before the merge: {int(last['hwm_kib_before']) / 1024:.0f} "
        f"MiB; ru_maxrss {int(last['max_rss_kib']) / 1024:.0f} MiB (floored by this process's RSS at the fork)"
    )
    return [
        Figure(f"{label}: merge throughput", merge_mb_s, "MB/s", note=merge_note),
        Figure(f"{label}: merge records/s", item.shards * item.rows / m.merge_s, "records/s"),
        Figure(f"{label}: copy throughput", copy_mb_s, "MB/s", note=copy_note),
        Figure(f"{label}: merge/copy", merge_mb_s / copy_mb_s, "ratio", Target.at_least(RATIO_TARGET)),
        Figure(f"{label}: peak RSS", m.rss_kib / 1024, "MiB", note=rss_note),
    ]


def run(ctx: RunContext) -> list[Figure]:
    repeats = ctx.repeats(quick=1, full=3)
    rows = ROWS_QUICK if ctx.quick else ROWS_FULL
    base, where = _base(ctx)
    base.mkdir(parents=True, exist_ok=True)
    digest = writer_digest()
    out: list[Figure] = []
    measured: dict[int, Measured] = {}
    with file_lock(base / ".lock"):  # another run of this benchmark shares the fixtures
        work = base / f"work-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        try:
            for shards in SIZES:
                item = fixture(base, shards, rows, digest)
                built = f"{where}: " + ("reused" if item.built_s is None else f"written in {item.built_s:.1f}s")
                measured[shards] = measure(item, work, repeats)
                out += figures(measured[shards], built)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    small, large = measured[SIZES[0]], measured[SIZES[-1]]
    out.append(
        Figure(
            f"peak RSS {SIZES[-1]:,}/{SIZES[0]:,} shards",
            large.rss_kib / small.rss_kib,
            "ratio",
            Target.at_most(RSS_RATIO_TARGET),
            note=f"{large.rss_kib / 1024:.0f} MiB / {small.rss_kib / 1024:.0f} MiB",
        )
    )
    return out


BENCHMARK = Benchmark(
    summary="'merge' of 100 and 1,000 shards of Parquet parts from a fresh process: MB/s against a copy, peak RSS",
    run=run,
)
