"""``benchmark run BENCH`` from a fresh process: submission time and scheduler calls for 10, 100 and 1,000 children.

Each size is one benchmark file: one ``concurrency`` axis of ``N / repeats`` values times ``repeats`` (10: 5 x 2,
100: 25 x 4, 1,000: 250 x 4), ``max_concurrent_children: 4`` (so every child past the first four is submitted with
``--dependency=afterany`` on its lane's predecessor), and a base run of one shard whose writer is the command engine
running the in-tree test server (no GPU), so each child is one allocation and one ``sbatch``. Each run is
``benchmarks/_benchmark_run_probe.py``: a fresh interpreter that imports ``data_designer.slurm.services`` (timed from
its first line) and times one ``services.run_benchmark``; the same probe again is the re-run. Every measured
benchmark gets a fresh workspace in a temporary directory, removed afterwards. The probe counts ``os.fsync`` calls
(about 18 per child: every record is written durably) and the seconds in them.

1. **Fake Slurm, 10, 100 and 1,000 children**: the runner is a ``runtime.testing.FakeSlurm`` (``sbatch`` answers in
   process) and the workspaces are on ``/dev/shm`` when it has room, so the figures are our own CPU cost: on this
   project's shared disk the fsyncs alone took 17 s of 26 s for 1,000 children, and varied with the other users
   of the disk. The re-run's probe starts with an empty fake, which it need not ask anything. The note
   cross-checks the ``sbatch`` calls the fake saw against ``BenchmarkRunResult.sbatch_calls``.
2. **The local Slurm cluster, 10 and 100 children**, when ``$SLURM_CONF`` is set and ``scontrol ping`` answers
   (under ``CI=true`` a missing cluster is an error unless ``--without slurm-cluster`` deselects it): the real
   ``sbatch``, ``squeue`` and ``sacct``, workspaces under the scratch directory (on disk). The profile adds
   ``--begin=now+1hour`` so no child starts; right after the re-run every job of the benchmark is cancelled by id
   (the ids in the result, plus any job ``squeue`` shows under the benchmark's unique name, should a probe have died
   half way), all of it under ``/tmp/dd-cluster.lock`` and the cluster test session's lock.

Figures per size: **submission time** (imports + ``run_benchmark``; target under 10 s for the 10 children on the
real cluster), **per child** (the call over N, ms), **sbatch calls** (target N: one per child chunk, and fewer is an
error: every child must be ``submitted``), **squeue/sacct lookups** (``result.scheduler_lookups``, target at most
2), **re-run time**, **re-run sbatch calls** (target 0; the re-run must report the same benchmark id, every child
``already_submitted``), **re-run lookups** (at most 2) and **fsync calls per child**; then **per child 1,000/100**
(the fake's cost per child at 1,000 over that at 100: 1 when nothing per child grows with the benchmark). Quick mode measures each once (about 30 s); full mode
takes the median of 3 fresh benchmarks per size.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from benchmarks._harness import Benchmark, Figure, RunContext, Target, cluster_lock, file_lock, in_ci
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner

Mode = Literal["fake", "real"]

HERE = Path(__file__).resolve().parent
PROBE = HERE / "_benchmark_run_probe.py"
PROBE_TIMEOUT_S = 600
FAKE_SIZES = (10, 100, 1_000)
REAL_SIZES = (10, 100)
REPEATS_OF = {10: 2, 100: 4, 1_000: 4}
"""Repeats per size: the axis has N / repeats values."""
CAP = 4
LOOKUPS_TARGET = 2
REAL_RETURN_S = 10.0
"""The issue's bound on a small benchmark's return on the real cluster (imports + call)."""
CLUSTER_LOCK = Path("/tmp/dd-cluster.lock")
CANCEL_CONFIRM_S = 60.0
BEGIN_LATER = "--begin=now+1hour"
SHM = Path("/dev/shm")
SHM_ROOM_BYTES = 512 << 20
"""The fake part's workspaces go to /dev/shm when this much is free (1,000 children take about 60 MiB)."""

PROFILE = """\
schema_version: 1
default_cluster: local
clusters:
  local:
    workspace_root: {workspace}
    account: {account}
    partitions: {{gpu: {gpu}, cpu: {cpu}}}
    gpus_per_node: auto
    compute_python: {{interpreter: {python}}}
    default_time_limit: "00:30:00"
    sbatch_options: {sbatch_options}
"""

BENCH = """\
schema_version: 1
name: {name}
base:
  inline:
    schema_version: 1
    name: base
    data_designer:
      inline:
        model_configs: [{{alias: writer, model: test-model, provider: local}}]
        columns: [{{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}}]
    records: 20
    sharding: {{shards: 1}}
    deployments:
      writer:
        engine: command
        argv: [{python}, -m, data_designer.slurm.runtime.testing.test_server, --host, "{{host}}", --port, "{{port}}",
               --model, "{{model}}", --replica-id, r]
        model: test-model
        gpus_per_replica: 1
    client: {{cpus: 1, memory_gb: 1}}
axes:
  - {{axis: concurrency, alias: writer, values: [{values}]}}
repeats: {repeats}
records: {{policy: fixed, records: 20}}
max_concurrent_children: {cap}
"""


# -- inputs ---------------------------------------------------------------------------------------


def write_inputs(root: Path, name: str, children: int, mode: Mode) -> None:
    """``root/bench.yaml`` of exactly ``children`` children and ``root/profile.yaml`` (workspace ``root/ws``)."""
    repeats = REPEATS_OF[children]
    if children % repeats:
        raise ValueError(f"{children} children are not a multiple of {repeats} repeats")
    root.mkdir(parents=True)
    real = mode == "real"
    profile = PROFILE.format(
        workspace=json.dumps(str(root / "ws")),
        account=json.dumps(os.environ.get("DDSLURM_ACCOUNT")) if real else "null",
        gpu=json.dumps(os.environ.get("DDSLURM_GPU_PARTITION", "gpu") if real else "gpu"),
        cpu=json.dumps(os.environ.get("DDSLURM_CPU_PARTITION", "cpu") if real else "cpu"),
        python=json.dumps(sys.executable),
        sbatch_options=json.dumps([BEGIN_LATER] if real else []),
    )
    (root / "profile.yaml").write_text(profile, encoding="utf-8")
    values = ", ".join(str(v) for v in range(1, children // repeats + 1))
    bench = BENCH.format(name=name, python=json.dumps(sys.executable), values=values, repeats=repeats, cap=CAP)
    (root / "bench.yaml").write_text(bench, encoding="utf-8")


# -- the probe ------------------------------------------------------------------------------------


def probe(root: Path, mode: Mode) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-I", str(PROBE), str(root), mode],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{PROBE.name} {root} {mode} exited {done.returncode}:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _refuse_failure(run: Mapping[str, Any], what: str, root: Path) -> None:
    if run["error"] is not None:
        error = run["error"]
        raise RuntimeError(f"{what} of {root / 'bench.yaml'} failed: {error.get('code')}: {error.get('message')}")


@dataclass(frozen=True)
class Sample:
    """One fresh benchmark: its first run and its re-run."""

    children: int
    first: dict[str, Any]
    again: dict[str, Any]

    @property
    def wall(self) -> float:
        return float(self.first["imports_s"] + self.first["call_s"])

    @property
    def again_wall(self) -> float:
        return float(self.again["imports_s"] + self.again["call_s"])


def measure(root: Path, name: str, children: int, mode: Mode) -> Sample:
    """Write the inputs, run the benchmark, check it submitted every child once, run it again."""
    write_inputs(root, name, children, mode)
    first = probe(root, mode)
    sample = Sample(children, first, first)
    _refuse_failure(first, "benchmark run", root)
    if not first["created"] or first["counts"] != {"submitted": children}:
        raise RuntimeError(
            f"benchmark run of {children} children: created {first['created']}, outcomes {first['counts']} "
            f"(expected a new benchmark, every child submitted); jobs {len(first['jobs'])}"
        )
    again = probe(root, mode)
    _refuse_failure(again, "the re-run", root)
    if again["benchmark_id"] != first["benchmark_id"] or again["created"]:
        raise RuntimeError(
            f"the re-run reported benchmark {again['benchmark_id']} (created {again['created']}), "
            f"not the existing {first['benchmark_id']}"
        )
    return Sample(sample.children, first, again)


# -- figures --------------------------------------------------------------------------------------


def _median(samples: Sequence[Sample], key: str, *, again: bool = False) -> float:
    return statistics.median(float((s.again if again else s.first)[key]) for s in samples)


def _seen(run: Mapping[str, Any]) -> str:
    calls = run["fake_calls"]
    if calls is None:
        return ""
    seen = ", ".join(f"{tool} {n}" for tool, n in sorted(calls.items())) or "no call"
    mismatch = "" if calls.get("sbatch", 0) == run["sbatch_calls"] else " (sbatch: MISMATCH with sbatch_calls)"
    return f"; the fake saw {seen}{mismatch}"


def figures_of(samples: Sequence[Sample], mode: Mode, note: str = "") -> list[Figure]:
    n = samples[0].children
    label = f"{n:,} children [{'fake Slurm' if mode == 'fake' else 'real Slurm'}]"
    last = samples[-1]
    walls = [s.wall for s in samples]
    wall = statistics.median(walls)
    call = _median(samples, "call_s")
    again_wall = statistics.median(s.again_wall for s in samples)
    first = last.first
    wall_note = (
        f"imports {_median(samples, 'imports_s'):.3f}s + run_benchmark {call:.3f}s (medians of {len(samples)}; "
        f"walls {', '.join(f'{w:.3f}' for w in walls)}); {REPEATS_OF[n]} repeats x {n // REPEATS_OF[n]} cases, "
        f"cap {CAP}: {first['with_dependency']} children submitted with a dependency; facts asked "
        f"{first['facts_asked']}; benchmark {first['benchmark_id']}{_seen(first)}" + (f"; {note}" if note else "")
    )
    again = last.again
    again_note = (
        f"imports {_median(samples, 'imports_s', again=True):.3f}s + run_benchmark "
        f"{_median(samples, 'call_s', again=True):.3f}s; outcomes {again['counts']}; same benchmark id; "
        f"fsync {again['fsync_calls']} calls{_seen(again)}"
    )
    real_small = mode == "real" and n <= 10
    return [
        Figure(
            f"{label}: submission time",
            wall,
            "s",
            Target.at_most(REAL_RETURN_S) if real_small else None,
            wall_note,
        ),
        Figure(f"{label}: per child", call / n * 1000, "ms", note="run_benchmark's wall over the children"),
        Figure(
            f"{label}: fsync calls per child",
            first["fsync_calls"] / n,
            "calls",
            note=f"{first['fsync_s']:.2f}s in fsync during the call",
        ),
        Figure(f"{label}: sbatch calls", first["sbatch_calls"], "calls", Target.at_most(n), "one chunk per child"),
        Figure(f"{label}: squeue/sacct lookups", first["scheduler_lookups"], "calls", Target.at_most(LOOKUPS_TARGET)),
        Figure(f"{label}: re-run time", again_wall, "s", note=again_note),
        Figure(f"{label}: re-run sbatch calls", again["sbatch_calls"], "calls", Target.at_most(0)),
        Figure(f"{label}: re-run lookups", again["scheduler_lookups"], "calls", Target.at_most(LOOKUPS_TARGET)),
    ]


# -- the real cluster -----------------------------------------------------------------------------


def cluster_missing() -> str | None:
    """Why the local cluster cannot be used now, or None (``$SLURM_CONF`` set and ``scontrol ping`` answering)."""
    conf = os.environ.get("SLURM_CONF", "")
    if not conf or not Path(conf).is_file():
        return "SLURM_CONF is not set or names no file (start the local cluster with scripts/local-slurm)"
    try:
        done = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"scontrol ping: {exc!r}"
    if done.returncode != 0 or "UP" not in done.stdout:
        return f"scontrol ping exited {done.returncode}: {(done.stdout + done.stderr).strip()[:200]}"
    return None


def _named_jobs(runner: SubprocessRunner, name: str) -> set[str]:
    """Job ids ``squeue`` shows whose job name belongs to the benchmark ``name`` (its runs are ``dd-<name>-c<i>...``)."""
    listed = runner.run(["squeue", "--noheader", "--format=%i|%j"], timeout_s=30)
    if not listed.ok:
        raise RuntimeError(f"squeue failed while cleaning up: {listed.describe()}")
    prefix = f"dd-{name}-c"
    return {
        job.split("_")[0]
        for job, _, job_name in (line.partition("|") for line in listed.stdout.splitlines())
        if job_name.strip().startswith(prefix)
    }


def real_figures(ctx: RunContext, repeats: int) -> list[Figure]:
    runner = SubprocessRunner()
    scheduler = SlurmScheduler(runner)
    figures: list[Figure] = []
    with file_lock(CLUSTER_LOCK) as waited, cluster_lock(os.environ.get("DDSLURM_STATE_DIR")) as locked:
        for children in REAL_SIZES:
            samples: list[Sample] = []
            cancelled: list[str] = []
            for k in range(repeats):
                name = f"bbr-{children}-{secrets.token_hex(3)}"
                root = ctx.scratch / f"real-{children}-{k}"
                jobs: set[str] = set()
                try:
                    sample = measure(root, name, children, "real")
                    jobs.update(sample.first["jobs"])
                    samples.append(sample)
                finally:
                    jobs |= _named_jobs(runner, name)
                    if jobs:
                        start = time.perf_counter()
                        scheduler.cancel(sorted(jobs, key=int), confirm_timeout_s=CANCEL_CONFIRM_S)
                        cancelled.append(f"{len(jobs)} in {time.perf_counter() - start:.1f}s")
                    shutil.rmtree(root, ignore_errors=True)
            note = (
                f"every job pending ({BEGIN_LATER}), cancelled by id after the re-run ({'; '.join(cancelled)}); "
                f"{CLUSTER_LOCK} waited {waited:.1f}s; {locked}"
            )
            figures += figures_of(samples, "real", note)
    return figures


# -- the benchmark --------------------------------------------------------------------------------


def fake_base(ctx: RunContext) -> tuple[Path, str]:
    """A temporary directory for the fake part's workspaces (tmpfs when it has room), and a note saying where."""
    if SHM.is_dir() and os.access(SHM, os.W_OK) and shutil.disk_usage(SHM).free >= SHM_ROOM_BYTES:
        return Path(tempfile.mkdtemp(prefix="ddslurm-bench-benchmark_run-", dir=SHM)), "workspaces on /dev/shm"
    return ctx.scratch, f"workspaces under {ctx.scratch} (/dev/shm missing or short of room)"


def run(ctx: RunContext) -> list[Figure]:
    repeats = ctx.repeats(quick=1, full=3)
    figures: list[Figure] = []
    per_child: dict[int, float] = {}
    base, where = fake_base(ctx)
    try:
        for children in FAKE_SIZES:
            samples = []
            for k in range(repeats):
                root = base / f"fake-{children}-{k}"
                samples.append(measure(root, f"bbr-{children}", children, "fake"))
                shutil.rmtree(root, ignore_errors=True)
            per_child[children] = _median(samples, "call_s") / children
            figures += figures_of(samples, "fake", where)
    finally:
        if base != ctx.scratch:
            shutil.rmtree(base, ignore_errors=True)
    small, large = FAKE_SIZES[-2], FAKE_SIZES[-1]
    figures.append(
        Figure(
            f"per child {large:,}/{small:,} children [fake Slurm]",
            per_child[large] / per_child[small],
            "ratio",
            note="1 when the cost per child does not grow with the benchmark; per child: "
            + ", ".join(f"{n:,}: {per_child[n] * 1000:.1f} ms" for n in FAKE_SIZES),
        )
    )
    missing = "deselected with --without slurm-cluster" if "slurm-cluster" in ctx.without else cluster_missing()
    if missing is not None:
        if in_ci() and "slurm-cluster" not in ctx.without:
            raise RuntimeError(f"the real-cluster part needs the local Slurm cluster under CI=true: {missing}")
        figures.append(Figure("real Slurm part", 0, "sizes measured", note=f"not measured: {missing}"))
        return figures
    figures += real_figures(ctx, repeats)
    return figures


BENCHMARK = Benchmark(
    summary="'benchmark run' from a fresh process: 10, 100 and 1,000 children on a fake Slurm, 10 and 100 on the "
    "local cluster when it is up",
    run=run,
)
