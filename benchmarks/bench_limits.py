"""Bounded inputs: the planner at the caps of ``data_designer.slurm.contracts`` (``_limits``), and refusals above them.

- at the caps, each in a fresh interpreter (``python -m benchmarks.bench_limits SCENARIO SIZE``) so its peak
  resident set size (``ru_maxrss``) is its own: ``compile`` of a run with ``MAX_SHARDS`` shards, of one with
  ``MAX_REPLICAS`` replicas, and of one with ``MAX_ALLOCATION_GPUS`` GPUs (replicas of the largest tensor
  parallelism, spanning nodes); ``expand`` of a benchmark with ``MAX_BENCHMARK_CHILDREN`` distinct children
  and of one whose cases hold ``MAX_BENCHMARK_REPLICAS`` replicas together. Quick mode plans a tenth of each.
- refusals, in this process, through the services (``plan_run``/``plan_benchmark``: reading, parsing,
  validating, planning): hostile counts (``shards: 10000000``, ``records_per_shard: 1`` for 10**12 records,
  ``replicas``/``tensor_parallel``/``nodes`` of 10**9, ``repeats: 10**9``, a sweep of 10**6 children) and
  hostile profiles (``/dev/zero`` behind a symbolic link, a FIFO, 50 MB of YAML, a directory). Each must
  raise ``InvalidInputError``; the figure is its median wall time, the note its traced peak allocation.

Targets: every refusal under 1 s (issue 11: 10**7 shards grew past 3 GB, a 50 MB profile took 54 s, a FIFO
blocked forever). At the caps, at most 1 GiB resident and 10 s per plan: a login node is shared by many
users, and a plan at a cap is the largest a real user could ask for (the shards cap measured about 250 MiB
and 2.5 s); the 1 GiB leaves room for the interpreter and its imports (about 60 MiB) and for slower nodes.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._harness import Benchmark, Figure, RunContext, Target, median_seconds
from data_designer.slurm.contracts import (
    MAX_ALLOCATION_GPUS,
    MAX_BENCHMARK_CHILDREN,
    MAX_BENCHMARK_REPLICAS,
    MAX_REPLICAS,
    MAX_REPLICAS_PER_DEPLOYMENT,
    MAX_SHARDS,
    MAX_TENSOR_PARALLEL,
    BenchmarkSpec,
    ClusterFacts,
    ClusterProfile,
    InvalidInputError,
    RunSpec,
)

ROOT = Path(__file__).resolve().parent.parent
REFUSAL_TARGET_S = 1.0
AT_CAP_RSS_TARGET_MIB = 1024.0
AT_CAP_TARGET_S = 10.0
GPUS_PER_NODE = 8
HOSTILE = 10**9

CONFIG: dict[str, Any] = {
    "model_configs": [{"alias": "writer", "model": "m", "provider": "local"}],
    "columns": [{"name": "text", "column_type": "llm-text", "model_alias": "writer", "prompt": "Write."}],
}
PROFILE: dict[str, Any] = {
    "workspace_root": "/shared/ws",
    "partitions": {"gpu": "gpu", "cpu": "cpu"},
    "gpus_per_node": GPUS_PER_NODE,
    "compute_python": {"interpreter": "/shared/venv/bin/python"},
    "default_time_limit": "04:00:00",
}


def _run(
    records: int = 100, sharding: dict[str, int] | None = None, deployments: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    served = {
        alias: {"engine": "vllm", "model": f"/models/{alias}", **spec} for alias, spec in (deployments or {}).items()
    }
    return {
        "schema_version": 1,
        "name": "limits",
        "data_designer": {"inline": CONFIG},
        "records": records,
        "sharding": sharding or {"shards": 1},
        "deployments": served or {"writer": {"engine": "vllm", "model": "/models/writer"}},
    }


def _benchmark(axes: list[dict[str, Any]], base: dict[str, Any] | None = None, repeats: int = 1) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "name": "limits",
        "base": {"inline": base or _run()},
        "axes": axes,
        "repeats": repeats,
        "records": {"policy": "fixed", "records": 10},
    }


def _values(count: int) -> list[int]:
    return list(range(1, count + 1))


# --- at the caps (in a fresh interpreter) ---------------------------------------------------------------------------


def _scenario(name: str, size: int) -> tuple[str, Callable[[], object]]:
    """What one at-cap scenario plans (``size`` is its count: the cap, or a tenth of it in quick mode)."""
    from data_designer.slurm.planner import compile, expand, resolve_config

    profile = ClusterProfile.model_validate(PROFILE, strict=False)
    facts = ClusterFacts(max_array_size=1001)

    def compiling(run: dict[str, Any]) -> Callable[[], object]:
        spec = RunSpec.model_validate(run, strict=False)
        config = resolve_config(spec)
        return lambda: compile(spec, profile, cluster="c", config=config, facts=facts)

    def expanding(bench: dict[str, Any]) -> Callable[[], object]:
        spec = BenchmarkSpec.model_validate(bench, strict=False)
        base = RunSpec.model_validate(spec.base.inline, strict=False)
        config = resolve_config(base)
        return lambda: expand(spec, profile, cluster="c", base=base, config=config, facts=facts)

    if name == "shards":
        return f"{size:,} shards", compiling(_run(records=size, sharding={"shards": size}))
    if name == "replicas":
        per = min(size, MAX_REPLICAS_PER_DEPLOYMENT)
        deployments = {"writer" if i == 0 else f"m{i}": {"replicas": per} for i in range(-(-size // per))}
        return f"{size:,} one-GPU replicas", compiling(_run(deployments=deployments))
    if name == "gpus":
        replicas = max(1, size // MAX_TENSOR_PARALLEL)
        run = _run(deployments={"writer": {"tensor_parallel": MAX_TENSOR_PARALLEL, "replicas": replicas}})
        return f"{replicas * MAX_TENSOR_PARALLEL:,} GPUs ({replicas} replicas of {MAX_TENSOR_PARALLEL})", compiling(run)
    if name == "children":
        side = int(size**0.5)
        axes = [
            {"axis": "concurrency", "alias": "writer", "values": _values(side)},
            {"axis": "engine_arg", "alias": "writer", "arg": "max-num-seqs", "values": _values(side)},
        ]
        return f"{side * side:,} distinct children", expanding(_benchmark(axes))
    if name == "benchmark_replicas":
        cases = max(1, size // MAX_REPLICAS_PER_DEPLOYMENT)
        base = _run(deployments={"writer": {"replicas": MAX_REPLICAS_PER_DEPLOYMENT}})
        axes = [{"axis": "concurrency", "alias": "writer", "values": _values(cases)}]
        return f"{cases * MAX_REPLICAS_PER_DEPLOYMENT:,} replicas over {cases} cases", expanding(_benchmark(axes, base))
    raise ValueError(f"unknown scenario {name!r}")


def _probe(name: str, size: int) -> None:
    """Plan one scenario and print what it cost as JSON (the ``__main__`` of this module)."""
    label, action = _scenario(name, size)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    action()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"label": label, "seconds": seconds, "rss_kib": peak, "before_kib": before}))


AT_CAPS: tuple[tuple[str, str, int], ...] = (
    ("shards", "compile", MAX_SHARDS),
    ("replicas", "compile", MAX_REPLICAS),
    ("gpus", "compile", MAX_ALLOCATION_GPUS),
    ("children", "expand", MAX_BENCHMARK_CHILDREN),
    ("benchmark_replicas", "expand", MAX_BENCHMARK_REPLICAS),
)


def _at_cap_figures(quick: bool) -> list[Figure]:
    figures: list[Figure] = []
    for name, verb, cap in AT_CAPS:
        size = cap // 10 if quick else cap
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_limits", name, str(size)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the {name} probe failed:\n{done.stderr[-3000:]}")
        record = json.loads(done.stdout.splitlines()[-1])
        where = "at the cap" if not quick else "a tenth of the cap"
        rss = record["rss_kib"] / 1024
        note = f"{record['label']} ({where}); {record['before_kib'] / 1024:.0f} MiB resident before planning"
        figures.append(
            Figure(
                f"{verb} {name} {where}",
                record["seconds"],
                "s",
                None if quick else Target.at_most(AT_CAP_TARGET_S),
                note=note,
            )
        )
        figures.append(
            Figure(
                f"{verb} {name} {where}, peak resident",
                rss,
                "MiB",
                None if quick else Target.at_most(AT_CAP_RSS_TARGET_MIB),
                note=record["label"],
            )
        )
    return figures


# --- refusals (in this process) ---------------------------------------------------------------------------------------


class _Files:
    """The profile and input files of the refusals, written once under the benchmark's scratch directory."""

    def __init__(self, scratch: Path) -> None:
        self.dir = scratch
        self.profile = self._write("profile.yaml", {"schema_version": 1, "clusters": {"lab": PROFILE}})

    def _write(self, name: str, data: dict[str, Any]) -> Path:
        path = self.dir / name
        path.write_text(json.dumps(data), encoding="utf-8")
        return path

    def run(self, name: str, data: dict[str, Any]) -> Path:
        return self._write(f"run-{name}.json", data)

    def bench(self, name: str, data: dict[str, Any]) -> Path:
        return self._write(f"bench-{name}.json", data)

    def hostile_profile(self, kind: str) -> Path:
        path = self.dir / f"profile-{kind}.yaml"
        if kind == "dev_zero":
            path.symlink_to("/dev/zero")
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "directory":
            path.mkdir()
        else:
            with path.open("wb") as stream:
                for _ in range(50):
                    stream.write(b"# fifty megabytes of comments\n" * (2**20 // 30) + b"\n" * (2**20 % 30))
        return path


def _refusals(files: _Files) -> list[tuple[str, Callable[[], object]]]:
    from data_designer.slurm.services import plan_benchmark, plan_run

    def run(name: str, data: dict[str, Any]) -> Callable[[], object]:
        path = files.run(name, data)
        return lambda: plan_run(path, profile=files.profile)

    def bench(name: str, data: dict[str, Any]) -> Callable[[], object]:
        path = files.bench(name, data)
        return lambda: plan_benchmark(path, profile=files.profile)

    def profile(kind: str) -> Callable[[], object]:
        path = files.hostile_profile(kind)
        good = files.run("good", _run())
        return lambda: plan_run(good, profile=path)

    thousand = _values(1000)
    sweep = [
        {"axis": "concurrency", "alias": "writer", "values": thousand},
        {"axis": "engine_arg", "alias": "writer", "arg": "max-num-seqs", "values": thousand},
    ]
    return [
        ("shards: 10,000,000", run("shards", _run(records=10**12, sharding={"shards": 10**7}))),
        ("records_per_shard: 1 for 10**12 records", run("per_shard", _run(10**12, {"records_per_shard": 1}))),
        ("replicas: 10**9", run("replicas", _run(deployments={"writer": {"replicas": HOSTILE}}))),
        ("tensor_parallel: 10**9", run("tp", _run(deployments={"writer": {"tensor_parallel": HOSTILE}}))),
        ("repeats: 10**9", bench("repeats", _benchmark([], repeats=HOSTILE))),
        ("a sweep of 10**6 children", bench("sweep", _benchmark(sweep))),
        (
            "nodes axis of 10**9",
            bench("nodes", _benchmark([{"axis": "nodes", "alias": "writer", "values": [HOSTILE]}])),
        ),
        ("profile: /dev/zero behind a symlink", profile("dev_zero")),
        ("profile: a FIFO", profile("fifo")),
        ("profile: 50 MB of YAML", profile("fifty_mb")),
        ("profile: a directory", profile("directory")),
    ]


def _refuse(action: Callable[[], object], label: str) -> None:
    try:
        action()
    except InvalidInputError:
        return
    raise RuntimeError(f"{label} was not refused with InvalidInputError")


def _traced_peak(action: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _refusal_figures(ctx: RunContext) -> list[Figure]:
    figures: list[Figure] = []
    for label, action in _refusals(_Files(ctx.scratch)):

        def refused(action: Callable[[], object] = action, label: str = label) -> None:
            _refuse(action, label)

        refused()  # warm-up: imports and the first schema builds are not the refusal's cost
        seconds = median_seconds(refused, ctx.repeats(quick=3, full=7))
        peak = _traced_peak(refused)
        figures.append(
            Figure(
                f"refuse {label}",
                seconds,
                "s",
                Target.at_most(REFUSAL_TARGET_S),
                note=f"exit 2; traced peak {peak / 2**20:.2f} MiB",
            )
        )
    return figures


def run(ctx: RunContext) -> list[Figure]:
    return [*_refusal_figures(ctx), *_at_cap_figures(ctx.quick)]


BENCHMARK = Benchmark(
    summary="bounded inputs: planning at the caps (time, peak RSS) and refusing hostile counts and files (< 1 s)",
    run=run,
)


if __name__ == "__main__":
    _probe(sys.argv[1], int(sys.argv[2]))
