"""``data-designer slurm merge`` of 100 and 1,000 shards, side by side with DuckDB, pyarrow and ``cp``.

The fixtures are synthetic run directories (``runtime.testing.write_run_directory(parquet_parts=True)``), every
shard succeeded, each shard's one part holding ``ROWS_QUICK`` (full mode: ``ROWS_FULL``) records whose column
``a`` carries about ``TEXT_BYTES`` bytes of prose-like words (``part_text_bytes``), written with Parquet's default
codec as the client worker writes them. Every tool runs in a fresh process, with this process's environment less
``PYTHON*`` (so bytecode is cached, as on a user's machine: this sandbox sets ``PYTHONDONTWRITEBYTECODE``),
``DATA_DESIGNER*`` and ``XDG_*``, with ``HOME`` in the scratch directory, and writes into a new directory on the
fixture's filesystem, removed afterwards:

- **merge**: ``data-designer slurm merge RUN --output DIR``, the console script next to this interpreter (what a
  user types), default (splice) mode; **merge --compact**: the same with ``--compact`` (default row group size),
  reported "not available" when ``merge --help`` does not offer the flag;
- **DuckDB**: ``python -c`` running ``COPY (SELECT * FROM read_parquet([<every part>]) ORDER BY _dd_index) TO
  '<out>' (FORMAT parquet)`` (DuckDB's defaults: every core, its own row group size); ``import duckdb`` alone in a
  fresh process is timed too, so the start-up share is visible;
- **pyarrow**: ``python -c`` reading every part with ``pq.read_table``, ``pa.concat_tables`` in part order (the
  shards' index order) and one ``pq.write_table`` (pyarrow's defaults);
- **cp**: ``cp --parents`` of every part into a new directory, the floor (reference only, no target: no tool that
  checks every byte can approach a bare copy, issue 29);
- **merge_run call** (full mode only): ``services.merge_run`` timed inside a fresh interpreter (``_merge_probe.py``),
  the merge's work without the process start-up and imports (reference);
- **start-up to first part**: ``_merge_start_probe.py`` runs the console script's ``main`` under an audit hook and
  takes the time from the process's start (``/proc/self/stat``) to its first open of a part.

Per tool and size: **wall** (the process's whole life: ``os.wait4`` in ``_spawn_probe.py``), **MB/s** (the source
parts' bytes, 10**6, over the wall), **peak RSS** (``ru_maxrss`` of the direct child from ``os.wait4`` in
``_spawn_probe.py``, a launcher of about 10 MiB: Linux carries the parent's peak over ``execve``, so the child's
figure is floored by the launcher's, not by this runner's; the python tools' own ``VmHWM`` is in the notes as a
check), **rows per row group** of the output (the median, from the output's Parquet footers; min, max and counts in
the note; every output's row count is checked).

Targets (issue 29): merge wall at most 1.0x DuckDB's at both sizes; ``--compact`` at most 1.5x; our peak RSS (each
mode) at most 0.25x DuckDB's at 1,000 shards and at 1,000 shards at most 1.10x that at 100; start-up to the first
part read below 0.6 s. Quick mode: one warm-up run of the CLI (each mode) and of the imports of DuckDB and pyarrow,
then one run per tool and size; full mode: 4x the rows per shard and the median of 3 runs, the tools' order rotated
each round. The fixtures are cached under ``/dev/shm`` when it has room (else the benchmark cache) and rebuilt when
the writer, contracts or planner change (``bench_status.writer_digest``) or the sizes do.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._harness import Benchmark, Figure, RunContext, Target, file_lock
from benchmarks.bench_status import writer_digest
from data_designer.slurm.runtime.testing import write_run_directory

pq: Any = importlib.import_module("pyarrow.parquet")  # untyped: the project's way (runtime.merge, its tests)

HERE = Path(__file__).resolve().parent
PROBE = HERE / "_merge_probe.py"
START_PROBE = HERE / "_merge_start_probe.py"
SPAWN_PROBE = HERE / "_spawn_probe.py"
CLI = Path(sys.executable).parent / "data-designer"
SIZES = (100, 1_000)
ROWS_QUICK = 1_000
ROWS_FULL = 4_000
TEXT_BYTES = 300
DUCKDB_RATIO_TARGET = 1.0
COMPACT_RATIO_TARGET = 1.5
RSS_VS_DUCKDB_TARGET = 0.25
RSS_RATIO_TARGET = 1.10
STARTUP_TARGET_S = 0.6
SHM = Path("/dev/shm")
SHM_ROOM_BYTES = 2 << 30
MARKER = "fixture.json"
PROBE_TIMEOUT_S = 600
MB = 1e6
MIB = 1024 * 1024

MERGE, COMPACT, DUCKDB, PYARROW, CP, CALL, START = "merge", "compact", "duckdb", "pyarrow", "cp", "call", "start"
LABELS = {
    MERGE: "merge",
    COMPACT: "merge --compact",
    DUCKDB: "DuckDB COPY",
    PYARROW: "pyarrow read+write",
    CP: "cp (floor)",
    CALL: "merge_run call (in process)",
}
OUTPUT_TOOLS = (MERGE, COMPACT, DUCKDB, PYARROW)
"""The tools that write a dataset (rows per row group, peak RSS)."""

_VMHWM = """
def _hwm():
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
"""
DUCKDB_SCRIPT = (
    """import json, sys, time
start = time.perf_counter()
import duckdb
imported = time.perf_counter()
with open(sys.argv[1], encoding="utf-8") as listing:
    paths = json.load(listing)
parts = ", ".join("'" + path.replace("'", "''") + "'" for path in paths)
out = sys.argv[2].replace("'", "''")
duckdb.connect().execute(
    f"COPY (SELECT * FROM read_parquet([{parts}]) ORDER BY _dd_index) TO '{out}' (FORMAT parquet)"
)
done = time.perf_counter()
"""
    + _VMHWM
    + """print(json.dumps({"import_s": imported - start, "work_s": done - imported, "hwm_kib": _hwm()}))
"""
)
PYARROW_SCRIPT = (
    """import json, sys, time
start = time.perf_counter()
import pyarrow as pa
import pyarrow.parquet as pq
imported = time.perf_counter()
with open(sys.argv[1], encoding="utf-8") as listing:
    paths = json.load(listing)
pq.write_table(pa.concat_tables([pq.read_table(path) for path in paths]), sys.argv[2])
done = time.perf_counter()
"""
    + _VMHWM
    + """print(json.dumps({"import_s": imported - start, "work_s": done - imported, "hwm_kib": _hwm()}))
"""
)


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
    listing: Path
    """A JSON list of the parts' absolute paths, for the DuckDB and pyarrow children (too long for one argument)."""

    @property
    def records(self) -> int:
        return self.shards * self.rows


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
    listing = home / "parts.json"
    listing.write_text(json.dumps([str(part) for part in parts]), encoding="utf-8")
    return Fixture(shards, rows, run_dir, parts, sum(p.stat().st_size for p in parts), built_s, listing)


# -- one run of one tool ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """What a tool wrote: Parquet files, rows, the rows of every row group in order, bytes."""

    files: int
    rows: int
    groups: tuple[int, ...]
    bytes: int

    @property
    def median_group(self) -> float:
        return statistics.median(self.groups) if self.groups else 0.0

    def describe(self) -> str:
        if not self.groups:
            return "no row groups"
        low, high = min(self.groups), max(self.groups)
        spread = f"{low:,}" if low == high else f"{low:,} to {high:,}"
        return (
            f"{self.files} file(s), {len(self.groups):,} row group(s) of {spread} rows, {self.rows:,} rows, "
            f"{self.bytes / MB:.1f} MB"
        )


def read_layout(output: Path) -> Layout:
    files = sorted(output.rglob("*.parquet")) if output.is_dir() else [output]
    groups: list[int] = []
    size = 0
    for path in files:
        metadata = pq.ParquetFile(path).metadata
        groups += [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
        size += path.stat().st_size
    return Layout(len(files), sum(groups), tuple(groups), size)


@dataclass(frozen=True)
class Run:
    """One run of one tool: wall seconds, the child's peak RSS, and what the child or the output told."""

    wall_s: float
    rss_kib: int = 0
    floor_kib: int = 0
    layout: Layout | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def child_env(home: Path) -> dict[str, str]:
    """This process's environment less ``PYTHON*`` (bytecode cached), ``DATA_DESIGNER*`` and ``XDG_*``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DATA_DESIGNER", "XDG_"))}
    env.update(HOME=str(home), COLUMNS="100", NO_COLOR="1")
    return env


@dataclass(frozen=True)
class Runner:
    work: Path
    env: dict[str, str]

    def spawn(self, command: Sequence[str], *, cwd: Path | None = None) -> tuple[dict[str, Any], str]:
        """``command`` under ``_spawn_probe.py``: its record (wall, ``ru_maxrss``, floor) and its stdout."""
        record = self.work / "spawn.json"
        record.unlink(missing_ok=True)
        launcher = [sys.executable, "-I", "-S", str(SPAWN_PROBE), str(record), *command]
        done = subprocess.run(
            launcher,
            cwd=cwd or self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0 or not record.is_file():
            raise RuntimeError(f"{SPAWN_PROBE.name} exited {done.returncode}:\n{done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(record.read_text(encoding="utf-8"))
        if result["exit_code"] != 0:
            raise RuntimeError(f"{' '.join(command)[:300]} exited {result['exit_code']}:\n{done.stderr[-3000:]}")
        return result, done.stdout

    def timed(self, command: Sequence[str], output: Path, expected: int, *, cwd: Path | None = None) -> Run:
        """One spawned run writing ``output`` (removed afterwards), its layout checked to hold ``expected`` rows."""
        try:
            record, stdout = self.spawn(command, cwd=cwd)
            layout = read_layout(output) if expected else None
        finally:
            if output.is_dir():
                shutil.rmtree(output, ignore_errors=True)
            else:
                output.unlink(missing_ok=True)
        if layout is not None and layout.rows != expected:
            raise RuntimeError(f"{' '.join(command)[:300]} wrote {layout.rows:,} rows, expected {expected:,}")
        detail: dict[str, Any] = {"stdout": stdout.strip()}
        with contextlib.suppress(ValueError, IndexError):  # the last line: DuckDB draws a progress bar above it
            decoded = json.loads(stdout.strip().splitlines()[-1])
            if isinstance(decoded, dict):
                detail = decoded
        return Run(float(record["wall_s"]), int(record["max_rss_kib"]), int(record["floor_kib"]), layout, detail)

    def cli(self, item: Fixture, *, compact: bool) -> Run:
        output = self.work / "cli-merged"
        command = [str(CLI), "slurm", "merge", str(item.run_dir), "--output", str(output)]
        run = self.timed([*command, "--compact"] if compact else command, output, item.records)
        said = str(run.detail.get("stdout", ""))
        if "merged:" not in said:
            raise RuntimeError(f"data-designer slurm merge of {item.run_dir} said {said!r:.500}, expected a merge")
        return run

    def script(self, name: str, script: str, item: Fixture) -> Run:
        """``python -c SCRIPT PARTS.json OUT``, whose last line of output is its own JSON record."""
        out = self.work / f"{name}.parquet"
        run = self.timed([sys.executable, "-c", script, str(item.listing), str(out)], out, item.records)
        if "work_s" not in run.detail:
            raise RuntimeError(f"the {name} script printed {run.detail.get('stdout')!r:.500}, not its record")
        return run

    def duckdb(self, item: Fixture) -> Run:
        return self.script(DUCKDB, DUCKDB_SCRIPT, item)

    def pyarrow(self, item: Fixture) -> Run:
        return self.script(PYARROW, PYARROW_SCRIPT, item)

    def cp(self, item: Fixture) -> Run:
        into = self.work / "copied"
        into.mkdir()
        relative = [str(part.relative_to(item.run_dir)) for part in item.parts]
        return self.timed(["cp", "--parents", "-t", str(into), *relative], into, 0, cwd=item.run_dir)

    def call(self, item: Fixture) -> Run:
        """``services.merge_run`` timed inside a fresh interpreter (``_merge_probe.py``)."""
        output = self.work / "call-merged"
        try:
            done = subprocess.run(
                [sys.executable, "-I", str(PROBE), str(item.run_dir), str(output)],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
            )
        finally:
            shutil.rmtree(output, ignore_errors=True)
        if done.returncode != 0:
            raise RuntimeError(f"{PROBE.name} {item.run_dir} exited {done.returncode}:\n{done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(done.stdout)
        if result["outcome"] != "merged" or result["records"] != item.records or not result["complete"]:
            raise RuntimeError(f"the merge of {item.run_dir} answered {result}, expected {item.records:,} records")
        return Run(float(result["merge_s"]), int(result["hwm_kib"]), detail=result)

    def start(self, item: Fixture) -> Run:
        """Seconds from the CLI process's start to its first open of a part (``_merge_start_probe.py``)."""
        output = self.work / "start-merged"
        record = self.work / "start.json"
        record.unlink(missing_ok=True)
        command = [sys.executable, str(START_PROBE), str(record), "slurm", "merge", str(item.run_dir)]
        try:
            spawned, _ = self.spawn([*command, "--output", str(output)])
        finally:
            shutil.rmtree(output, ignore_errors=True)
        if not record.is_file():
            raise RuntimeError(f"{START_PROBE.name} saw no part of {item.run_dir} opened")
        opened: dict[str, Any] = json.loads(record.read_text(encoding="utf-8"))
        opened["by_parent_clock_s"] = float(opened["opened_monotonic"]) - float(spawned["spawned_monotonic"])
        return Run(float(opened["startup_s"]), detail=opened)

    def import_duckdb(self) -> Run:
        record, _ = self.spawn([sys.executable, "-c", "import duckdb"])
        return Run(float(record["wall_s"]), int(record["max_rss_kib"]), int(record["floor_kib"]))


def compact_available(env: dict[str, str]) -> str | None:
    """None when ``data-designer slurm merge --help`` offers ``--compact``; else why not."""
    if not CLI.is_file():
        raise RuntimeError(f"the console script {CLI} is missing: run the benchmark with the workspace's .venv")
    done = subprocess.run(
        [str(CLI), "slurm", "merge", "--help"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"data-designer slurm merge --help exited {done.returncode}:\n{done.stderr[-2000:]}")
    return None if "--compact" in done.stdout else "not available (data-designer slurm merge --help has no --compact)"


# -- the measurement ---------------------------------------------------------------------------------------------


Runs = dict[str, list[Run]]


def measure(
    items: list[Fixture], runner: Runner, repeats: int, *, compact: bool, call: bool
) -> tuple[dict[int, Runs], list[Run]]:
    """Every tool at every size, ``repeats`` rounds, the tools' order rotated each round (after warm-ups); the
    in-process ``merge_run`` call only with ``call`` (full mode: quick mode keeps CI's time)."""
    small = items[0]
    runner.cli(small, compact=False)  # warm-up: bytecode of the host and our packages, ~/.data-designer
    if compact:
        runner.cli(small, compact=True)
    runner.spawn([sys.executable, "-c", "import duckdb, pyarrow.parquet, pyarrow.dataset"])  # warm-up: bytecode
    actions: dict[str, Callable[[Fixture], Run]] = {
        MERGE: lambda item: runner.cli(item, compact=False),
        DUCKDB: runner.duckdb,
        PYARROW: runner.pyarrow,
        CP: runner.cp,
        START: runner.start,
    }
    if call:
        actions[CALL] = runner.call
    if compact:
        actions[COMPACT] = lambda item: runner.cli(item, compact=True)
    names = list(actions)
    runs: dict[int, Runs] = {item.shards: {name: [] for name in names} for item in items}
    imports: list[Run] = []
    for round_ in range(max(1, repeats)):
        imports.append(runner.import_duckdb())
        for item in items:
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                runs[item.shards][name].append(actions[name](item))
    return runs, imports


def _median(runs: list[Run], value: Callable[[Run], float]) -> float:
    return statistics.median(value(run) for run in runs)


def _wall(runs: list[Run]) -> float:
    return _median(runs, lambda run: run.wall_s)


def _rss_mib(runs: list[Run]) -> float:
    return _median(runs, lambda run: float(run.rss_kib)) / 1024


def _walls(runs: list[Run]) -> str:
    return ", ".join(f"{run.wall_s:.2f}" for run in runs)


def _tool_note(name: str, runs: list[Run]) -> str:
    last = runs[-1].detail
    if name in (DUCKDB, PYARROW):
        inner = ", ".join(f"{float(r.detail['import_s']):.2f}s + {float(r.detail['work_s']):.2f}s" for r in runs)
        return f"runs {_walls(runs)}s; inside: import + work {inner}"
    if name == CALL:
        return f"merge_run call {_walls(runs)}s after imports of {float(last['imports_s']):.2f}s"
    return f"runs {_walls(runs)}s"


def size_figures(item: Fixture, runs: Runs, built: str, compact_missing: str | None) -> list[Figure]:
    label = f"{item.shards:,} shards"
    source = f"{len(item.parts):,} part(s) of {item.rows:,} records, {item.bytes / MB:.1f} MB of Parquet; {built}"
    tools = [name for name in (MERGE, COMPACT, DUCKDB, PYARROW, CP, CALL) if name in runs]
    out: list[Figure] = []
    for name in tools:
        note = _tool_note(name, runs[name])
        out.append(Figure(f"{label}: wall: {LABELS[name]}", _wall(runs[name]), "s", note=note))
    if COMPACT not in runs:  # in its place, after the default merge
        out.insert(1, Figure(f"{label}: wall: {LABELS[COMPACT]}", 0, "not available", note=compact_missing or ""))
    for name in tools:
        note = source if name == MERGE else ""
        out.append(Figure(f"{label}: MB/s: {LABELS[name]}", item.bytes / MB / _wall(runs[name]), "MB/s", note=note))
    for name in (n for n in OUTPUT_TOOLS if n in runs):
        last = runs[name][-1]
        peaks = ", ".join(f"{r.rss_kib / 1024:.0f}" for r in runs[name])
        note = f"ru_maxrss of the child (wait4): {peaks} MiB, floored by the launcher's {last.floor_kib / 1024:.0f} MiB"
        if "hwm_kib" in last.detail:
            note += f"; its own VmHWM {int(last.detail['hwm_kib']) / 1024:.0f} MiB"
        out.append(Figure(f"{label}: peak RSS: {LABELS[name]}", _rss_mib(runs[name]), "MiB", note=note))
    for name in (n for n in OUTPUT_TOOLS if n in runs):
        layout = runs[name][-1].layout
        if layout is not None:
            name_ = f"{label}: rows per row group: {LABELS[name]}"
            out.append(Figure(name_, layout.median_group, "rows (median)", note=layout.describe()))
    duckdb = _wall(runs[DUCKDB])
    out.append(
        Figure(
            f"{label}: merge / DuckDB wall",
            _wall(runs[MERGE]) / duckdb,
            "ratio",
            Target.at_most(DUCKDB_RATIO_TARGET),
            note=f"{_wall(runs[MERGE]):.2f}s / {duckdb:.2f}s",
        )
    )
    if COMPACT in runs:
        out.append(
            Figure(
                f"{label}: merge --compact / DuckDB wall",
                _wall(runs[COMPACT]) / duckdb,
                "ratio",
                Target.at_most(COMPACT_RATIO_TARGET),
                note=f"{_wall(runs[COMPACT]):.2f}s / {duckdb:.2f}s",
            )
        )
    start = runs[START]
    parent = ", ".join(f"{float(r.detail['by_parent_clock_s']):.3f}" for r in start)
    out.append(
        Figure(
            f"{label}: merge start-up to first part",
            _wall(start),
            "s",
            Target.at_most(STARTUP_TARGET_S),
            note=(
                f"/proc/self/stat start to the first part's open: {_walls(start)}s (10 ms ticks); by the launcher's "
                f"clock from the spawn: {parent}s; {start[-1].detail['modules']} modules imported by then"
            ),
        )
    )
    return out


def memory_figures(small: Runs, large: Runs) -> list[Figure]:
    out: list[Figure] = []
    big, little = f"{SIZES[-1]:,}", f"{SIZES[0]:,}"
    duckdb = _rss_mib(large[DUCKDB])
    for name in (MERGE, COMPACT):
        if name not in large:
            continue
        ours = _rss_mib(large[name])
        out.append(
            Figure(
                f"{big} shards: peak RSS {LABELS[name]} / DuckDB",
                ours / duckdb,
                "ratio",
                Target.at_most(RSS_VS_DUCKDB_TARGET),
                note=f"{ours:.0f} MiB / {duckdb:.0f} MiB",
            )
        )
    for name in (MERGE, COMPACT):
        if name not in large:
            continue
        out.append(
            Figure(
                f"peak RSS {big}/{little} shards: {LABELS[name]}",
                _rss_mib(large[name]) / _rss_mib(small[name]),
                "ratio",
                Target.at_most(RSS_RATIO_TARGET),
                note=f"{_rss_mib(large[name]):.0f} MiB / {_rss_mib(small[name]):.0f} MiB",
            )
        )
    return out


def run(ctx: RunContext) -> list[Figure]:
    repeats = ctx.repeats(quick=1, full=3)
    rows = ROWS_QUICK if ctx.quick else ROWS_FULL
    base, where = _base(ctx)
    base.mkdir(parents=True, exist_ok=True)
    digest = writer_digest()
    home = ctx.scratch / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = child_env(home)
    with file_lock(base / ".lock"):  # another run of this benchmark shares the fixtures
        work = base / f"work-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        try:
            items = [fixture(base, shards, rows, digest) for shards in SIZES]
            compact_missing = compact_available(env)
            runner = Runner(work, env)
            runs, imports = measure(items, runner, repeats, compact=compact_missing is None, call=not ctx.quick)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    out: list[Figure] = []
    for item in items:
        built = f"{where}: " + ("reused" if item.built_s is None else f"written in {item.built_s:.1f}s")
        out += size_figures(item, runs[item.shards], built, compact_missing)
    out.append(
        Figure(
            "import duckdb (fresh process)",
            _wall(imports),
            "s",
            note=f"python -c 'import duckdb': {_walls(imports)}s, peak RSS {_rss_mib(imports):.0f} MiB",
        )
    )
    out += memory_figures(runs[SIZES[0]], runs[SIZES[-1]])
    return out


BENCHMARK = Benchmark(
    summary=(
        "'data-designer slurm merge' (splice, --compact) of 100 and 1,000 shards against DuckDB COPY, pyarrow and "
        "cp, each from a fresh process: wall, MB/s, peak RSS, rows per row group, start-up"
    ),
    run=run,
)
