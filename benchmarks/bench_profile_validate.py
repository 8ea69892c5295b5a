"""Time and memory to load and validate a profile (``planner.load_profile``) with 1 and many clusters.

Each cluster sets every field (partitions, account, sbatch options, environment names, Hugging Face
cache) so the strict parser, the secret scan and every validator run. Sizes: 1 and 500 clusters
(quick: 1 and 50); the time is the median of several loads, the memory the peak traced allocation
of one load. No targets yet: the figures show how the cost grows with the number of clusters.
"""

from __future__ import annotations

import functools
import tracemalloc

from benchmarks._harness import Benchmark, Figure, RunContext, median_seconds
from data_designer.slurm.planner import load_profile

_CLUSTER = """\
  {name}:
    workspace_root: "/shared/{name}/data-designer-slurm"
    account: "acct-{index}"
    partitions:
      gpu: "gpu-{index}"
      cpu: "cpu-{index}"
    gpus_per_node: 8
    gpu_request: "gres"
    container_runtime: "pyxis"
    compute_python:
      interpreter: "/shared/{name}/venv/bin/python"
    default_time_limit: "1-00:00:00"
    sbatch_options: ["--constraint=a100&ib", "--qos=normal"]
    environment: [HF_TOKEN, NVIDIA_API_KEY, WANDB_API_KEY]
    huggingface:
      hf_home: "/shared/{name}/hf"
      offline: true
"""


def profile_text(clusters: int) -> str:
    """A valid YAML profile with ``clusters`` fully specified clusters."""
    names = [f"cluster-{index:05d}" for index in range(clusters)]
    body = "".join(_CLUSTER.format(name=name, index=index) for index, name in enumerate(names))
    return f"schema_version: 1\ndefault_cluster: {names[0]}\nclusters:\n{body}"


def _peak_bytes(text: str) -> int:
    tracemalloc.start()
    try:
        load_profile(text, file="bench-profile.yaml")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def run(ctx: RunContext) -> list[Figure]:
    figures: list[Figure] = []
    for clusters in (1, 50 if ctx.quick else 500):
        text = profile_text(clusters)
        profile = load_profile(text, file="bench-profile.yaml")  # also the warm-up
        if len(profile.clusters) != clusters:
            raise RuntimeError(f"expected {clusters} clusters, loaded {len(profile.clusters)}")
        repeats = ctx.repeats(quick=3, full=7 if clusters > 1 else 50)
        seconds = median_seconds(functools.partial(load_profile, text, file="bench-profile.yaml"), repeats)
        label = f"{clusters} cluster{'s' if clusters > 1 else ''}"
        figures.append(
            Figure(f"load_profile, {label}", seconds * 1000, "ms", note=f"{len(text) / 1024:.1f} KiB of YAML")
        )
        if clusters > 1:
            figures.append(Figure(f"load_profile, {label}: per cluster", seconds * 1e6 / clusters, "us"))
        figures.append(Figure(f"load_profile, {label}: peak allocation", _peak_bytes(text) / 2**20, "MiB"))
    return figures


BENCHMARK = Benchmark(
    summary="load + strict validation of a profile with 1 and many clusters (planner.load_profile)",
    run=run,
)
