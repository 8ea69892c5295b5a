"""One merge of a run directory in a fresh interpreter: ``_merge_probe.py RUN_DIR OUTPUT [PROFILE]``.

Imports ``data_designer.slurm.services`` and ``pyarrow`` (what a merge loads anyway), records the peak resident set
size so far, then times one ``services.merge_run(RUN_DIR, output=OUTPUT)`` and records the peak again: the
process runs nothing but the merge, so its peak at the end is the merge's (Arrow's allocations are outside
Python's heap, where ``tracemalloc`` cannot see them). Both the kernel's ``ru_maxrss`` and ``VmHWM`` are
reported (see :func:`hwm_kib` for why they differ). With ``PROFILE`` (a file name) the call runs under
``cProfile`` and its statistics are written there. Prints one JSON object on stdout.
"""

# No ``from __future__`` import and nothing before the clock: the imports are timed from the first line.
import time

START = time.perf_counter()

import json  # noqa: E402  (after the clock on purpose)
import resource  # noqa: E402
import sys  # noqa: E402

import pyarrow  # noqa: E402, F401  (loaded by the merge in any case: its cost belongs to the imports)

import data_designer.slurm.services  # noqa: E402

IMPORTED = time.perf_counter()


def max_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def hwm_kib() -> int:
    """The peak RSS of this process image (``VmHWM``): ``ru_maxrss`` also counts the parent's RSS at the fork,
    which the kernel carries over ``execve``, so in a probe started by a large parent it is that parent's size."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return max_rss_kib()


def main(run_dir: str, output: str, profile: str | None) -> dict[str, object]:
    rss_before, hwm_before = max_rss_kib(), hwm_kib()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    call_start = time.perf_counter()
    result = data_designer.slurm.services.merge_run(run_dir, output=output)
    merge_s = time.perf_counter() - call_start
    if profiler is not None and profile:
        profiler.disable()
        profiler.dump_stats(profile)
    return {
        "imports_s": IMPORTED - START,
        "merge_s": merge_s,
        "max_rss_kib_before": rss_before,
        "max_rss_kib": max_rss_kib(),
        "hwm_kib_before": hwm_before,
        "hwm_kib": hwm_kib(),
        "outcome": result.outcome,
        "records": result.records,
        "files": result.files,
        "parts_read": result.parts_read,
        "bytes": result.bytes,
        "complete": result.complete,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)))
