"""One ``runs ls --all`` of a workspace in a fresh interpreter, on a fake Slurm: ``_runs_ls_probe.py FIXTURE MODE``.

``FIXTURE`` is the fixture directory ``bench_runs_ls`` wrote (``profile.yaml``, ``runs.json`` naming each run
directory and its outcome index); ``MODE`` is ``cached`` (no ``--refresh``) or ``refresh``. Timed in two parts, as
``_status_probe.py`` times ``status``: the imports (process start to after ``import data_designer.slurm.services``)
and one ``list_runs(all=True, refresh=...)``. Between them, untimed: ``runtime.testing`` imported, a
:class:`FakeSlurm` built and every run's jobs registered, behind a :class:`CountingRunner`. Prints one JSON object.
"""

# No ``from __future__`` import and nothing before the clock: the imports are timed from the first line.
import time

START = time.perf_counter()

import json  # noqa: E402  (after the clock on purpose)
import sys  # noqa: E402

import data_designer.slurm.services  # noqa: E402

IMPORTED = time.perf_counter()
SCHEDULER_TOOLS = ("squeue", "sacct")


def main(fixture: str, mode: str) -> dict[str, object]:
    setup_start = time.perf_counter()
    from pathlib import Path

    from data_designer.slurm.runtime.store import RunLayout
    from data_designer.slurm.runtime.testing import (
        SHARD_OUTCOMES,
        CountingRunner,
        FakeSlurm,
        ShardOutcome,
        register_run_jobs,
    )

    home = Path(fixture)
    fake = FakeSlurm()
    for item in json.loads((home / "runs.json").read_text(encoding="utf-8")):
        directory = Path(item["run_dir"])
        layout = RunLayout.of(directory.parent.parent, directory.name)
        offset = item["mixed"]

        def outcome(shard: int, offset: int | None = offset) -> ShardOutcome:
            return "succeeded" if offset is None else SHARD_OUTCOMES[(shard + offset) % len(SHARD_OUTCOMES)]

        register_run_jobs(fake, layout, outcome=outcome)
    runner = CountingRunner(fake)
    setup_s = time.perf_counter() - setup_start

    call_start = time.perf_counter()
    listed = data_designer.slurm.services.list_runs(
        all=True, refresh=mode == "refresh", profile=home / "profile.yaml", runner=runner, clock=fake.clock, environ={}
    )
    call_s = time.perf_counter() - call_start

    states: dict[str, int] = {}
    for run in listed.runs:
        states[run.state] = states.get(run.state, 0) + 1
    return {
        "imports_s": IMPORTED - START,
        "setup_s": setup_s,
        "call_s": call_s,
        "runs": len(listed.runs),
        "total": listed.total,
        "hidden": listed.hidden,
        "scheduler_calls": listed.scheduler_calls,
        "calls_seen": [argv[0] for argv in runner.calls if argv and argv[0] in SCHEDULER_TOOLS],
        "states": states,
        "evidence": sorted({str(run.evidence) for run in listed.runs}),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
