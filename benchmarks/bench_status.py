"""``data-designer slurm status`` from a fresh process: 100, 1,000 and 10,000 shards, and the real local cluster.

Two parts:

1. **Fake Slurm, every size** (quick: 100 and 1,000; full: also 10,000). Fixtures are run directories from
   ``runtime.testing.write_run_directory`` (every record a finished shard leaves), all shards succeeded, plus one
   mixed run of 1,000 shards (shard k: ``SHARD_OUTCOMES[k % 7]``). Each status runs in a fresh interpreter,
   ``benchmarks/_status_probe.py``: process start to after ``import data_designer.slurm.services`` (the imports),
   then, untimed, ``runtime.testing`` imported, a ``FakeSlurm`` built and the run's jobs registered (setup), then
   one ``services.run_status(run_dir, runner=fake, clock=fake.clock)``. The wall figure is imports + the call:
   what a user waits for, less the interpreter's own start and the setup.
2. **Real Slurm, 100 shards**: the run's chunks (the cluster's ``MaxArraySize``) submitted as held array jobs of a
   ``true`` script, the directory written with their job ids and every shard succeeded (Slurm says pending, the
   records say succeeded: records decide), then ``data-designer slurm status RUN_DIR --json`` through
   ``benchmarks/_cli_probe.py`` against the real ``squeue``/``sacct``. Its wall figure is the CLI process's wall
   less that of ``python -I -c pass``. The held jobs are cancelled (``scancel`` by job id) in a ``finally``, under
   the cluster test session's lock (``$DDSLURM_STATE_DIR/pytest-cluster.lock``).

Every timed status is a "second status": an earlier status recorded ``observations/0001.json`` (the unmeasured
warm-up run), which ``read_run`` reads; later observations are removed before each run, so every run sees the same
directory. Targets: 10,000 shards under 2 s; exactly 2 scheduler calls (one ``squeue``, one ``sacct``) whatever the
size; no pandas, numpy or pyarrow imported. Figures are medians of 3 runs (quick: 1).

Fixtures are cached: under ``/dev/shm`` when it has room (tmpfs: 120,000 files on a disk take up to a minute to
write), else under the benchmark cache; a fixture is reused when its marker file names the same writer (a digest of
``write_run_directory``'s module, the contracts and the planner) and rebuilt otherwise.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import data_designer.slurm.contracts as contracts
import data_designer.slurm.planner as planner
from benchmarks._harness import SLURM_CLUSTER, Benchmark, Figure, RunContext, Target, cluster_lock, file_lock
from data_designer.slurm.contracts import RunStatus, SubmissionUnit
from data_designer.slurm.contracts.records import RUN_SCHEMA
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, RunLayout, discard_observations, read_record
from data_designer.slurm.runtime.testing import (
    SHARD_OUTCOMES,
    FakeSlurm,
    ShardOutcome,
    outcome_cycle,
    write_run_directory,
)

Outcome = Literal["succeeded", "mixed"]

HERE = Path(__file__).resolve().parent
STATUS_PROBE = HERE / "_status_probe.py"
CLI_PROBE = HERE / "_cli_probe.py"
WALL_TARGET_S = 2.0
WALL_TARGET_SHARDS = 10_000
SCHEDULER_CALLS = 2
HEAVY = ("pandas", "numpy", "pyarrow")
MIXED_SHARDS = 1_000
REAL_SHARDS = 100
SHM = Path("/dev/shm")
SHM_ROOM_BYTES = 1 << 30
"""/dev/shm is used when this much is free (the 10,000-shard fixture takes about 480 MiB of tmpfs)."""
FIXTURE_MARKER = "fixture.json"
FIRST_OBSERVATION = 1
PROBE_TIMEOUT_S = 300
SCRIPT = "#!/bin/bash\ntrue\n"
HELD_ARGS = ("--hold", "--output=/dev/null", "--error=/dev/null", "--time=1", "--ntasks=1")


# -- fixtures -------------------------------------------------------------------------------------


def writer_digest() -> str:
    """What a cached fixture depends on: the writer's module, the contracts and the planner, as source bytes."""
    files = [Path(inspect.getsourcefile(write_run_directory) or "")]
    for package in (contracts, planner):
        files += sorted(Path(package.__file__ or "").parent.rglob("*.py"))
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def fixture_base(ctx: RunContext) -> tuple[Path, str]:
    """Where fixtures live, and a note saying why there."""
    if SHM.is_dir() and os.access(SHM, os.W_OK) and shutil.disk_usage(SHM).free >= SHM_ROOM_BYTES:
        return SHM / "data-designer-slurm-benchmarks" / "status", "fixtures on /dev/shm (tmpfs)"
    return ctx.cache / "status", f"fixtures under the cache dir {ctx.cache} (/dev/shm missing or short of room)"


def _outcome_arg(outcome: Outcome) -> Callable[[int], ShardOutcome] | None:
    return outcome_cycle(SHARD_OUTCOMES) if outcome == "mixed" else None


@dataclass(frozen=True)
class Fixture:
    shards: int
    outcome: Outcome
    run_dir: Path
    built_s: float | None
    """Seconds to write it now; None when a cached one was reused."""


def fixture(base: Path, shards: int, outcome: Outcome, digest: str) -> Fixture:
    """The cached run directory of ``shards`` shards, written (and warmed up by one status) unless complete."""
    home = base / f"{outcome}-{shards}"
    marker = home / FIXTURE_MARKER
    with contextlib.suppress(OSError, ValueError, KeyError):
        record = json.loads(marker.read_text(encoding="utf-8"))
        run_dir = Path(record["run_dir"])
        if record["digest"] == digest and (_observations(run_dir) / f"{FIRST_OBSERVATION:04d}.json").is_file():
            return Fixture(shards, outcome, run_dir, None)
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    start = time.perf_counter()
    now = FakeSlurm().clock()  # the fake's "now": the probe's status runs on the fake's clock
    layout = write_run_directory(home / "ws", shards=shards, outcome=_outcome_arg(outcome), clock=lambda: now)
    built = time.perf_counter() - start
    probe(layout.run_dir, outcome)  # warm-up: records observations/0001.json, compiles bytecode
    marker.write_text(json.dumps({"run_dir": str(layout.run_dir), "digest": digest}), encoding="utf-8")
    return Fixture(shards, outcome, layout.run_dir, built)


def _observations(run_dir: Path) -> Path:
    return RunLayout.of(run_dir.parent.parent, run_dir.name).observations_dir


def reset_observations(run_dir: Path) -> None:
    """Leave only the first recorded observation, so every timed status reads the same directory."""
    discard_observations(RunLayout.of_run_dir(run_dir), keep=FIRST_OBSERVATION)


# -- the fake-Slurm probe -------------------------------------------------------------------------


def probe(run_dir: Path, outcome: Outcome) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-I", str(STATUS_PROBE), str(run_dir), outcome],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{STATUS_PROBE.name} {run_dir} exited {done.returncode}:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _label(shards: int, outcome: Outcome) -> str:
    return f"{shards:,} shards" + (" mixed" if outcome == "mixed" else "")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{state} {n}" for state, n in sorted(counts.items()))


def _sources(reports: Sequence[dict[str, Any]]) -> tuple[int, str]:
    """How many of squeue and sacct answered (``ok``), and a note with each one's status, time and failure."""
    answered = sum(1 for r in reports if r["status"] == "ok")
    parts = []
    for r in reports:
        detail = f": {str(r['detail'])[:160]}" if r["status"] != "ok" and r["detail"] else ""
        parts.append(f"{r['source']} {r['status']} {float(r['duration_s']) * 1000:.0f} ms{detail}")
    return answered, "; ".join(parts)


def fake_figures(item: Fixture, repeats: int) -> list[Figure]:
    samples: list[dict[str, Any]] = []
    for _ in range(max(1, repeats)):
        reset_observations(item.run_dir)
        samples.append(probe(item.run_dir, item.outcome))
    reset_observations(item.run_dir)
    walls = [s["imports_s"] + s["status_s"] for s in samples]
    wall = statistics.median(walls)
    last = samples[-1]
    label = _label(item.shards, item.outcome)

    def med(key: str) -> float:
        return statistics.median(float(s[key]) for s in samples)

    built = "reused the cached fixture" if item.built_s is None else f"fixture written in {item.built_s:.1f}s"
    wall_note = (
        f"imports {med('imports_s'):.3f}s + run_status {med('status_s'):.3f}s (medians of {len(samples)}; walls "
        f"{', '.join(f'{w:.3f}' for w in walls)}); setup, untimed: {med('setup_s'):.3f}s ({last['jobs']} job(s) "
        f"registered in the FakeSlurm); {built}; state {last['state']}, {_counts(last['counts'])}; "
        f"records {last['records_done']:,}/{last['records_total']:,}"
    )
    target = Target.at_most(WALL_TARGET_S) if item.shards >= WALL_TARGET_SHARDS else None
    seen, reported = int(last["scheduler_calls_seen"]), int(last["scheduler_calls"])
    calls_note = f"the fake saw {', '.join(last['calls_seen']) or 'no call'} during run_status" + (
        "" if seen == reported else f" ({seen} squeue/sacct: MISMATCH with RunStatus.scheduler_calls)"
    )
    answered, sources_note = _sources(last["sources"])
    lazy = last["modules_by_call"]
    heavy_note = (
        f"{last['modules_at_import']} modules after the services import; run_status imported {len(lazy)} more"
        + (f" ({', '.join(lazy[:8])})" if lazy else "")
        + f"; the untimed setup {last['modules_by_setup']}"
    )
    heavy = sorted(set(last["heavy"]))
    if heavy:
        heavy_note += f"; imported: {', '.join(heavy)}"
    return [
        Figure(f"{label}: wall (imports + status)", wall, "s", target, wall_note),
        Figure(f"{label}: scheduler calls (RunStatus)", reported, "calls", Target.at_most(SCHEDULER_CALLS), calls_note),
        Figure(f"{label}: sources answered", answered, "sources", Target.at_least(SCHEDULER_CALLS), sources_note),
        Figure(
            f"{label}: files read",
            last["files_read"],
            "files",
            note=f"{last['files_read'] / item.shards:.2f} per shard (RunStatus.files_read)",
        ),
        Figure(f"{label}: heavy modules", len(heavy), "modules", Target.at_most(0), heavy_note),
    ]


# -- the real cluster -----------------------------------------------------------------------------


def _cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DATA_DESIGNER", "XDG_"))}
    env.update(HOME=str(home), COLUMNS="100", NO_COLOR="1")
    return env


@dataclass(frozen=True)
class CliRun:
    wall_s: float
    status: RunStatus
    modules: frozenset[str]
    max_rss_kib: int


def cli_status(run_dir: Path, scratch: Path) -> CliRun:
    """``data-designer slurm status RUN_DIR --json`` in a fresh interpreter, through ``_cli_probe.py``."""
    home = scratch / "home"
    home.mkdir(parents=True, exist_ok=True)
    out = scratch / "cli-probe.json"
    out.unlink(missing_ok=True)
    command = [sys.executable, "-I", str(CLI_PROBE), str(out), "slurm", "status", str(run_dir), "--json"]
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=home, env=_cli_env(home), capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
    )
    wall = time.perf_counter() - start
    if done.returncode != 0 or not out.is_file():
        raise RuntimeError(f"data-designer slurm status exited {done.returncode}:\n{done.stderr[-3000:]}")
    record = json.loads(out.read_text(encoding="utf-8"))
    return CliRun(wall, RunStatus.model_validate_json(done.stdout), frozenset(record["modules"]), record["max_rss_kib"])


def interpreter_start_s(repeats: int) -> float:
    samples = []
    for _ in range(max(3, repeats)):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-c", "pass"], check=True, timeout=60)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _run_chunks(layout: RunLayout) -> SubmissionUnit:
    found = read_record(layout.run_record, RUN_SCHEMA)
    if not isinstance(found, RecordOk):
        raise RuntimeError(f"{layout.run_record} is {found.status}")
    return SubmissionUnit(script=SCRIPT, sbatch_args=HELD_ARGS, chunks=found.payload.unit.chunks)


def real_figures(ctx: RunContext, repeats: int) -> list[Figure]:
    runner = SubprocessRunner()
    scheduler = SlurmScheduler(runner)
    max_array_size = int(scheduler.cluster_config()["MaxArraySize"])
    now = datetime.now(UTC).replace(microsecond=0)
    since = now - timedelta(hours=3)
    # The run id (and so its job names) follows from the clock and the shard count: a first directory names the
    # chunks, which are submitted held; the second one, the one timed, records their real job ids.
    names = write_run_directory(
        ctx.scratch / "names", shards=REAL_SHARDS, clock=lambda: now, max_array_size=max_array_size
    )
    unit = _run_chunks(names)
    baseline = interpreter_start_s(repeats)
    job_ids: list[str] = []
    runs: list[CliRun] = []
    cancelled = "nothing submitted"
    with cluster_lock(os.environ.get("DDSLURM_STATE_DIR")) as locked:
        try:
            start = time.perf_counter()
            submitted = scheduler.submit(unit, since=since)
            submit_s = time.perf_counter() - start
            job_ids = [chunk.job_id for chunk in submitted.chunks]
            layout = write_run_directory(
                ctx.scratch / "ws",
                shards=REAL_SHARDS,
                clock=lambda: now,
                max_array_size=max_array_size,
                job_ids=job_ids,
            )
            cli_status(layout.run_dir, ctx.scratch)  # warm-up: records observations/0001.json
            for _ in range(max(1, repeats)):
                reset_observations(layout.run_dir)
                runs.append(cli_status(layout.run_dir, ctx.scratch))
            tasks = scheduler.observe(job_ids, since=since).tasks
        finally:
            if not job_ids:
                found = scheduler.find_submitted([c.job_name for c in unit.chunks], since=since)
                job_ids = sorted({c.job_id for c in found.values()}, key=int)
            if job_ids:
                start = time.perf_counter()
                scheduler.cancel(job_ids, confirm_timeout_s=60.0)
                cancelled = f"cancelled {len(job_ids)} held job(s) by id in {time.perf_counter() - start:.1f}s"
    status = runs[-1].status
    walls = [r.wall_s for r in runs]
    wall = statistics.median(walls)
    slurm_states: dict[str, int] = {}
    for task in tasks:
        slurm_states[task.raw_state] = slurm_states.get(task.raw_state, 0) + 1
    label = f"{REAL_SHARDS:,} shards [real Slurm, CLI]"
    answered, sources = _sources([r.model_dump() for r in (status.squeue, status.sacct) if r is not None])
    heavy = sorted(m for m in HEAVY if m in runs[-1].modules)
    counts = _counts({str(k): v for k, v in status.counts.items()})
    wall_note = (
        f"`data-designer slurm status RUN_DIR --json`: process wall {wall:.3f}s (runs "
        f"{', '.join(f'{w:.3f}' for w in walls)}) less `python -I -c pass` {baseline:.3f}s; {len(unit.chunks)} held "
        f"array job(s) at MaxArraySize {max_array_size} (sbatch {submit_s:.1f}s); Slurm's states: "
        f"{_counts(slurm_states)}; status: {status.state}, {counts} (records decide); evidence {status.evidence}; "
        f"peak RSS {runs[-1].max_rss_kib / 1024:.0f} MiB; {locked}; {cancelled}"
    )
    return [
        Figure(f"{label}: wall (less interpreter start)", wall - baseline, "s", note=wall_note),
        Figure(
            f"{label}: scheduler calls (RunStatus)", status.scheduler_calls, "calls", Target.at_most(SCHEDULER_CALLS)
        ),
        Figure(f"{label}: sources answered", answered, "sources", Target.at_least(SCHEDULER_CALLS), note=sources),
        Figure(f"{label}: files read", status.files_read, "files"),
        Figure(
            f"{label}: heavy modules",
            len(heavy),
            "modules",
            Target.at_most(0),
            note=f"{len(runs[-1].modules)} modules at exit" + (f"; imported: {', '.join(heavy)}" if heavy else ""),
        ),
    ]


# -- the benchmark --------------------------------------------------------------------------------


def cases(quick: bool) -> Sequence[tuple[int, Outcome]]:
    sizes = (100, 1_000) if quick else (100, 1_000, 10_000)
    return [*((n, "succeeded") for n in sizes), (MIXED_SHARDS, "mixed")]


def run(ctx: RunContext) -> list[Figure]:
    repeats = ctx.repeats(quick=1, full=3)
    base, where = fixture_base(ctx)
    digest = writer_digest()
    base.mkdir(parents=True, exist_ok=True)
    figures: list[Figure] = []
    built: list[str] = []
    with file_lock(base / ".lock"):  # another run of this benchmark shares the fixtures
        for stale in base.iterdir():  # half-written (no marker); another writer's are rebuilt when asked for
            if stale.is_dir() and not (stale / FIXTURE_MARKER).is_file():
                shutil.rmtree(stale, ignore_errors=True)
        for shards, outcome in cases(ctx.quick):
            item = fixture(base, shards, outcome, digest)
            done = "reused" if item.built_s is None else f"written in {item.built_s:.1f}s"
            built.append(f"{_label(shards, outcome)}: {done}")
            figures += fake_figures(item, repeats)
    figures.append(
        Figure(
            "fixtures written", sum(1 for b in built if "written" in b), "fixtures", note=f"{where}: {'; '.join(built)}"
        )
    )
    figures += real_figures(ctx, repeats)
    return figures


BENCHMARK = Benchmark(
    summary="'slurm status' from a fresh process: 100 to 10,000 shards on a fake Slurm, 100 on the local cluster",
    run=run,
    requires=(SLURM_CLUSTER,),
)
