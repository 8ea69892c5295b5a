"""The CLI's start-up before a merge reads its first part: ``python _merge_start_probe.py OUT.json ARG ...``.

Runs what the ``data-designer`` console script runs (``data_designer.cli.main:main`` with ``sys.argv`` set to
``data-designer ARG ...``, here ``slurm merge RUN --output DIR``) under an audit hook (``sys.addaudithook``) on the
``open`` event, which both ``open()`` and ``os.open`` raise. At the first path containing ``/output/part-`` (a run's
published part) it writes OUT.json and ends the process at once (``os._exit``: the rest of the merge is not needed):

- ``startup_s``: from the process's start (``/proc/self/stat`` field 22, in clock ticks of ``CLOCK_BOOTTIME``, so
  10 ms steps; it is taken when the launcher forked this process, just before its ``execve``) to that open;
- ``opened_monotonic``: ``time.monotonic()`` at that open, for a launcher that noted the same clock at the spawn;
- ``modules``: how many modules were imported by then, and ``path``: the part.

Opens by Arrow's own file system (``pq.read_schema(path)``) raise no audit event: the default (splice) merge opens
its parts with ``os.open`` first, so it is what this measures. Started like the console script (no ``-I``), with the
caller's environment.
"""

import os
import sys
import time

MARK = "/output/part-"


def started_boottime_s() -> float:
    with open("/proc/self/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22; fields[0] is field 3


STARTED = started_boottime_s()
_out = sys.argv[1]
_done = False


def _hook(event: str, args: tuple[object, ...]) -> None:
    global _done
    if event != "open" or _done or not args:
        return
    path = args[0]
    if isinstance(path, bytes):
        path = path.decode("utf-8", "replace")
    if not isinstance(path, str) or MARK not in path:
        return
    _done = True  # the writes below raise "open" too
    now = time.clock_gettime(time.CLOCK_BOOTTIME)
    monotonic = time.monotonic()
    modules = len(sys.modules)
    import json  # after the clock: the CLI has imported it by now in any case

    record = {"startup_s": now - STARTED, "opened_monotonic": monotonic, "modules": modules, "path": path}
    with open(_out, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    os._exit(0)


sys.addaudithook(_hook)
sys.argv = ["data-designer", *sys.argv[2:]]

from data_designer.cli.main import main  # noqa: E402  (after the hook on purpose)

sys.exit(main())
