"""Scheduler adapter on the real local Slurm cluster: observation cost, submission cost, harness start-up.

Figures (issue 3, "Done when"):

1. **Observation**: calls and wall time of ONE :meth:`SlurmScheduler.observe` (through a
   :class:`CountingRunner` over the real :class:`SubprocessRunner`) of 10, 100 and 1,000 array tasks
   (quick: 10 and 100). Target: 2 calls each, whatever the number of tasks or chunks. The tasks are
   submitted **held** (``--hold``, a ``true`` script), chunked by the cluster's own ``MaxArraySize``
   (11 on the local cluster: 1,000 tasks are 91 chunks), so nothing runs; every task must be seen.
2. **Submission**: calls and wall time of :meth:`SlurmScheduler.submit` (one ``squeue`` and one
   ``sacct`` to find chunks already accepted, then one ``sbatch`` per chunk). The issue's figure is
   10,000 shards with ``MaxArraySize`` 1001 (10 chunks). Full mode submits that to the real cluster
   only when its ``MaxArraySize`` is at least 1001 (``DDSLURM_MAX_ARRAY_SIZE=1001`` at a fresh
   ``scripts/local-slurm up``); otherwise it measures it against the FAKE Slurm
   (``runtime.testing.FakeSlurm(max_array_size=1001)``), labelled ``[FAKE Slurm]``, and the real
   figures are the submissions of part 1 at the cluster's own ``MaxArraySize``. Quick mode: the
   real 100-shard submission only.
3. **Harness start-up**: the cluster is never stopped here (other sessions share it). Printed: the
   time of ``up`` on the running cluster (the idempotent reuse path, not a from-nothing figure);
   the last start ``up`` recorded in ``$DDSLURM_STATE_DIR/last-up.env``, if it records one (read,
   not measured); and, in full mode with ``DDSLURM_BENCH_HARNESS=1`` while the cluster is stopped
   (after a plain ``down``: ``SLURM_CONF`` must still name a file), an ``up`` timed here. Target
   for a start from nothing, package install included: under 60 s. A true from-nothing figure is
   ``scripts/local-slurm down --purge; time scripts/local-slurm up`` on a machine no one else uses
   (or the first ``up`` of ``.ci/run``, which also installs the packages).

Everything submitted is cancelled in a ``finally`` (found again by job name if a submission broke
half-way). The benchmark holds ``$DDSLURM_STATE_DIR/pytest-cluster.lock`` (the cluster test
session's lock) while it submits, so it neither disturbs nor is disturbed by a test session.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import statistics
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks._harness import SLURM_CLUSTER, Benchmark, Figure, RunContext, Target, cluster_lock
from data_designer.slurm.contracts import (
    ArrayTaskBinding,
    SubmissionChunk,
    SubmissionResult,
    SubmissionUnit,
)
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.testing import CountingRunner, FakeSlurm

_REPO = Path(__file__).resolve().parent.parent
_LOCAL_SLURM = _REPO / "scripts" / "local-slurm"
_SCRIPT = "#!/bin/bash\ntrue\n"
_HELD_ARGS = ("--hold", "--output=/dev/null", "--error=/dev/null", "--time=1", "--ntasks=1")
_OBSERVE_CALLS_TARGET = 2
_ISSUE_SHARDS = 10_000
_ISSUE_MAX_ARRAY_SIZE = 1001
_FROM_NOTHING_TARGET_S = 60.0
_UP_TIMEOUT_S = 600.0
_HARNESS_ENV = "DDSLURM_BENCH_HARNESS"
_RECORD_FILE = "last-up.env"
_READY_RE = re.compile(r"ready in ([0-9.]+)s(?: \(plus ([0-9.]+)s package install; ([0-9.]+)s in all\))?")


def held_unit(tasks: int, *, max_array_size: int, prefix: str) -> SubmissionUnit:
    """``tasks`` first attempts of a ``true`` script, held, in chunks of at most ``max_array_size`` tasks."""
    chunks: list[SubmissionChunk] = []
    for number, offset in enumerate(range(0, tasks, max_array_size)):
        count = min(max_array_size, tasks - offset)
        chunks.append(
            SubmissionChunk(
                job_name=f"{prefix}-c{number}",
                chunk=number,
                array_spec=f"0-{count - 1}",
                index_offset=offset,
                tasks=tuple(ArrayTaskBinding(index=i, shard=offset + i, attempt=1) for i in range(count)),
            )
        )
    return SubmissionUnit(script=_SCRIPT, sbatch_args=_HELD_ARGS, chunks=tuple(chunks))


@dataclass(frozen=True)
class _Submitted:
    result: SubmissionResult
    seconds: float
    calls: int
    sbatch_calls: int


def _submit(scheduler: SlurmScheduler, runner: CountingRunner, unit: SubmissionUnit, since: datetime) -> _Submitted:
    """Submit ``unit`` through ``scheduler`` (built on ``runner``), counting the calls it makes."""
    before, sbatch_before = len(runner.calls), runner.count("sbatch")
    start = time.perf_counter()
    result = scheduler.submit(unit, since=since)
    seconds = time.perf_counter() - start
    return _Submitted(result, seconds, len(runner.calls) - before, runner.count("sbatch") - sbatch_before)


def _figure_label(tasks: int) -> str:
    return f"{tasks:,} task{'s' if tasks != 1 else ''}"


class _Cleanup:
    """Every job name this benchmark submitted; cancels all of them, found again by name."""

    def __init__(self, runner: CountingRunner) -> None:
        self.runner = runner
        self.names: list[str] = []
        self.since = datetime.now(UTC) - timedelta(minutes=5)

    def track(self, unit: SubmissionUnit) -> None:
        self.names += [chunk.job_name for chunk in unit.chunks]

    def cancel_all(self) -> str:
        if not self.names:
            return "nothing submitted"
        scheduler = SlurmScheduler(self.runner)
        found = scheduler.find_submitted(self.names, since=self.since)
        ids = sorted({chunk.job_id for chunk in found.values()}, key=int)
        start = time.perf_counter()
        observation = scheduler.cancel(ids, confirm_timeout_s=60.0)
        cancelled = sum(1 for t in observation.tasks if t.state == "cancelled")
        return (
            f"cancelled {len(ids)} job(s) ({cancelled} task(s) confirmed cancelled) "
            f"in {time.perf_counter() - start:.1f}s"
        )


def _observation_figures(
    runner: CountingRunner, cleanup: _Cleanup, *, tasks: int, max_array_size: int, repeats: int, token: str
) -> tuple[list[Figure], _Submitted]:
    unit = held_unit(tasks, max_array_size=max_array_size, prefix=f"ddbench-{token}-obs{tasks}")
    cleanup.track(unit)
    scheduler = SlurmScheduler(runner)
    submitted = _submit(scheduler, runner, unit, cleanup.since)
    ids = [chunk.job_id for chunk in submitted.result.chunks]
    samples: list[float] = []
    calls: list[int] = []
    seen: list[int] = []
    observation = scheduler.observe(ids)  # warm-up: the first call after submit may still see sacct lag
    for _ in range(max(1, repeats)):
        before = len(runner.calls)
        start = time.perf_counter()
        observation = scheduler.observe(ids)
        samples.append(time.perf_counter() - start)
        calls.append(len(runner.calls) - before)
        seen.append(len(observation.tasks))
        if len(observation.tasks) != tasks:
            states = sorted({t.raw_state for t in observation.tasks})
            raise RuntimeError(
                f"one observation of {tasks} held tasks in {len(ids)} jobs saw {len(observation.tasks)} "
                f"(states {states}; squeue {observation.squeue.status}, sacct {observation.sacct.status})"
            )
    pending = sum(1 for t in observation.tasks if t.state == "pending")
    label = _figure_label(tasks)
    chunks = len(unit.chunks)
    detail = (
        f"{chunks} held array job(s) (MaxArraySize {max_array_size}); every observation saw all {tasks} tasks "
        f"({pending} pending; sacct still behind squeue in the last: {observation.accounting_lag}); "
        f"median of {len(samples)}, "
        f"min {min(samples) * 1000:.0f} ms, max {max(samples) * 1000:.0f} ms"
    )
    figures = [
        Figure(f"observe {label}: calls", max(calls), "calls", Target.at_most(_OBSERVE_CALLS_TARGET)),
        Figure(f"observe {label}: time", statistics.median(samples) * 1000, "ms", note=detail),
    ]
    return figures, submitted


def _submission_figures(name: str, submitted: _Submitted, *, chunks: int, note: str) -> list[Figure]:
    return [
        Figure(f"{name}: calls", submitted.calls, "calls", Target.at_most(chunks + 2)),
        Figure(
            f"{name}: time",
            submitted.seconds,
            "s",
            note=f"{note}; {chunks} chunk(s): {submitted.sbatch_calls} sbatch + "
            f"{submitted.calls - submitted.sbatch_calls} lookup call(s) (squeue + sacct by job name); "
            f"{submitted.seconds / max(1, submitted.sbatch_calls) * 1000:.0f} ms per sbatch",
        ),
    ]


def _fake_issue_submission() -> list[Figure]:
    fake = FakeSlurm(max_array_size=_ISSUE_MAX_ARRAY_SIZE)
    runner = CountingRunner(fake)
    unit = held_unit(_ISSUE_SHARDS, max_array_size=_ISSUE_MAX_ARRAY_SIZE, prefix="ddbench-fake")
    submitted = _submit(SlurmScheduler(runner, clock=fake.clock), runner, unit, fake.clock())
    if submitted.result.submitted != len(unit.chunks):
        raise RuntimeError(f"the fake accepted {submitted.result.submitted} of {len(unit.chunks)} chunks")
    return _submission_figures(
        f"submit {_ISSUE_SHARDS:,} shards @MaxArraySize {_ISSUE_MAX_ARRAY_SIZE} [FAKE Slurm]",
        submitted,
        chunks=len(unit.chunks),
        note="measured against runtime.testing.FakeSlurm(max_array_size=1001), NOT the real cluster (its "
        "MaxArraySize is smaller): the calls are what the real cluster would get, the time is adapter + fake only",
    )


# -- harness start-up -----------------------------------------------------------------------------


def _parse_record(text: str) -> dict[str, str]:
    record: dict[str, str] = {}
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            key, _, value = words[1].partition("=")
            record[key] = value
    return record


def _run_up() -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([str(_LOCAL_SLURM), "up"], capture_output=True, text=True, timeout=_UP_TIMEOUT_S, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"scripts/local-slurm up exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return seconds, done.stderr


def _cluster_running() -> bool:
    done = subprocess.run([str(_LOCAL_SLURM), "status"], capture_output=True, text=True, timeout=60, check=False)
    return done.returncode == 0


def _recorded_figure(record_path: Path) -> Figure | None:
    """The last start ``up`` recorded in the state dir (``export DDSLURM_UP_*=...`` lines), if any."""
    if not record_path.is_file():
        return None
    record = _parse_record(record_path.read_text(encoding="utf-8"))
    total = record.get("DDSLURM_UP_TOTAL_S")
    if not total:
        return None
    kind = record.get("DDSLURM_UP_KIND", "?")
    install = record.get("DDSLURM_UP_INSTALL_S", "")
    return Figure(
        f"harness up-to-ready, last {kind} start (recorded by up)",
        float(total),
        "s",
        Target.at_most(_FROM_NOTHING_TARGET_S) if kind == "fresh" else None,
        note=f"read from {record_path}, NOT measured now (start at {record.get('DDSLURM_UP_AT', '?')}): ready "
        f"{record.get('DDSLURM_UP_READY_S', '?')}s after the package step, "
        + (f"package install {install}s" if install else "no package install (packages were already there)"),
    )


def _harness_figures(ctx: RunContext, state_dir: str | None) -> list[Figure]:
    if not state_dir or not _LOCAL_SLURM.is_file() or os.geteuid() != 0:
        return []
    figures: list[Figure] = []
    asked = not ctx.quick and os.environ.get(_HARNESS_ENV) == "1"
    measured_fresh = asked and not _cluster_running()
    if measured_fresh:
        seconds, stderr = _run_up()
        match = _READY_RE.search(stderr)
        printed = f"; up printed: {match.group(0)}" if match else ""
        with_install = bool(match and match.group(2))
        figures.append(
            Figure(
                "harness up-to-ready from a stopped cluster (measured now)",
                seconds,
                "s",
                Target.at_most(_FROM_NOTHING_TARGET_S),
                note=f"`scripts/local-slurm up` timed here after a `down` (state kept), "
                f"{'with' if with_install else 'WITHOUT'} the package install{printed}",
            )
        )
    record_path = Path(state_dir) / _RECORD_FILE
    recorded = _recorded_figure(record_path)
    if recorded is not None:
        figures.append(recorded)
    seconds, _ = _run_up()
    notes = [
        "NOT a from-nothing figure: `scripts/local-slurm up` on the running cluster, the path every test session takes"
    ]
    if recorded is None:
        notes.append(f"no start time on record ({record_path} is absent: scripts/local-slurm does not write it yet)")
    if asked and not measured_fresh:
        notes.append(f"{_HARNESS_ENV}=1 but the cluster is running: not stopped here (other sessions share it)")
    notes.append(
        "from nothing, on a machine no one else uses: `scripts/local-slurm down --purge; time scripts/local-slurm up` "
        "(its stderr says 'ready in Xs (plus Ys package install; Zs in all)'; CI's first `up` in .ci/run includes "
        f"the install); after a plain `down` (state kept), {_HARNESS_ENV}=1 in full mode times the restart here"
    )
    figures.append(Figure("harness up, cluster already running (reuse check)", seconds, "s", note="; ".join(notes)))
    return figures


# -- the benchmark --------------------------------------------------------------------------------


def run(ctx: RunContext) -> list[Figure]:
    state_dir = os.environ.get("DDSLURM_STATE_DIR")
    figures = _harness_figures(ctx, state_dir)
    runner = CountingRunner(SubprocessRunner())
    max_array_size = int(SlurmScheduler(runner).cluster_config()["MaxArraySize"])
    token = secrets.token_hex(3)
    sizes: Sequence[int] = (10, 100) if ctx.quick else (10, 100, 1000)
    repeats = ctx.repeats(quick=3, full=7)
    cleanup = _Cleanup(runner)
    submissions: dict[int, _Submitted] = {}
    cleaned = ""
    with cluster_lock(state_dir) as locked:
        try:
            for tasks in sizes:
                observed, submissions[tasks] = _observation_figures(
                    runner, cleanup, tasks=tasks, max_array_size=max_array_size, repeats=repeats, token=token
                )
                figures += observed
            real_sizes = (100,) if ctx.quick else (100, 1000)
            for tasks in real_sizes:
                submitted = submissions[tasks]
                figures += _submission_figures(
                    f"submit {tasks:,} shards @MaxArraySize {max_array_size} (real cluster)",
                    submitted,
                    chunks=len(submitted.result.chunks),
                    note=f"real cluster, held jobs; {locked}",
                )
            if not ctx.quick:
                if max_array_size >= _ISSUE_MAX_ARRAY_SIZE:
                    unit = held_unit(
                        _ISSUE_SHARDS, max_array_size=_ISSUE_MAX_ARRAY_SIZE, prefix=f"ddbench-{token}-sub10k"
                    )
                    cleanup.track(unit)
                    figures += _submission_figures(
                        f"submit {_ISSUE_SHARDS:,} shards @MaxArraySize {_ISSUE_MAX_ARRAY_SIZE} (real cluster)",
                        _submit(SlurmScheduler(runner), runner, unit, cleanup.since),
                        chunks=len(unit.chunks),
                        note=f"real cluster (its MaxArraySize is {max_array_size}), held jobs",
                    )
                else:
                    figures += _fake_issue_submission()
        finally:
            cleaned = cleanup.cancel_all()
    figures.append(
        Figure(
            "Slurm calls in all",
            len(runner.calls),
            "calls",
            note=f"every call of the run through the CountingRunner, cleanup included; {cleaned}",
        )
    )
    return figures


BENCHMARK = Benchmark(
    summary="scheduler adapter on the local Slurm cluster: observe 10..1,000 held tasks, submit, harness up",
    run=run,
    requires=(SLURM_CLUSTER,),
)
