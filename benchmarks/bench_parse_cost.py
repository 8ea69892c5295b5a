"""Parsing cost of dense files under the 4 MiB size cap (issue 28), beside ``yaml.safe_load`` of the same files.

Three hostile files, each written as YAML and as JSON just under ``MAX_INPUT_FILE_BYTES``: a benchmark file with one
sweep axis of 400,000 values, a run file whose ``records`` is a list of a million equal values, and a run file with
250,000 unknown keys. Each is loaded in a fresh interpreter (``python -m benchmarks.bench_parse_cost LOADER FILE``)
so its peak resident set size (``ru_maxrss``) is its own: by the planner (``load_run``/``load_benchmark``: parse,
count nodes, validate), which must refuse it with ``InvalidInputError`` at ``MAX_DOCUMENT_NODES``, and, in full
mode, by ``yaml.safe_load``, which reads all of it (the cost before the node cap: 44-114 s and up to 1.1 GB through
the planner on a loaded 2-core machine). Figures: seconds and peak RSS per file and loader.

Targets (planner only): about 1 s per MiB of the file or less, and under 200 MiB resident.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._harness import Benchmark, Figure, RunContext, Target

ROOT = Path(__file__).resolve().parent.parent
RSS_TARGET_MIB = 200.0
SECONDS_PER_MIB_TARGET = 1.0

CONFIG: dict[str, Any] = {
    "model_configs": [{"alias": "writer", "model": "m", "provider": "local"}],
    "columns": [{"name": "text", "column_type": "llm-text", "model_alias": "writer", "prompt": "Write."}],
}
RUN: dict[str, Any] = {
    "schema_version": 1,
    "name": "hostile",
    "data_designer": {"inline": CONFIG},
    "records": 100,
    "sharding": {"shards": 1},
    "deployments": {"writer": {"engine": "vllm", "model": "/models/writer"}},
}


def _axis(fmt: str) -> str:
    bench = {
        "schema_version": 1,
        "name": "hostile",
        "base": {"inline": RUN},
        "axes": [{"axis": "concurrency", "alias": "writer", "values": [1]}],
        "records": {"policy": "fixed", "records": 10},
    }
    values = "[" + ", ".join(str(i) for i in range(1, 400_001)) + "]"
    text = json.dumps(bench).replace("[1]", values)
    return text if fmt == "json" else "# YAML\n" + text  # JSON is YAML flow syntax


def _equal(fmt: str) -> str:
    if fmt == "json":
        return json.dumps({**RUN, "records": [1] * 1_000_000})
    return "schema_version: 1\nname: hostile\nrecords: [" + ", ".join(["1"] * 1_000_000) + "]\n"


def _keys(fmt: str) -> str:
    keys = {f"k{index:06d}": 1 for index in range(250_000)}
    if fmt == "json":
        return json.dumps({**RUN, **keys})
    return "".join(f"k{index:06d}: 1\n" for index in range(250_000)) + "schema_version: 1\n"


FILES = (
    ("axis", "an axis of 400,000 values", _axis),
    ("equal", "a million equal values", _equal),
    ("keys", "250,000 unknown keys", _keys),
)


def _load(loader: str, path: str) -> None:
    """Load ``path`` with ``loader`` and print what it cost as JSON (the ``__main__`` of this module)."""
    text = Path(path).read_text(encoding="utf-8")
    import yaml

    from data_designer.slurm.contracts import InvalidInputError
    from data_designer.slurm.planner import load_benchmark, load_run

    start = time.perf_counter()
    outcome = "read"
    try:
        if loader == "safe_load":
            yaml.safe_load(text)
        elif "axis" in Path(path).name:
            load_benchmark(text, file=path)
        else:
            load_run(text, file=path)
    except InvalidInputError as exc:
        outcome = f"refused: {', '.join(sorted({p.code for p in exc.problems}))}"
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "rss_kib": peak, "outcome": outcome}))


def _probe(loader: str, path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_parse_cost", loader, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {loader} probe of {path.name} failed:\n{done.stderr[-3000:]}")
    record: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return record


def run(ctx: RunContext) -> list[Figure]:
    figures: list[Figure] = []
    loaders = ("planner",) if ctx.quick else ("planner", "safe_load")
    for name, label, make in FILES:
        for fmt in ("yaml", "json"):
            path = ctx.scratch / f"{name}.{fmt}"
            path.write_text(make(fmt), encoding="utf-8")
            mib = path.stat().st_size / 2**20
            for loader in loaders:
                record = _probe(loader, path)
                planner = loader == "planner"
                if planner and not record["outcome"].startswith("refused"):
                    raise RuntimeError(f"{path.name} was not refused by the planner")
                note = f"{label}, {mib:.2f} MiB; {record['outcome']}"
                figures.append(
                    Figure(
                        f"{loader} {name}.{fmt}",
                        record["seconds"],
                        "s",
                        Target.at_most(SECONDS_PER_MIB_TARGET * max(mib, 1.0)) if planner else None,
                        note=note,
                    )
                )
                figures.append(
                    Figure(
                        f"{loader} {name}.{fmt}, peak resident",
                        record["rss_kib"] / 1024,
                        "MiB",
                        Target.at_most(RSS_TARGET_MIB) if planner else None,
                        note=note,
                    )
                )
    return figures


BENCHMARK = Benchmark(
    summary="dense files under the size cap: the planner refuses them at the node cap (s, peak RSS) beside "
    "yaml.safe_load",
    run=run,
)


if __name__ == "__main__":
    _load(sys.argv[1], sys.argv[2])
