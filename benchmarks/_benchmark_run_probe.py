"""One ``benchmark run`` in a fresh interpreter: ``_benchmark_run_probe.py ROOT fake|real``.

``ROOT`` holds ``bench.yaml`` and ``profile.yaml`` (written by ``bench_benchmark_run.py``). What a user waits for is
timed in two parts: the imports (process start, the first line below, to after ``import
data_designer.slurm.services``) and one ``services.run_benchmark(ROOT/bench.yaml, profile=ROOT/profile.yaml)``.
With ``fake`` the runner is a fresh ``runtime.testing.FakeSlurm`` (built untimed, between the two), so a second
probe of the same ROOT (the re-run) starts from an empty fake: a re-run that submitted nothing asked it nothing.
With ``real`` the runner is the default one (the real ``sbatch``/``squeue``/``sacct`` of ``$SLURM_CONF``).
``os.fsync`` is wrapped to count the calls and the seconds spent in them (the durable writes are most of the cost
on a disk). Prints one JSON object on stdout.
"""

# No ``from __future__`` import and nothing before the clock: the imports are timed from the first line.
import time

START = time.perf_counter()

import json  # noqa: E402  (after the clock on purpose)
import os  # noqa: E402
import sys  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import data_designer.slurm.services  # noqa: E402

IMPORTED = time.perf_counter()

_fsync = os.fsync
FSYNC = {"calls": 0, "seconds": 0.0}


def _counted_fsync(fd: Any) -> None:
    start = time.perf_counter()
    try:
        _fsync(fd)
    finally:
        FSYNC["calls"] += 1
        FSYNC["seconds"] += time.perf_counter() - start


def main(root: Path, mode: str) -> dict[str, object]:
    fake = None
    if mode == "fake":
        from data_designer.slurm.runtime.testing import FakeSlurm

        fake = FakeSlurm(max_array_size=11)
    elif mode != "real":
        raise SystemExit(f"mode must be fake or real, not {mode!r}")
    os.fsync = _counted_fsync
    call_start = time.perf_counter()
    result = data_designer.slurm.services.run_benchmark(
        root / "bench.yaml", profile=root / "profile.yaml", runner=fake, environ={} if fake is not None else None
    )
    call_s = time.perf_counter() - call_start
    os.fsync = _fsync
    seen = Counter(argv[0] for argv in fake.calls if argv) if fake is not None else None
    return {
        "imports_s": IMPORTED - START,
        "call_s": call_s,
        "benchmark_id": result.benchmark_id,
        "created": result.created,
        "children": len(result.children),
        "counts": dict(result.counts),
        "sbatch_calls": result.sbatch_calls,
        "scheduler_lookups": result.scheduler_lookups,
        "facts_asked": result.facts_asked,
        "jobs": sorted({job for row in result.children for job in row.jobs}, key=int),
        "with_dependency": sum(1 for row in result.children if row.after),
        "error": None if result.error is None else result.error.model_dump(mode="json"),
        "fsync_calls": FSYNC["calls"],
        "fsync_s": FSYNC["seconds"],
        "fake_calls": None if seen is None else dict(seen),
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2])))
