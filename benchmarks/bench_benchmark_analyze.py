"""``benchmark analyze BENCH`` from a fresh process: analysis time and scheduler calls for 10, 100 and 1,000 children.

Each size is one benchmark of finished children: the benchmark file of ``bench_benchmark_run.py`` (one
``concurrency`` axis of ``N / repeats`` values times ``repeats``: 10: 5 x 2, 100: 25 x 4, 1,000: 250 x 4; a base run
of one shard on the in-tree test server), submitted for real by ``services.run_benchmark`` to a
``runtime.testing.FakeSlurm`` (every child's run directory, binding and submission record are the ones a user's
``benchmark run`` writes), then every child's shard finished by ``runtime.testing.write_shard_outcomes``: the claim,
attempt, port, endpoints, progress, output part, request evidence (``requests.json``: counts and a latency
histogram, read and merged by the analysis), manifest (with usage counts and timings), status and logs a
succeeded first attempt leaves. Building the fixture is untimed (about 5 s for 1,000 children); the workspaces are
on ``/dev/shm`` when it has room, so the figures are our own CPU cost, not the shared disk's.

Each measurement is ``benchmarks/_benchmark_analyze_probe.py`` in a fresh interpreter:

1. **service**: the imports of ``data_designer.slurm.services`` and one ``services.analyze_benchmark`` (refresh:
   one observation of all children) on a fresh fake that knows every child's jobs as ``COMPLETED`` an hour ago
   (``register_run_jobs``, untimed). The probe counts the ``squeue``/``sacct`` calls the fake saw; the analysis
   must come back complete, every child succeeded and measured, every case ranked and with request evidence (else the benchmark fails: a
   figure from a broken fixture would measure nothing).
2. **cli**: ``data-designer slurm benchmark analyze BENCH --no-refresh --format json`` through the host's console
   entry point, timed from the process's first line; it reads the observations the service probe just recorded
   (the CLI cannot be handed the fake). Its stdout must equal the analysis file the service wrote, byte for byte
   (the same evidence gives the same bytes), and ``sys.modules`` after it must hold none of matplotlib, pandas and
   numpy. At 10 children the CLI runs once more with ``--plot`` where matplotlib is installed: matplotlib must then
   be imported (the check above can see it) and the PNG written.

Every probe of a size runs against the same fixture: each refresh appends one observation per child, as repeated
``analyze`` calls of a user do. All three sizes use the fake: on the local cluster (4 nodes) a child only
*succeeds* by running, so 100 finished children would take many minutes of allocations, and real
``squeue``/``sacct`` asked about job ids Slurm never ran would measure a different, smaller path (nothing
listed, nothing accounted). The real scheduler's side of ``analyze`` is the same one observation ``benchmark
status`` makes (``bench_benchmark_run.py`` and ``bench_status.py`` measure it on the local cluster), and
``tests/cluster/`` runs ``analyze`` against real children.

Figures per size: **analyze time** (imports + ``analyze_benchmark``; target under 3 s for 1,000 children),
**per child** (the call over N, ms), **scheduler calls** (``result.scheduler_calls``, target 2: one ``squeue`` and
one ``sacct`` for all children, cross-checked against what the fake saw), **CLI --no-refresh time** (the whole
fresh process) and **heavy modules imported** by the CLI without ``--plot`` (target 0); then **per child
1,000/100** (1 when nothing per child grows with the benchmark) and the ``--plot`` check. Quick mode measures each
size once (about 20 s); full mode takes the median of 3 probes per size.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._harness import Benchmark, Figure, RunContext, Target
from benchmarks.bench_benchmark_run import REPEATS_OF, write_inputs

HERE = Path(__file__).resolve().parent
PROBE = HERE / "_benchmark_analyze_probe.py"
PROBE_TIMEOUT_S = 600
SIZES = (10, 100, 1_000)
LARGE_S = 3.0
"""The issue's bound on analyzing 1,000 children from a fresh process (imports + call)."""
SCHEDULER_CALLS = 2
"""One squeue and one sacct for all children."""
NOT_WITHOUT_PLOT = ("matplotlib", "pandas", "numpy")
SHM = Path("/dev/shm")
SHM_ROOM_BYTES = 512 << 20
"""The workspaces go to /dev/shm when this much is free (1,000 finished children take about 80 MiB)."""


# -- the fixture ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fixture:
    root: Path
    children: int
    benchmark_id: str
    build_s: float


def build(root: Path, children: int) -> Fixture:
    """A benchmark of ``children`` children submitted to a fake Slurm by ``run_benchmark``, each one finished."""
    from data_designer.slurm.runtime.store import RunLayout
    from data_designer.slurm.runtime.testing import FakeSlurm, write_shard_outcomes
    from data_designer.slurm.services import run_benchmark

    start = time.perf_counter()
    write_inputs(root, f"bba-{children}", children, "fake")
    fake = FakeSlurm(max_array_size=11)
    submitted = run_benchmark(
        root / "bench.yaml", profile=root / "profile.yaml", runner=fake, clock=fake.clock, environ={}
    )
    if submitted.error is not None or dict(submitted.counts) != {"submitted": children}:
        raise RuntimeError(f"benchmark run of {children} children: {submitted.counts}, error {submitted.error}")
    for row in submitted.children:
        if row.run_id is None:
            raise RuntimeError(f"child {row.index} of {submitted.benchmark_id} has no run id")
        write_shard_outcomes(RunLayout.of(root / "ws", row.run_id), clock=fake.clock)
    return Fixture(root, children, submitted.benchmark_id, time.perf_counter() - start)


# -- the probes -----------------------------------------------------------------------------------


def probe(fixture: Fixture, mode: str, *extra: str) -> tuple[dict[str, Any], str, float]:
    """One probe in a fresh interpreter: its record, its stdout and the process's wall time."""
    out = fixture.root / f"probe-{mode}.json"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-I", str(PROBE), str(out), str(fixture.root), fixture.benchmark_id, mode, *extra],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0 or not out.is_file():
        raise RuntimeError(f"{PROBE.name} {mode} {fixture.root} exited {done.returncode}:\n{done.stderr[-3000:]}")
    record: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    out.unlink()
    return record, done.stdout, wall


def checked_service(fixture: Fixture) -> dict[str, Any]:
    record, _, _ = probe(fixture, "service")
    n = fixture.children
    if not record["complete"] or record["states"] != {"succeeded": n} or record["measured"] != n:
        raise RuntimeError(
            f"analyze of {n} finished children: complete {record['complete']}, states {record['states']}, measured "
            f"{record['measured']}, evidence {record['evidence']}, scheduler error {record['scheduler_error']}"
        )
    if record["ranked"] != record["cases"]:
        raise RuntimeError(f"analyze ranked {record['ranked']} of {record['cases']} complete cases")
    if record["with_requests"] != record["cases"]:
        raise RuntimeError(f"only {record['with_requests']} of {record['cases']} cases have request evidence")
    return record


@dataclass(frozen=True)
class Sample:
    service: dict[str, Any]
    cli: dict[str, Any]
    cli_wall: float
    same_bytes: bool


def measure(fixture: Fixture) -> Sample:
    service = checked_service(fixture)
    cli, stdout, wall = probe(fixture, "cli")
    if cli["exit_code"] != 0:
        raise RuntimeError(f"benchmark analyze --no-refresh exited {cli['exit_code']}: {stdout[-2000:]}")
    written = Path(service["analysis_file"]).read_text(encoding="utf-8")
    return Sample(service, cli, wall, stdout.strip() == written.strip())


# -- figures --------------------------------------------------------------------------------------


def _median(samples: Sequence[Sample], key: str) -> float:
    return statistics.median(float(s.service[key]) for s in samples)


def figures_of(fixture: Fixture, samples: Sequence[Sample], where: str) -> list[Figure]:
    n = fixture.children
    label = f"{n:,} children [fake Slurm]"
    walls = [float(s.service["imports_s"] + s.service["call_s"]) for s in samples]
    call = _median(samples, "call_s")
    last = samples[-1].service
    seen = ", ".join(f"{tool} {k}" for tool, k in sorted(last["calls_seen"].items())) or "no call"
    mismatch = "" if last["scheduler_calls_seen"] == last["scheduler_calls"] else " (MISMATCH with scheduler_calls)"
    wall_note = (
        f"imports {_median(samples, 'imports_s'):.3f}s + analyze_benchmark {call:.3f}s (medians of {len(samples)}; "
        f"walls {', '.join(f'{w:.3f}' for w in walls)}; CPU {_median(samples, 'imports_cpu_s'):.3f}s + "
        f"{_median(samples, 'call_cpu_s'):.3f}s); untimed setup {_median(samples, 'setup_s'):.2f}s "
        f"(fake told of {last['jobs']} jobs); fixture built in {fixture.build_s:.1f}s, {where}; "
        f"{last['cases']} cases all ranked, {last['measured']} children measured, evidence {last['evidence']}"
    )
    heavy = sorted({name for s in samples for name in s.cli["heavy"] if name in NOT_WITHOUT_PLOT})
    cli_walls = [s.cli_wall for s in samples]
    same = all(s.same_bytes for s in samples)
    return [
        Figure(
            f"{label}: analyze time",
            statistics.median(walls),
            "s",
            Target.at_most(LARGE_S) if n >= 1_000 else None,
            wall_note,
        ),
        Figure(f"{label}: per child", call / n * 1000, "ms", note="analyze_benchmark's wall over the children"),
        Figure(
            f"{label}: scheduler calls",
            last["scheduler_calls"],
            "calls",
            Target.at_most(SCHEDULER_CALLS),
            f"the fake saw {seen}{mismatch}",
        ),
        Figure(
            f"{label}: CLI --no-refresh time",
            statistics.median(cli_walls),
            "s",
            note=f"'benchmark analyze --no-refresh --format json', the whole fresh process (walls "
            f"{', '.join(f'{w:.3f}' for w in cli_walls)}); stdout "
            + ("equals the service's analysis file byte for byte" if same else "DIFFERS from the analysis file"),
        ),
        Figure(
            f"{label}: heavy modules imported",
            len(heavy),
            "modules",
            Target.at_most(0),
            f"of {', '.join(NOT_WITHOUT_PLOT)} after the CLI without --plot: {', '.join(heavy) or 'none'}; "
            f"the service probe held {', '.join(last['heavy']) or 'none'} (pyarrow counted there too)",
        ),
    ]


def plot_figures(fixture: Fixture) -> list[Figure]:
    """``--plot`` imports matplotlib (so the heavy-module check can see it) and writes the PNG."""
    try:
        import importlib.util

        installed = importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        installed = False
    if not installed:
        return [Figure("--plot check", 0, "runs", note="not measured: matplotlib (the plot extra) is not installed")]
    png = fixture.root / "analysis.png"
    record, stdout, wall = probe(fixture, "cli", "--plot", str(png))
    if record["exit_code"] != 0 or not png.is_file():
        raise RuntimeError(f"benchmark analyze --plot exited {record['exit_code']}: {stdout[-2000:]}")
    seen = [name for name in NOT_WITHOUT_PLOT if name in record["heavy"]]
    return [
        Figure(
            f"{fixture.children:,} children: --plot imports matplotlib",
            1 if "matplotlib" in seen else 0,
            "yes",
            Target.at_least(1),
            f"the CLI with --plot: {wall:.2f}s, {png.stat().st_size:,}-byte PNG; imported {', '.join(seen)}",
        )
    ]


# -- the benchmark --------------------------------------------------------------------------------


def fake_base(ctx: RunContext) -> tuple[Path, str]:
    """A temporary directory for the workspaces (tmpfs when it has room), and a note saying where."""
    if SHM.is_dir() and os.access(SHM, os.W_OK) and shutil.disk_usage(SHM).free >= SHM_ROOM_BYTES:
        return Path(tempfile.mkdtemp(prefix="ddslurm-bench-benchmark_analyze-", dir=SHM)), "workspaces on /dev/shm"
    return ctx.scratch, f"workspaces under {ctx.scratch} (/dev/shm missing or short of room)"


def run(ctx: RunContext) -> list[Figure]:
    repeats = ctx.repeats(quick=1, full=3)
    figures: list[Figure] = []
    per_child: dict[int, float] = {}
    base, where = fake_base(ctx)
    try:
        for children in SIZES:
            if children % REPEATS_OF[children]:
                raise ValueError(f"{children} children are not a multiple of {REPEATS_OF[children]} repeats")
            fixture = build(base / f"fake-{children}", children)
            samples = [measure(fixture) for _ in range(repeats)]
            per_child[children] = _median(samples, "call_s") / children
            figures += figures_of(fixture, samples, where)
            if children == SIZES[0]:
                figures += plot_figures(fixture)
            shutil.rmtree(fixture.root, ignore_errors=True)
    finally:
        if base != ctx.scratch:
            shutil.rmtree(base, ignore_errors=True)
    small, large = SIZES[-2], SIZES[-1]
    figures.append(
        Figure(
            f"per child {large:,}/{small:,} children [fake Slurm]",
            per_child[large] / per_child[small],
            "ratio",
            note="1 when the cost per child does not grow with the benchmark; per child: "
            + ", ".join(f"{n:,}: {per_child[n] * 1000:.2f} ms" for n in SIZES),
        )
    )
    return figures


BENCHMARK = Benchmark(
    summary="'benchmark analyze' from a fresh process: 10, 100 and 1,000 finished children on a fake Slurm, "
    "scheduler calls, and no matplotlib/pandas/numpy without --plot",
    run=run,
)
