"""``status --verify`` of 100 and 1,000 shards of real Parquet parts: hashing throughput against ``sha256sum``.

The fixtures are synthetic run directories (``runtime.testing.write_run_directory(parquet_parts=True)``), every
shard succeeded, each shard's one part holding ``ROWS_QUICK`` (full mode: ``ROWS_FULL``) records whose column ``a``
carries about ``TEXT_BYTES_QUICK`` (full: ``TEXT_BYTES_FULL``) bytes of prose-like words: parts of about 130 KiB
(full: about 1 MiB), so that in full mode hashing, not the files' count, is the cost. The parts hashed are those
``store.contributing_parts(store.read_run(...))`` names, which is what ``status --verify`` hashes.

Three measurements per size, interleaved (each repeat runs all three, in an order rotated from one repeat to the
next), each figure the median of its repeats:

- **CLI**: ``data-designer slurm status RUN_DIR --verify --no-refresh --json`` in a fresh interpreter, through
  ``benchmarks/_cli_probe.py`` (what the console script does), as ``bench_status`` runs the CLI. Its wall time is
  the whole process: interpreter start, the host CLI's imports, ``read_run``, the hashing (one thread per core),
  the JSON on stdout. The JSON's ``verify`` summary (parts, damaged, its own seconds) is checked and noted.
- **in process**: ``store.verify_parts(run_dir, refs)`` in this process (default workers: one per core), the refs
  read once beforehand, untimed: the hashing alone, without the process start.
- **sha256sum**: ``printf '%s\\0' <paths> | xargs -0 -P <nproc> -n <chunk> sha256sum > /dev/null`` run by ``bash``
  in the run directory, the same part files (paths relative to it), ``chunk = ceil(parts / nproc)``: exactly one
  ``sha256sum`` process per core, each given an equal share of equally sized parts (the fewest process starts
  that keeps every core busy; smaller chunks would only add starts). Its wall time includes ``bash``, ``xargs``
  and every ``sha256sum`` start, as the CLI's includes its own start.

Throughput is the parts' bytes (MB, 10**6) over the wall time; the target is CLI/sha256sum at least 0.8 at both
sizes (the in-process ratio is printed without a target). Before the timed repeats each side runs once unmeasured
(the warm-up; the sha256sum warm-up's digests are checked against the manifests'), so every timed run reads the
same warm files: the fixtures live on ``/dev/shm`` when it has room (tmpfs: always in memory), else under the
benchmark cache, where the warm-ups bring them into the page cache. Quick mode: 3 repeats; full mode: 5. Fixtures
are cached and rebuilt when the writer, contracts or planner change (``bench_status.writer_digest``) or the sizes
do.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._harness import Benchmark, Figure, Prerequisite, RunContext, Target, file_lock
from benchmarks.bench_status import writer_digest
from data_designer.slurm.contracts import RunStatus
from data_designer.slurm.runtime.store import PartRef, RunLayout, contributing_parts, read_run, verify_parts
from data_designer.slurm.runtime.testing import write_run_directory

HERE = Path(__file__).resolve().parent
CLI_PROBE = HERE / "_cli_probe.py"
SIZES = (100, 1_000)
ROWS_QUICK = 500
TEXT_BYTES_QUICK = 600
"""Quick mode: parts of about 130 KiB (the 1,000-shard fixture writes in about 10 s on 2 cores)."""
ROWS_FULL = 2_600
TEXT_BYTES_FULL = 1_000
"""Full mode: parts of about 1 MiB (1,000 shards: about 1 GiB to hash)."""
RATIO_TARGET = 0.8
SHM = Path("/dev/shm")
SHM_ROOM_BYTES = 2 << 30
MARKER = "fixture.json"
TIMEOUT_S = 600
MB = 1e6
MIB = 1024 * 1024
TOOLS = ("bash", "xargs", "sha256sum", "nproc")
SHA256SUM_SCRIPT = 'printf "%s\\0" "${@:3}" | xargs -0 -P "$1" -n "$2" sha256sum'
"""Run as ``bash -c SCRIPT bash PROCESSES CHUNK PATH...``; stdout goes to /dev/null (timed) or a pipe (warm-up)."""


def _tools_missing() -> str | None:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    return f"not on PATH: {', '.join(missing)}" if missing else None


COREUTILS = Prerequisite(
    name="coreutils",
    description="bash, xargs, nproc and sha256sum on PATH (the baseline the hashing is compared with)",
    check=_tools_missing,
)


# -- fixtures -------------------------------------------------------------------------------------


def _base(ctx: RunContext) -> tuple[Path, str]:
    if SHM.is_dir() and os.access(SHM, os.W_OK) and shutil.disk_usage(SHM).free >= SHM_ROOM_BYTES:
        return SHM / "data-designer-slurm-benchmarks" / "verify", "fixtures on /dev/shm (tmpfs)"
    return ctx.cache / "verify", f"fixtures under the cache dir {ctx.cache} (/dev/shm missing or short of room)"


@dataclass(frozen=True)
class Fixture:
    shards: int
    run_dir: Path
    refs: tuple[PartRef, ...]
    bytes: int
    built_s: float | None
    """Seconds to write it now; None when a cached one was reused."""


def fixture(base: Path, shards: int, rows: int, text_bytes: int, digest: str) -> Fixture:
    """The cached run of ``shards`` shards of ``rows`` records, written unless a complete one is there."""
    home = base / f"shards-{shards}-rows-{rows}-text-{text_bytes}"
    marker = home / MARKER
    key = {"digest": digest, "shards": shards, "rows": rows, "text_bytes": text_bytes}
    built_s: float | None = None
    found: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        found = json.loads(marker.read_text(encoding="utf-8"))
    if found.get("key") != key:
        shutil.rmtree(home, ignore_errors=True)
        (home / "ws").mkdir(parents=True)
        start = time.perf_counter()
        layout = write_run_directory(
            home / "ws", shards=shards, records_per_shard=rows, parquet_parts=True, part_text_bytes=text_bytes
        )
        built_s = time.perf_counter() - start
        found = {"key": key, "run_dir": str(layout.run_dir)}
        marker.write_text(json.dumps(found), encoding="utf-8")
    run_dir = Path(found["run_dir"])
    refs = contributing_parts(read_run(RunLayout.of_run_dir(run_dir)))
    if len(refs) < shards:
        raise RuntimeError(f"{run_dir} has {len(refs)} contributing part(s) for {shards} shards: remove {home}")
    return Fixture(shards, run_dir, refs, sum(ref.part.bytes for ref in refs), built_s)


# -- the three sides ------------------------------------------------------------------------------


def _cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DATA_DESIGNER", "XDG_"))}
    env.update(HOME=str(home), COLUMNS="100", NO_COLOR="1")
    return env


@dataclass(frozen=True)
class CliRun:
    wall_s: float
    verify_s: float
    workers: int


def cli_verify(item: Fixture, scratch: Path) -> CliRun:
    """``data-designer slurm status RUN_DIR --verify --no-refresh --json`` in a fresh interpreter; its wall time."""
    home = scratch / "home"
    home.mkdir(parents=True, exist_ok=True)
    out = scratch / "cli-probe.json"
    out.unlink(missing_ok=True)
    command = [
        *(sys.executable, "-I", str(CLI_PROBE), str(out)),
        *("slurm", "status", str(item.run_dir), "--verify", "--no-refresh", "--json"),
    ]
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=home, env=_cli_env(home), capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    wall = time.perf_counter() - start
    if done.returncode != 0 or not out.is_file():
        raise RuntimeError(f"data-designer slurm status --verify exited {done.returncode}:\n{done.stderr[-3000:]}")
    summary = RunStatus.model_validate_json(done.stdout).verify
    if summary is None or summary.parts != len(item.refs) or summary.bytes != item.bytes or summary.damaged:
        raise RuntimeError(f"status --verify of {item.run_dir} answered {summary}, expected {len(item.refs)} parts")
    return CliRun(wall, summary.seconds, summary.workers)


def in_process_verify(item: Fixture) -> tuple[float, int]:
    """The wall time of ``verify_parts`` over the fixture's parts in this process, and its workers."""
    start = time.perf_counter()
    damages, summary = verify_parts(str(item.run_dir), item.refs)
    wall = time.perf_counter() - start
    if damages or summary.parts != len(item.refs):
        raise RuntimeError(f"verify_parts of {item.run_dir} found {len(damages)} damaged part(s): {damages[:3]}")
    return wall, summary.workers


def sha256sum(item: Fixture, processes: int, chunk: int, *, check: bool = False) -> float:
    """The wall time of ``printf | xargs -P processes -n chunk sha256sum`` over the fixture's parts."""
    command = ["bash", "-c", SHA256SUM_SCRIPT, "bash", str(processes), str(chunk), *(ref.path for ref in item.refs)]
    start = time.perf_counter()
    done = subprocess.run(
        command,
        cwd=item.run_dir,
        stdout=subprocess.PIPE if check else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=TIMEOUT_S,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"sha256sum over {item.run_dir} exited {done.returncode}:\n{done.stderr[-3000:]!r}")
    if check:
        digests: dict[str, str] = {}
        for line in done.stdout.decode().splitlines():
            found, path = line.split("  ", 1)
            digests[path] = found
        wrong = [ref.path for ref in item.refs if digests.get(ref.path) != ref.part.sha256]
        if wrong:
            raise RuntimeError(f"sha256sum disagrees with the manifests on {len(wrong)} part(s): {wrong[:3]}")
    return wall


def cores() -> int:
    """What ``nproc`` answers (the CPUs this process may run on), also ``verify_parts``' default workers."""
    return int(subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout)


@dataclass
class Measured:
    item: Fixture
    processes: int
    chunk: int
    cli: list[CliRun]
    inproc: list[float]
    inproc_workers: int
    sha: list[float]

    @property
    def cli_s(self) -> float:
        return statistics.median(run.wall_s for run in self.cli)

    @property
    def inproc_s(self) -> float:
        return statistics.median(self.inproc)

    @property
    def sha_s(self) -> float:
        return statistics.median(self.sha)


def measure(item: Fixture, scratch: Path, repeats: int) -> Measured:
    processes = cores()
    chunk = math.ceil(len(item.refs) / processes)
    # Warm-up, unmeasured: every side reads every file once, so the timed runs read the same warm files.
    cli_verify(item, scratch)
    _, workers = in_process_verify(item)
    sha256sum(item, processes, chunk, check=True)
    m = Measured(item, processes, chunk, [], [], workers, [])
    sides: list[Callable[[], None]] = [
        lambda: m.cli.append(cli_verify(item, scratch)),
        lambda: m.inproc.append(in_process_verify(item)[0]),
        lambda: m.sha.append(sha256sum(item, processes, chunk)),
    ]
    for attempt in range(max(1, repeats)):
        shift = attempt % len(sides)
        for side in sides[shift:] + sides[:shift]:  # interleaved, none always first
            side()
    return m


# -- figures --------------------------------------------------------------------------------------


def _walls(samples: list[float]) -> str:
    return ", ".join(f"{s:.3f}" for s in samples)


def figures(m: Measured, built: str) -> list[Figure]:
    item = m.item
    label = f"{item.shards:,} shards"
    mb = item.bytes / MB
    cli_mb_s, inproc_mb_s, sha_mb_s = mb / m.cli_s, mb / m.inproc_s, mb / m.sha_s
    verify_s = statistics.median(run.verify_s for run in m.cli)
    parts_note = (
        f"{len(item.refs):,} part(s) of {item.bytes / len(item.refs) / MIB:.2f} MiB on average, "
        f"{item.bytes / MIB:,.0f} MiB in all; {built}; every side ran once unmeasured first (same warm files)"
    )
    cli_note = (
        f"`data-designer slurm status RUN_DIR --verify --no-refresh --json`, fresh process: median wall "
        f"{m.cli_s:.3f}s (runs {_walls([r.wall_s for r in m.cli])}), of which the CLI's own verify summary says "
        f"{verify_s:.3f}s hashing with {m.cli[-1].workers} worker(s) ({mb / max(verify_s, 1e-9):,.0f} MB/s) and "
        f"{m.cli_s - verify_s:.3f}s is the rest: interpreter start, imports, read_run, output"
    )
    inproc_note = f"verify_parts, {m.inproc_workers} worker(s), runs {_walls(m.inproc)}"
    sha_note = (
        f"printf '%s\\0' <{len(item.refs):,} paths> | xargs -0 -P {m.processes} -n {m.chunk} sha256sum > /dev/null "
        f"(one process per core, ceil(parts/nproc) parts each), runs {_walls(m.sha)}"
    )
    return [
        Figure(f"{label}: parts", len(item.refs), "parts", note=parts_note),
        Figure(f"{label}: part bytes", mb, "MB"),
        Figure(f"{label}: status --verify (CLI) throughput", cli_mb_s, "MB/s", note=cli_note),
        Figure(f"{label}: verify_parts (in process) throughput", inproc_mb_s, "MB/s", note=inproc_note),
        Figure(f"{label}: sha256sum -P {m.processes} throughput", sha_mb_s, "MB/s", note=sha_note),
        Figure(f"{label}: CLI/sha256sum", cli_mb_s / sha_mb_s, "ratio", Target.at_least(RATIO_TARGET)),
        Figure(f"{label}: in process/sha256sum", inproc_mb_s / sha_mb_s, "ratio"),
    ]


def run(ctx: RunContext) -> list[Figure]:
    repeats = ctx.repeats(quick=3, full=5)
    rows, text_bytes = (ROWS_QUICK, TEXT_BYTES_QUICK) if ctx.quick else (ROWS_FULL, TEXT_BYTES_FULL)
    base, where = _base(ctx)
    base.mkdir(parents=True, exist_ok=True)
    digest = writer_digest()
    out: list[Figure] = []
    with file_lock(base / ".lock"):  # another run of this benchmark shares the fixtures
        for shards in SIZES:
            item = fixture(base, shards, rows, text_bytes, digest)
            built = f"{where}: " + ("reused" if item.built_s is None else f"written in {item.built_s:.1f}s")
            out += figures(measure(item, ctx.scratch, repeats), built)
    return out


BENCHMARK = Benchmark(
    summary="'status --verify' of 100 and 1,000 shards of Parquet parts from a fresh process: MB/s against sha256sum",
    run=run,
    requires=(COREUTILS,),
)
