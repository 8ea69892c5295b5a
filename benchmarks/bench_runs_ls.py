"""``data-designer slurm runs ls --all`` over a workspace of 1,000 runs, from a fresh process, on a fake Slurm.

The workspace holds 1,000 synthetic run directories written by ``runtime.testing.write_run_directory`` (every
record a real one): run ``i`` has ``1 + i % 4`` shards of ``5 + i % 7`` records (so the plans differ), created a
second apart; every tenth run's shards end in mixed outcomes (``SHARD_OUTCOMES``, rotated by ``i``), the others
succeeded. One ``runs ls --all --refresh`` first records each run's ``observations/0001.json`` (a workspace whose
runs were looked at before), then each timed listing runs in a fresh interpreter (``benchmarks/_runs_ls_probe.py``):
``services.list_runs(all=True)`` without ``--refresh`` (the last recorded observations; target 0 scheduler calls)
and with it (target 2: one ``squeue`` and one ``sacct`` for every job of every run). Observations a timed refresh
appends are removed before the next listing, so every listing sees the same workspace.

**wall** is process start to after the services import, plus the ``list_runs`` call (target under 1 s without
``--refresh``); the untimed setup (the fake's jobs registered) is in the note. Quick mode lists the same 1,000
runs once; full mode takes the median of 3. The fixture is cached (``/dev/shm`` when it has room, else the
benchmark cache) and rebuilt when the writer, contracts or planner change (``bench_status.writer_digest``).
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
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks._harness import Benchmark, Figure, RunContext, Target, file_lock
from benchmarks.bench_status import reset_observations, writer_digest
from data_designer.slurm.runtime.testing import (
    SHARD_OUTCOMES,
    FakeSlurm,
    ShardOutcome,
    write_run_directory,
)

HERE = Path(__file__).resolve().parent
PROBE = HERE / "_runs_ls_probe.py"
RUNS = 1_000
MIXED_EVERY = 10
WALL_TARGET_S = 1.0
REFRESH_CALLS = 2
SHM = Path("/dev/shm")
SHM_ROOM_BYTES = 256 << 20
MARKER = "fixture.json"
PROBE_TIMEOUT_S = 300
PROFILE = """\
schema_version: 1
clusters:
  local:
    workspace_root: {workspace}
    account: ddtest
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: 2
    compute_python: {{interpreter: {python}}}
"""


def _base(ctx: RunContext) -> tuple[Path, str]:
    if SHM.is_dir() and os.access(SHM, os.W_OK) and shutil.disk_usage(SHM).free >= SHM_ROOM_BYTES:
        return SHM / "data-designer-slurm-benchmarks" / "runs_ls", "fixture on /dev/shm (tmpfs)"
    return ctx.cache / "runs_ls", f"fixture under the cache dir {ctx.cache}"


def _outcome(offset: int | None) -> Any:
    def pick(shard: int) -> ShardOutcome:
        return "succeeded" if offset is None else SHARD_OUTCOMES[(shard + offset) % len(SHARD_OUTCOMES)]

    return pick


def fixture(home: Path, digest: str) -> float | None:
    """The workspace of ``RUNS`` runs under ``home``, written unless a complete one is there; seconds to write it."""
    marker = home / MARKER
    with contextlib.suppress(OSError, ValueError, KeyError):
        if json.loads(marker.read_text(encoding="utf-8"))["digest"] == digest:
            return None
    shutil.rmtree(home, ignore_errors=True)
    workspace = home / "ws"
    workspace.mkdir(parents=True)
    start = time.perf_counter()
    now = FakeSlurm().clock()  # the probe's fake starts at the same "now"
    runs = []
    for i in range(RUNS):
        offset = i if i % MIXED_EVERY == 0 else None
        layout = write_run_directory(
            workspace,
            shards=1 + i % 4,
            records_per_shard=5 + i % 7,
            outcome=_outcome(offset),
            clock=lambda i=i: now - timedelta(seconds=i),  # type: ignore[misc]
            job_id_start=100_000 + 10 * i,
        )
        runs.append({"run_dir": str(layout.run_dir), "mixed": offset})
    (home / "runs.json").write_text(json.dumps(runs), encoding="utf-8")
    (home / "profile.yaml").write_text(PROFILE.format(workspace=workspace, python=sys.executable), encoding="utf-8")
    built = time.perf_counter() - start
    probe(home, "refresh")  # warm-up: records every run's observations/0001.json
    marker.write_text(json.dumps({"digest": digest}), encoding="utf-8")
    return built


def _run_dirs(home: Path) -> list[Path]:
    return [Path(item["run_dir"]) for item in json.loads((home / "runs.json").read_text(encoding="utf-8"))]


def probe(home: Path, mode: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-I", str(PROBE), str(home), mode],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{PROBE.name} {home} {mode} exited {done.returncode}:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def figures(home: Path, mode: str, repeats: int, built: str) -> list[Figure]:
    samples = []
    for _ in range(max(1, repeats)):
        samples.append(probe(home, mode))
        for run_dir in _run_dirs(home):
            reset_observations(run_dir)
    walls = [s["imports_s"] + s["call_s"] for s in samples]
    last = samples[-1]
    label = f"runs ls --all{' --refresh' if mode == 'refresh' else ''} ({last['runs']:,} runs)"
    states = ", ".join(f"{state} {n}" for state, n in sorted(last["states"].items()))
    wall_note = (
        f"imports {statistics.median(s['imports_s'] for s in samples):.3f}s + list_runs "
        f"{statistics.median(s['call_s'] for s in samples):.3f}s (walls {', '.join(f'{w:.3f}' for w in walls)}); "
        f"setup, untimed: {statistics.median(s['setup_s'] for s in samples):.3f}s; {built}; states: {states}; "
        f"evidence {', '.join(last['evidence'])}"
    )
    calls_target = REFRESH_CALLS if mode == "refresh" else 0
    seen = last["calls_seen"]
    if mode == "refresh" and not seen:
        raise RuntimeError("runs ls --refresh asked the fake Slurm nothing: the listing observed no run")
    calls_note = f"the fake saw {', '.join(seen) or 'no call'}" + (
        "" if len(seen) == last["scheduler_calls"] else " (MISMATCH with RunsList.scheduler_calls)"
    )
    return [
        Figure(
            f"{label}: wall (imports + list)",
            statistics.median(walls),
            "s",
            Target.at_most(WALL_TARGET_S) if mode == "cached" else None,
            wall_note,
        ),
        Figure(
            f"{label}: scheduler calls",
            max(len(seen), last["scheduler_calls"]),
            "calls",
            Target.at_most(calls_target),
            calls_note,
        ),
    ]


def run(ctx: RunContext) -> list[Figure]:
    repeats = ctx.repeats(quick=1, full=3)
    base, where = _base(ctx)
    base.mkdir(parents=True, exist_ok=True)
    home = base / f"runs-{RUNS}"
    with file_lock(base / ".lock"):  # another run of this benchmark shares the fixture
        built_s = fixture(home, writer_digest())
        built = f"{where}: " + ("reused" if built_s is None else f"written in {built_s:.1f}s")
        return figures(home, "cached", repeats, built) + figures(home, "refresh", repeats, built)


BENCHMARK = Benchmark(
    summary="'slurm runs ls --all' over 1,000 runs from a fresh process: wall time, 0 scheduler calls, 2 with --refresh",
    run=run,
)
