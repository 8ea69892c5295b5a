"""Run one command and record its wall time and peak RSS: ``python -I -S _spawn_probe.py OUT.json CMD [ARG ...]``.

The command is started with ``os.posix_spawnp`` (the environment and working directory are this process's) and
reaped with ``os.wait4``, whose ``ru_maxrss`` is the peak resident set of that child (and of any children it
reaped). Linux carries the parent's peak over ``execve`` into the child's ``ru_maxrss``, so the figure is floored by
this launcher's own ``VmHWM`` at the spawn (about 10 MiB: ``-I -S``, standard library only), recorded as
``floor_kib``, instead of by the benchmark runner's (which may be larger than the command's peak). The wall time runs
from just before the spawn to the reaping: the command's whole life, start-up included. ``spawned_monotonic`` is
``time.monotonic()`` just before the spawn, for a child that reports the same clock. Writes one JSON object to
OUT.json; the command's stdout and stderr are this process's.
"""

import json
import os
import sys
import time


def hwm_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def main(out: str, argv: list[str]) -> int:
    floor = hwm_kib()
    spawned_monotonic = time.monotonic()
    start = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    record = {
        "wall_s": wall,
        "max_rss_kib": usage.ru_maxrss,
        "floor_kib": floor,
        "exit_code": code,
        "spawned_monotonic": spawned_monotonic,
    }
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
