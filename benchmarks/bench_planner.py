"""Planner speed and memory: compiling a run with many shards, expanding a benchmark with many children, importing.

- ``compile``: ``planner.compile`` of a run with 10,000 shards (quick: 1,000), one vLLM deployment, an
  inline Data Designer config, ``MaxArraySize`` 1001 (so 10 array chunks). Median of several compiles.
- ``expand``: ``expand`` of a benchmark with 1,000 children (quick: 100), all distinct cases (three axes of
  10 values: concurrency, ``max-num-seqs``, model; repeats would share a compiled plan and cost less).
- ``import``: ``import data_designer.slurm.planner`` in a fresh interpreter: the cumulative import time
  ``python -X importtime`` reports for the package (median over runs), and the wall time of the whole
  interpreter run minus that of ``python -c pass``.
- memory: the peak traced allocation (``tracemalloc``) of one compile and one expansion at two sizes (a
  tenth of the timed size, and the timed size), and the growth exponent ``log(peak ratio) / log(size
  ratio)``: 1 is linear (fixed costs push it below 1 at small sizes).

Targets (issue 4) apply at the full sizes: compile of 10,000 shards and expansion of 1,000 children under
2 s each, planner import under 0.3 s; memory growth at most linear (exponent <= 1.1).
"""

from __future__ import annotations

import functools
import math
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from benchmarks._harness import Benchmark, Figure, RunContext, Target, median_seconds
from data_designer.slurm.contracts import BenchmarkSpec, ClusterFacts, ClusterProfile, RunSpec
from data_designer.slurm.planner import Document, compile, expand, resolve_config

COMPILE_SHARDS = 10_000
EXPAND_CHILDREN = 1_000
COMPILE_TARGET_S = 2.0
EXPAND_TARGET_S = 2.0
IMPORT_TARGET_S = 0.3
LINEAR_EXPONENT = 1.1

CONFIG: dict[str, Any] = {
    "model_configs": [{"alias": "writer", "model": "meta/llama-3.1-8b-instruct", "provider": "local"}],
    "columns": [
        {"name": "topic", "column_type": "sampler", "sampler_type": "category", "params": {"values": ["a", "b"]}},
        {"name": "text", "column_type": "llm-text", "model_alias": "writer", "prompt": "Write about {{ topic }}."},
    ],
}
PROFILE = ClusterProfile.model_validate(
    {
        "workspace_root": "/shared/ws",
        "account": "acct",
        "partitions": {"gpu": "gpu", "cpu": "cpu"},
        "gpus_per_node": 8,
        "compute_python": {"interpreter": "/shared/venv/bin/python"},
        "default_time_limit": "04:00:00",
    }
)
FACTS = ClusterFacts(max_array_size=1001)


def run_spec(shards: int) -> RunSpec:
    """A run of ``shards`` shards of 10 records each."""
    return RunSpec.model_validate_json(
        RunSpec.model_validate(
            {
                "schema_version": 1,
                "name": "bench",
                "data_designer": {"inline": CONFIG},
                "records": 10 * shards,
                "sharding": {"shards": shards},
                "deployments": {"writer": {"engine": "vllm", "model": "/models/llama", "tensor_parallel": 2}},
                "client": {"concurrency": {"writer": 64}},
            },
            strict=False,
        ).model_dump_json()
    )


def benchmark_spec(children: int) -> BenchmarkSpec:
    """A benchmark of ``children`` distinct cases (a power of ten up to 1,000) over three axes."""
    per_axis = [10] * round(math.log10(children)) + [1] * 3
    axes = [
        {"axis": "concurrency", "alias": "writer", "values": [8 * (i + 1) for i in range(per_axis[0])]},
        {
            "axis": "engine_arg",
            "alias": "writer",
            "arg": "max-num-seqs",
            "values": [32 * (i + 1) for i in range(per_axis[1])],
        },
        {"axis": "model", "alias": "writer", "values": [f"/models/m{i}" for i in range(per_axis[2])]},
    ]
    return BenchmarkSpec.model_validate_json(
        BenchmarkSpec.model_validate(
            {
                "schema_version": 1,
                "name": "sweep",
                "base": {"inline": run_spec(1).model_dump(mode="json")},
                "axes": axes,
                "records": {"policy": "scaled", "per_concurrency": 10, "min_records": 100, "max_records": 5000},
                "max_concurrent_children": 4,
            },
            strict=False,
        ).model_dump_json()
    )


def _compile(run: RunSpec, config: Document) -> Any:
    return compile(run, PROFILE, cluster="c", config=config, facts=FACTS)


def _expand(spec: BenchmarkSpec, base: RunSpec, config: Document) -> Any:
    return expand(spec, PROFILE, cluster="c", base=base, config=config, facts=FACTS)


def _peak_bytes(action: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _memory_figures(
    label: str, units: tuple[str, str], sizes: tuple[int, int], action: Callable[[int], object]
) -> list[Figure]:
    """Peaks at two sizes and the growth exponent; ``units`` is the singular and plural (``shard``, ``shards``)."""
    unit, plural = units
    peaks = [_peak_bytes(functools.partial(action, size)) for size in sizes]
    figures = [
        Figure(f"{label} peak, {size:,} {plural}", peak / 2**20, "MiB", note=f"{peak / size / 1024:.1f} KiB per {unit}")
        for size, peak in zip(sizes, peaks, strict=True)
    ]
    exponent = math.log(peaks[1] / peaks[0]) / math.log(sizes[1] / sizes[0])
    figures.append(
        Figure(
            f"{label} memory growth exponent",
            exponent,
            "",
            Target.at_most(LINEAR_EXPONENT),
            note=f"peak ratio {peaks[1] / peaks[0]:.2f} for {sizes[1] // sizes[0]}x the {plural}",
        )
    )
    return figures


def _import_seconds(repeats: int) -> tuple[float, float]:
    """(median cumulative ``-X importtime`` of the planner package, median wall time over ``python -c pass``)."""
    cumulative: list[float] = []
    walls: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        baseline = time.perf_counter() - start
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import data_designer.slurm.planner"],
            check=True,
            capture_output=True,
            text=True,
        )
        walls.append(max(0.0, time.perf_counter() - start - baseline))
        rows = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")]
        ours = [int(row[1]) for row in rows if len(row) == 3 and row[2].strip() == "data_designer.slurm.planner"]
        if not ours:
            raise RuntimeError(f"-X importtime printed no row for data_designer.slurm.planner:\n{done.stderr[-2000:]}")
        cumulative.append(ours[0] / 1e6)
    return statistics.median(cumulative), statistics.median(walls)


def run(ctx: RunContext) -> list[Figure]:
    shards = 1_000 if ctx.quick else COMPILE_SHARDS
    children = 100 if ctx.quick else EXPAND_CHILDREN
    full = not ctx.quick
    figures: list[Figure] = []

    config = resolve_config(run_spec(1))
    big = run_spec(shards)
    plan = _compile(big, config)  # also the warm-up
    if len(plan.shards) != shards:
        raise RuntimeError(f"expected {shards} shards, planned {len(plan.shards)}")
    seconds = median_seconds(functools.partial(_compile, big, config), ctx.repeats(quick=1, full=5))
    figures.append(
        Figure(
            f"compile, {shards:,} shards",
            seconds,
            "s",
            Target.at_most(COMPILE_TARGET_S) if full else None,
            note=f"{len(plan.submission.chunks)} array chunks; {seconds * 1e6 / shards:.0f} us per shard",
        )
    )

    spec = benchmark_spec(children)
    base = RunSpec.model_validate_json(RunSpec.model_validate(spec.base.inline, strict=False).model_dump_json())
    bench = _expand(spec, base, config)
    if len(bench.children) != children:
        raise RuntimeError(f"expected {children} children, expanded {len(bench.children)}")
    seconds = median_seconds(functools.partial(_expand, spec, base, config), ctx.repeats(quick=1, full=3))
    figures.append(
        Figure(
            f"expand, {children:,} children",
            seconds,
            "s",
            Target.at_most(EXPAND_TARGET_S) if full else None,
            note=f"{children} distinct cases, one compile each; {seconds * 1e3 / children:.2f} ms per child",
        )
    )

    cumulative, wall = _import_seconds(ctx.repeats(quick=3, full=7))
    figures.append(
        Figure(
            "import data_designer.slurm.planner (-X importtime)",
            cumulative,
            "s",
            Target.at_most(IMPORT_TARGET_S),
            note="cumulative import time of the package in a fresh interpreter (median)",
        )
    )
    figures.append(Figure("import data_designer.slurm.planner, wall over python -c pass", wall, "s"))

    figures.extend(
        _memory_figures("compile", ("shard", "shards"), (shards // 10, shards), lambda n: _compile(run_spec(n), config))
    )
    figures.extend(
        _memory_figures(
            "expand",
            ("child", "children"),
            (children // 10, children),
            lambda n: _expand(benchmark_spec(n), base, config),
        )
    )
    return figures


BENCHMARK = Benchmark(
    summary="planner: compile of 10,000 shards, expansion of 1,000 children, import time, memory growth",
    run=run,
)
