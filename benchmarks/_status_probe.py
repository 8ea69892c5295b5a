"""One ``status`` of a run directory in a fresh interpreter, on a fake Slurm: ``_status_probe.py RUN_DIR OUTCOME``.

``OUTCOME`` is ``succeeded`` (every shard) or ``mixed`` (shard k: ``SHARD_OUTCOMES[k % 7]``), as the directory
was written. What a user waits for is timed in two parts: the imports (process start, the first line below, to
after ``import data_designer.slurm.services``, what the CLI's ``status`` command imports) and one
``run_status(RUN_DIR, runner=FakeSlurm, clock=the fake's clock)``. Between them, untimed and reported apart, the
setup: importing ``runtime.testing``, building the :class:`FakeSlurm` and registering the run's jobs. Prints one
JSON object on stdout.
"""

# No ``from __future__`` import and nothing before the clock: the imports are timed from the first line.
import time

START = time.perf_counter()

import json  # noqa: E402  (after the clock on purpose)
import sys  # noqa: E402

import data_designer.slurm.services  # noqa: E402

IMPORTED = time.perf_counter()
HEAVY = ("pandas", "numpy", "pyarrow")
SCHEDULER_TOOLS = ("squeue", "sacct")


def heavy_modules() -> list[str]:
    return sorted(name for name in HEAVY if name in sys.modules)


def main(run_dir: str, outcome_name: str) -> dict[str, object]:
    modules_after_import = set(sys.modules)
    heavy_after_import = heavy_modules()
    setup_start = time.perf_counter()
    from pathlib import Path

    from data_designer.slurm.runtime.store import RunLayout
    from data_designer.slurm.runtime.testing import SHARD_OUTCOMES, FakeSlurm, outcome_cycle, register_run_jobs

    outcome = outcome_cycle(SHARD_OUTCOMES) if outcome_name == "mixed" else None
    fake = FakeSlurm()
    directory = Path(run_dir)
    layout = RunLayout.of(directory.parent.parent, directory.name)
    job_ids = register_run_jobs(fake, layout, outcome=outcome)
    setup_s = time.perf_counter() - setup_start
    modules_before_call = set(sys.modules)
    calls_before = len(fake.calls)

    call_start = time.perf_counter()
    status = data_designer.slurm.services.run_status(run_dir, runner=fake, clock=fake.clock)
    status_s = time.perf_counter() - call_start

    calls = fake.calls[calls_before:]
    return {
        "imports_s": IMPORTED - START,
        "setup_s": setup_s,
        "status_s": status_s,
        "jobs": len(job_ids),
        "scheduler_calls_seen": sum(1 for argv in calls if argv and argv[0] in SCHEDULER_TOOLS),
        "calls_seen": [argv[0] for argv in calls if argv],
        "scheduler_calls": status.scheduler_calls,
        "files_read": status.files_read,
        "state": status.state,
        "evidence": status.evidence,
        "sources": [
            {"source": r.source, "status": r.status, "detail": r.detail, "duration_s": r.duration_s}
            for r in (status.squeue, status.sacct)
            if r is not None
        ],
        "shards_total": status.shards_total,
        "counts": dict(status.counts),
        "records_done": status.records_done,
        "records_total": status.records_total,
        "modules_at_import": len(modules_after_import),
        "modules_by_setup": len(modules_before_call - modules_after_import),
        "modules_by_call": sorted(set(sys.modules) - modules_before_call),
        "heavy_at_import": heavy_after_import,
        "heavy": heavy_modules(),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
