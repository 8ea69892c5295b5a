"""Plan time with a registered 2 GiB image, before and after its digest is cached (``plan_run``, the dry run).

A sparse 2 GiB file with a SquashFS magic is registered as ``image add`` leaves it (its sha256 cached by file
identity under ``images/<name>/digests/``). The dry run resolves the name from the registry and verifies the digest
as ``execute`` does:

* **not cached**: the image was touched (same bytes, new mtime), so its identity has no cached digest and the plan
  re-hashes the whole file once (each sample touches it again first);
* **cached**: the identity's digest is on disk: one ``stat`` and one small record read.

Bytes read are this process's ``rchar`` (``/proc/self/io``) around one plan call: every ``read`` counts, the run
file, the profile and the registry records included. Target: under 1 MiB once cached. A plan without an image is
the baseline. Quick mode uses a 256 MiB image; the cached figures do not depend on the size.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks._harness import Benchmark, Figure, RunContext, Target, median_seconds
from data_designer.slurm.contracts.records import FoundVersion, ImageEntry, ImageInspection
from data_designer.slurm.runtime.images import ImageRegistry, cached_digest
from data_designer.slurm.runtime.store import modes_for, requester_from_environment
from data_designer.slurm.services import plan_run

GIB = 1 << 30
MIB = 1 << 20
_CREATED = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

PROFILE = """\
schema_version: 1
default_cluster: bench
clusters:
  bench:
    workspace_root: {workspace}
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: 8
    container_runtime: pyxis
    compute_python: {{interpreter: {python}}}
    default_time_limit: "01:00:00"
"""

RUN = """\
schema_version: 1
name: bench
data_designer:
  inline:
    model_configs:
      - {{alias: writer, model: m, provider: local}}
    columns:
      - {{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}}
records: 1000
sharding: {{shards: 10}}
deployments:
  writer: {{engine: vllm, model: m, tensor_parallel: 1, replicas: 2{image}}}
"""


def _rchar() -> int:
    with open("/proc/self/io", encoding="ascii") as handle:
        return int(next(line for line in handle if line.startswith("rchar:")).split(":")[1])


def _register(workspace: Path, image: Path, name: str) -> None:
    registry = ImageRegistry(workspace)
    lookup = cached_digest(image, registry.digests_dir(name), modes_for("private"))
    entry = ImageEntry(
        name=name,
        generation=1,
        role="serving",
        format="squashfs",
        source=str(image),
        source_kind="squashfs",
        path=str(image),
        size=lookup.identity.size,
        identity=lookup.identity,
        sha256=lookup.sha256,
        inspection=ImageInspection(
            python="3.12", distributions=(FoundVersion(distribution="vllm", version="0.33.1"),), files=2
        ),
        added_by=requester_from_environment({"USER": "bench"}, clock=lambda: _CREATED),
    )
    if not registry.write_generation(entry, modes_for("private")):
        raise RuntimeError(f"generation 1 of {name!r} exists already")


def _touch(path: Path) -> None:
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000))


def run(ctx: RunContext) -> list[Figure]:
    size = 256 * MIB if ctx.quick else 2 * GIB
    workspace = ctx.scratch / "workspace"
    image = ctx.scratch / "serve.sqsh"
    with image.open("wb") as handle:
        handle.write(b"hsqs")
        handle.truncate(size)
    _register(workspace, image, "serve")
    profile = ctx.scratch / "profile.yaml"
    profile.write_text(PROFILE.format(workspace=workspace, python=sys.executable), encoding="utf-8")
    with_image = ctx.scratch / "run.yaml"
    with_image.write_text(RUN.format(image=", image: serve"), encoding="utf-8")
    without = ctx.scratch / "baseline.yaml"
    without.write_text(RUN.format(image=""), encoding="utf-8")

    def plan(run_file: Path) -> None:
        result = plan_run(run_file, profile=profile)
        if not result.plan.submittable:
            raise RuntimeError(f"the plan is not submittable: {result.plan.unresolved}")

    plan(without)  # warm-up: imports and first-use caches
    plan(with_image)
    label = f"{size // MIB:,} MiB image"
    figures: list[Figure] = []
    baseline = median_seconds(lambda: plan(without), ctx.repeats(quick=5, full=20))
    figures.append(Figure("plan_run, no image (baseline)", baseline * 1000, "ms"))

    uncached: list[float] = []
    uncached_bytes = 0
    for _ in range(ctx.repeats(quick=1, full=3)):
        _touch(image)
        before, start = _rchar(), time.perf_counter()
        plan(with_image)
        uncached.append(time.perf_counter() - start)
        uncached_bytes = _rchar() - before
    figures.append(Figure(f"plan_run, {label}, digest not cached", min(uncached), "s", note="one full re-hash"))
    figures.append(Figure(f"plan_run, {label}, digest not cached: bytes read", uncached_bytes / MIB, "MiB"))

    cached = median_seconds(lambda: plan(with_image), ctx.repeats(quick=5, full=20))
    figures.append(Figure(f"plan_run, {label}, digest cached", cached * 1000, "ms", note="one stat of the image"))
    before = _rchar()
    plan(with_image)
    cached_bytes = _rchar() - before
    figures.append(
        Figure(
            f"plan_run, {label}, digest cached: bytes read",
            cached_bytes / 1024,
            "KiB",
            Target.at_most(1024),
            note="rchar of the whole plan call: run file, profile, registry and digest records",
        )
    )
    return figures


BENCHMARK = Benchmark(
    summary="plan time and bytes read with a registered 2 GiB image, before and after its digest is cached",
    run=run,
)
