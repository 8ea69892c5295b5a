"""One ``benchmark analyze`` in a fresh interpreter: ``_benchmark_analyze_probe.py OUT.json ROOT BENCH service|cli``.

``ROOT`` holds ``profile.yaml`` and the workspace ``ws/`` of a benchmark whose children all finished (written by
``bench_benchmark_analyze.py``); ``BENCH`` is its id. The probe writes one JSON object to ``OUT.json``.

- ``service``: the imports (process start, the first line below, to after ``import data_designer.slurm.services``)
  and one ``services.analyze_benchmark(BENCH, profile=ROOT/profile.yaml, runner=fake, clock=fake.clock)`` are
  timed apart, in wall and in CPU seconds (the process's, which a loaded machine does not inflate as much). Between them, untimed and reported apart, the setup: a fresh ``runtime.testing.FakeSlurm`` told
  about every child's jobs by ``register_run_jobs`` (all ``COMPLETED`` an hour ago, so ``squeue`` no longer lists
  them and ``sacct`` does). The fake's calls made during the analysis are counted by tool.
- ``cli``: what the ``data-designer`` console script does (``data_designer.cli.main.main()``) for ``data-designer
  slurm benchmark analyze BENCH --no-refresh --format json --profile ROOT/profile.yaml`` plus any further
  arguments (``--plot FILE.png``), timed from the first line to its exit; its stdout is the command's. The CLI
  cannot be handed the fake, so it reads the observations the service probe recorded (``--no-refresh``: no
  Slurm call). ``sys.modules`` is taken right after the command, before the probe imports anything of its own.
"""

# No ``from __future__`` import and nothing before the clock: the process is timed from the first line.
import time

START = time.perf_counter()
START_CPU = time.process_time()

import sys  # noqa: E402  (after the clock on purpose)

HEAVY = ("matplotlib", "pandas", "numpy", "pyarrow")
SCHEDULER_TOOLS = ("squeue", "sacct")


def heavy_modules() -> list[str]:
    return sorted(name for name in HEAVY if name in sys.modules)


def service(root: str, bench: str) -> dict[str, object]:
    import data_designer.slurm.services

    imported = time.perf_counter()
    imported_cpu = time.process_time()
    heavy_at_import = heavy_modules()
    setup_start = time.perf_counter()
    from collections import Counter
    from pathlib import Path

    from data_designer.slurm.runtime.store import RunLayout
    from data_designer.slurm.runtime.testing import FakeSlurm, register_run_jobs

    workspace = Path(root) / "ws"
    fake = FakeSlurm()
    fake.advance(7200)  # "now" is two hours after the children's records: every attempt ended long ago
    jobs = 0
    for run_dir in sorted((workspace / "runs").iterdir()):
        jobs += len(register_run_jobs(fake, RunLayout.of(workspace, run_dir.name)))
    setup_s = time.perf_counter() - setup_start
    modules_before_call = set(sys.modules)
    calls_before = len(fake.calls)

    call_start, call_cpu = time.perf_counter(), time.process_time()
    result = data_designer.slurm.services.analyze_benchmark(
        bench, profile=Path(root) / "profile.yaml", runner=fake, clock=fake.clock, environ={}
    )
    call_s, call_cpu_s = time.perf_counter() - call_start, time.process_time() - call_cpu

    analysis = result.analysis
    states = Counter(child.state for child in analysis.children)
    return {
        "imports_s": imported - START,
        "setup_s": setup_s,
        "call_s": call_s,
        "imports_cpu_s": imported_cpu - START_CPU,
        "call_cpu_s": call_cpu_s,
        "jobs": jobs,
        "calls_seen": dict(Counter(argv[0] for argv in fake.calls[calls_before:] if argv)),
        "scheduler_calls_seen": sum(1 for argv in fake.calls[calls_before:] if argv and argv[0] in SCHEDULER_TOOLS),
        "scheduler_calls": result.scheduler_calls,
        "scheduler_error": result.scheduler_error,
        "evidence": result.evidence,
        "unknown_children": result.unknown_children,
        "complete": analysis.complete,
        "children": len(analysis.children),
        "states": dict(states),
        "measured": sum(1 for child in analysis.children if child.measured),
        "cases": len(analysis.cases),
        "ranked": sum(1 for case in analysis.cases if case.complete and case.feasible),
        "with_requests": sum(1 for case in analysis.cases if case.requests is not None and case.requests.sent),
        "evidence_digest": analysis.evidence_digest,
        "analysis_file": result.analysis_file,
        "heavy_at_import": heavy_at_import,
        "heavy": heavy_modules(),
        "modules_by_call": sorted(set(sys.modules) - modules_before_call),
    }


def cli(root: str, bench: str, extra: list[str]) -> dict[str, object]:
    argv = ["benchmark", "analyze", bench, "--no-refresh", "--format", "json", "--profile", f"{root}/profile.yaml"]
    sys.argv = ["data-designer", "slurm", *argv, *extra]
    code: object = 0
    try:
        from data_designer.cli.main import main

        main()
    except SystemExit as exc:
        code = exc.code
    finished = time.perf_counter()
    heavy = heavy_modules()
    sys.stdout.flush()
    return {
        "exit_code": code if isinstance(code, int) else (0 if code is None else 1),
        "wall_s": finished - START,
        "heavy": heavy,
        "modules": len(sys.modules),
    }


def main() -> None:
    out, root, bench, mode, *extra = sys.argv[1:]
    if mode == "service":
        record = service(root, bench)
    elif mode == "cli":
        record = cli(root, bench, extra)
    else:
        raise SystemExit(f"mode must be service or cli, not {mode!r}")
    import json

    with open(out, "w", encoding="utf-8") as handle:
        json.dump(record, handle)


if __name__ == "__main__":
    main()
