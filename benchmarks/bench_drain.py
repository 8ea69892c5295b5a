"""How fast one shard stops on a signal, and how fast its client fails over from a dying replica (local Slurm cluster).

Every scenario is one shard submitted with the real ``data-designer slurm execute``: the supervisor, the real Data
Designer client worker (batches of 5 records, 2 requests in flight) and the in-tree test server, slowed to
``SERVER_LATENCY_S`` per request so that requests are in flight when something happens. Times compare wall clocks of
one host (every node of the local cluster is this machine).

* drain on the warning: once ``progress.json`` shows the first batch, ``scancel --batch --signal=USR1 <job>_0``
  signals the supervisor alone, as Slurm's time-limit warning does. Figures: the signal sent (just before
  ``scancel``) to ``status.json``'s ``finished_at`` (``time_limit``): signal to classified exit, end to end; the
  supervisor's own ``drain_s`` (signal received to the worker's exit); the worker's ``requested_at`` to
  ``published_at`` (``manifest.drained``). The worker lets in-flight requests finish and then waits for the routers
  to stay idle for its settle time (1 s) before it publishes, so the target is 5 s: the settle, a request and the
  publication with room to spare, and a sixth of the run's drain grace (30 s).
* drain on a termination: plain ``scancel <job>_0``, as a cancellation or a preemption ends a job: Slurm sends
  SIGTERM to every step (the servers too) and SIGKILL ``KillWait`` seconds later, so the worker publishes at once
  and ``status.json`` (``cancelled``) must land before the KILL. Target: the cluster's ``KillWait``.
* failover: the writer has two replicas; one crashes after ``CRASH_AFTER`` answered requests (``--crash-after
  --crash-claim``). Figures from the manifest's ``routing`` of the writer: the largest and the median ``failover_s``
  (from the failed exchange with the dying replica to the answer of another one: the replica's death to the next
  successful request through another replica; it includes one request's latency), the failovers, and the records
  of the shard, which must still succeed (anything else is raised). Target: at most 1 s.

Quick mode runs each scenario once; full mode repeats each (3 times) and prints the spread in the notes.
"""

from __future__ import annotations

import re
import secrets
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from benchmarks._cluster_run import execute, slurm_env, writer_run
from benchmarks._harness import SLURM_CLUSTER, Benchmark, Figure, RunContext, Target, format_number
from data_designer.slurm.contracts.records import (
    ATTEMPT_SCHEMA,
    MANIFEST_SCHEMA,
    PROGRESS_SCHEMA,
    STATUS_SCHEMA,
    AttemptRecord,
    OutputManifest,
    RecordSchema,
    StatusRecord,
)
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.testing import run_logs, wait_for_record
from data_designer.slurm.runtime.worker import DEFAULT_SETTLE_S

M = TypeVar("M", bound=BaseModel)

SERVER_LATENCY_S = 0.25
BATCH_SIZE = 5
DRAIN_RECORDS = 40
FAILOVER_RECORDS = 30
CRASH_AFTER = 8
WAIT_S = 300.0
DRAIN_GRACE_S = 30
WARNING_DRAIN = Target.at_most(5.0)
FAILOVER = Target.at_most(1.0)


def run_document(*, records: int, replicas: int, flags: Sequence[str], token: str) -> dict[str, Any]:
    """One shard; the writer alias served by ``replicas`` slowed test servers, its model named with ``token``."""
    return writer_run(
        name="bench-drain",
        records=records,
        shards=1,
        model=f"drain-{token}",
        replicas=replicas,
        server_flags=("--latency-s", str(SERVER_LATENCY_S), *flags),
        client={"batch_size": BATCH_SIZE, "concurrency": {"writer": 2}},
        submission={"drain_grace_s": DRAIN_GRACE_S},
    )


@dataclass
class Shard:
    """A one-shard run submitted through the CLI, and how to follow and signal it."""

    layout: RunLayout
    job_id: str
    runner: SubprocessRunner

    def record(self, path: Path, schema: RecordSchema[M], timeout_s: float = WAIT_S) -> M:
        """The record at ``path`` once it is valid; raises with the run's logs after ``timeout_s``."""
        return wait_for_record(path, schema, timeout_s=timeout_s, describe=self.diagnosis)

    def status(self) -> StatusRecord:
        return self.record(self.layout.status(0, 1), STATUS_SCHEMA)

    def manifest(self) -> OutputManifest:
        return self.record(self.layout.output_manifest(0, 1), MANIFEST_SCHEMA, timeout_s=10)

    def attempt(self) -> AttemptRecord:
        return self.record(self.layout.attempt_record(0, 1), ATTEMPT_SCHEMA, timeout_s=10)

    def wait_for_records(self, at_least: int) -> None:
        deadline = time.monotonic() + WAIT_S
        while True:
            found = read_record(self.layout.progress(0, 1), PROGRESS_SCHEMA)
            if isinstance(found, RecordOk) and found.payload.records_done >= at_least:
                return
            ended = isinstance(read_record(self.layout.status(0, 1), STATUS_SCHEMA), RecordOk)
            if ended or time.monotonic() > deadline:
                raise RuntimeError(f"the shard ended or stalled before {at_least} records\n{self.diagnosis()}")
            time.sleep(0.05)

    def signal(self, *argv: str) -> float:
        """Run ``scancel ARGV... <job>_0``; returns the wall time just before it ran."""
        sent = time.time()
        done = self.runner.run(["scancel", *argv, f"{self.job_id}_0"], timeout_s=60)
        if not done.ok:
            raise RuntimeError(f"scancel {' '.join(argv)} failed: {done.describe()}")
        return sent

    def diagnosis(self) -> str:
        return run_logs(self.layout)

    def end(self) -> None:
        """Cancel the job (nothing to do once it ended) and confirm that it ended."""
        SlurmScheduler(self.runner).cancel([self.job_id], confirm_timeout_s=60)


def submit(directory: Path, document: dict[str, Any]) -> Shard:
    result = execute(directory, document)
    layout = RunLayout.of(Path(result.run_dir).parent.parent, result.run_id)
    return Shard(layout, result.jobs[0].job_id, SubprocessRunner(overrides=slurm_env()))


def kill_wait_s(scheduler: SlurmScheduler) -> float:
    """The cluster's ``KillWait`` (SIGTERM to SIGKILL), e.g. ``2 sec`` in ``scontrol show config``."""
    value = scheduler.cluster_config().get("KillWait", "")
    found = re.fullmatch(r"(\d+)( sec)?", value.strip())
    if found is None:
        raise RuntimeError(f"cannot read KillWait from scontrol show config: {value!r}")
    return float(found.group(1))


@dataclass(frozen=True)
class DrainSample:
    """One drained shard: end to end, the supervisor's and the worker's view, what was published."""

    end_to_end_s: float
    supervisor_s: float
    worker_s: float
    delivery_s: float
    records: int
    settled: bool


def drain(directory: Path, *, terminate: bool) -> DrainSample:
    """One shard signalled after its first batch: the warning (USR1 to the batch step) or a plain ``scancel``."""
    token = secrets.token_hex(3)
    shard = submit(directory, run_document(records=DRAIN_RECORDS, replicas=1, flags=(), token=token))
    try:
        shard.wait_for_records(BATCH_SIZE)
        sent = shard.signal() if terminate else shard.signal("--batch", "--signal=USR1")
        status = shard.status()
        expected = "cancelled" if terminate else "time_limit"
        if status.status != expected or status.drain_s is None:
            raise RuntimeError(f"expected a drained {expected!r} ending, got {status}\n{shard.diagnosis()}")
        drained = shard.manifest().drained
        if drained is None:
            raise RuntimeError(f"the manifest of a drained attempt has no 'drained'\n{shard.diagnosis()}")
        return DrainSample(
            end_to_end_s=status.finished_at.timestamp() - sent,
            supervisor_s=status.drain_s,
            worker_s=(drained.published_at - drained.requested_at).total_seconds(),
            delivery_s=drained.requested_at.timestamp() - sent,
            records=status.records or 0,
            settled=drained.settled,
        )
    finally:
        shard.end()


@dataclass(frozen=True)
class FailoverSample:
    """One shard whose writer lost a replica: the router's failover times and the shard's result."""

    failover_s: tuple[float, ...]
    failovers: int
    records: int
    crashed: tuple[int, ...]


def failover(directory: Path) -> FailoverSample:
    """One shard, writer with two replicas, the one that claims the crash file first dies after CRASH_AFTER."""
    token = secrets.token_hex(3)
    flags = ("--crash-after", str(CRASH_AFTER), "--crash-claim", str(directory.parent / f"{directory.name}.claim"))
    shard = submit(directory, run_document(records=FAILOVER_RECORDS, replicas=2, flags=flags, token=token))
    try:
        status = shard.status()
        if status.status != "succeeded":
            raise RuntimeError(f"the shard did not survive the replica's death: {status}\n{shard.diagnosis()}")
        manifest = shard.manifest()
        routing = manifest.models["writer"].routing
        if routing is None or not routing.failover_s or routing.unrouted:
            raise RuntimeError(f"no failover was measured (or requests went unrouted): {routing}\n{shard.diagnosis()}")
        crashed = tuple(r.exit_code for r in shard.attempt().replicas if r.exit_code is not None)
        return FailoverSample(routing.failover_s, routing.failovers, manifest.records, crashed)
    finally:
        shard.end()


def spread(values: Sequence[float], unit: str = "s") -> str:
    return ", ".join(format_number(v) for v in values) + f" {unit}"


def drain_figures(label: str, samples: list[DrainSample], target: Target, note: str) -> list[Figure]:
    runs = f"{len(samples)} run(s)"
    published = ", ".join(str(s.records) for s in samples)
    return [
        Figure(
            f"{label}: signal to classified exit",
            statistics.median(s.end_to_end_s for s in samples),
            "s",
            target,
            note=f"median of {runs}: {spread([s.end_to_end_s for s in samples])}; {note}; records published: "
            f"{published} of {DRAIN_RECORDS}; settled: {', '.join(str(s.settled) for s in samples)}",
        ),
        Figure(
            f"{label}: supervisor drain_s",
            statistics.median(s.supervisor_s for s in samples),
            "s",
            note=f"signal received to the worker's exit; {runs}: {spread([s.supervisor_s for s in samples])}",
        ),
        Figure(
            f"{label}: worker requested to published",
            statistics.median(s.worker_s for s in samples),
            "s",
            note=f"manifest.drained; {runs}: {spread([s.worker_s for s in samples])}; signal sent to the worker's "
            f"request: {spread([s.delivery_s for s in samples])}",
        ),
    ]


def failover_figures(samples: list[FailoverSample]) -> list[Figure]:
    times = [t for s in samples for t in s.failover_s]
    runs = f"{len(samples)} run(s)"
    return [
        Figure(
            "failover: max failover_s",
            max(times),
            "s",
            FAILOVER,
            note=f"largest per run: {spread([max(s.failover_s) for s in samples])}; one request is "
            f"{SERVER_LATENCY_S}s of server latency",
        ),
        Figure(
            "failover: median failover_s",
            statistics.median(times),
            "s",
            note=f"over {len(times)} failed-over request(s) of {runs}",
        ),
        Figure(
            "failover: failovers",
            statistics.median(s.failovers for s in samples),
            "requests",
            note=f"median of {runs}: {spread([s.failovers for s in samples], 'requests')}; crash after {CRASH_AFTER} "
            f"answers; crashed replicas' exit codes: {[list(s.crashed) for s in samples]}",
        ),
        Figure(
            "failover: records of the succeeded shard",
            min(s.records for s in samples),
            "records",
            Target.at_least(FAILOVER_RECORDS),
            note=f"status succeeded in every run; fewest records of {runs}",
        ),
    ]


def run(ctx: RunContext) -> list[Figure]:
    repeats = ctx.repeats(quick=1, full=3)
    kill_wait = kill_wait_s(SlurmScheduler(SubprocessRunner(overrides=slurm_env())))
    warning = [drain(ctx.scratch / f"usr1-{i}", terminate=False) for i in range(repeats)]
    terminated = [drain(ctx.scratch / f"term-{i}", terminate=True) for i in range(repeats)]
    failed_over = [failover(ctx.scratch / f"failover-{i}") for i in range(repeats)]
    usr1_note = (
        f"scancel --batch --signal=USR1 (the warning, to the supervisor only); the worker settles "
        f"{format_number(DEFAULT_SETTLE_S)}s idle before publishing; drain grace {DRAIN_GRACE_S}s"
    )
    term_note = (
        f"plain scancel: SIGTERM to every step, SIGKILL after KillWait ({format_number(kill_wait)}s); the worker "
        "publishes at once (not settled)"
    )
    return [
        *drain_figures("drain (USR1 warning)", warning, WARNING_DRAIN, usr1_note),
        *drain_figures("drain (scancel TERM)", terminated, Target.at_most(kill_wait), term_note),
        *failover_figures(failed_over),
    ]


BENCHMARK = Benchmark(
    summary="drain time (signal to classified exit) and failover time from a dying replica, on the local Slurm cluster",
    run=run,
    requires=(SLURM_CLUSTER,),
)
