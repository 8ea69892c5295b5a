"""The state and virtual clock of the fake Slurm cluster (no I/O, no real time).

Jobs move on only when :meth:`FakeCluster.advance` is called: pending tasks start after
``pending_s`` (respecting an array's ``%N`` throttle), run for ``run_s`` and end as the
script's ``# fake-slurm:`` directives say. Finished jobs leave the queue after ``min_job_age_s``
and accounting shows an ``allocation`` placeholder for ``accounting_lag_s`` after submission,
as Slurm 22.05 does.

Directives are comment lines in the batch script, ignored by a real Slurm::

    # fake-slurm: run=5 exit=3            runs 5 s, then FAILED with exit code 3
    # fake-slurm: state=OUT_OF_MEMORY     ends OUT_OF_MEMORY (exit 0:125)
    # fake-slurm: pending=2               waits 2 s before starting
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

BASE_TIME = datetime(2026, 1, 1, tzinfo=UTC)
TERMINAL = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED by 0", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL"}
)
_DIRECTIVE_RE = re.compile(r"^#\s*fake-slurm:(.*)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Behaviour:
    """What a fake job's tasks do, read from its script's directives."""

    pending_s: float = 1.0
    run_s: float = 2.0
    exit_code: int = 0
    final_state: str | None = None

    @classmethod
    def from_script(cls, script: str) -> Behaviour:
        values: dict[str, str] = {}
        for body in _DIRECTIVE_RE.findall(script):
            for item in body.split():
                key, _, value = item.partition("=")
                values[key] = value
        return cls(
            pending_s=float(values.get("pending", "1")),
            run_s=float(values.get("run", "2")),
            exit_code=int(values.get("exit", "0")),
            final_state=values.get("state"),
        )


@dataclass(slots=True)
class Incarnation:
    """One run of a task that ended (kept for ``sacct -D``)."""

    state: str
    exit_code: int
    signal: int
    node: str | None
    start: float | None
    end: float


@dataclass(slots=True)
class FakeTask:
    index: int | None
    state: str = "PENDING"
    reason: str = "None"
    exit_code: int = 0
    signal: int = 0
    node: str | None = None
    eligible: float = 0.0
    start: float | None = None
    end: float | None = None
    history: list[Incarnation] = field(default_factory=list)


@dataclass(slots=True)
class FakeJob:
    job_id: int
    name: str
    script: str
    behaviour: Behaviour
    submit: float
    time_limit_s: float | None
    requeue: bool
    throttle: int | None
    tasks: dict[int | None, FakeTask]
    left_queue: bool = False
    after: tuple[int, ...] = ()
    """``--dependency=afterany:<job id>[:<job id>...]``: no task starts before those jobs have ended."""

    @property
    def is_array(self) -> bool:
        return None not in self.tasks

    def finished_at(self) -> float | None:
        ends = [t.end for t in self.tasks.values()]
        if any(t.state not in TERMINAL for t in self.tasks.values()) or None in ends:
            return None
        return max(e for e in ends if e is not None)


class FakeCluster:
    """Jobs, nodes and a virtual clock; the CLI emulation in :mod:`._fake_slurm` reads and changes it."""

    def __init__(
        self,
        *,
        first_job_id: int = 1000,
        nodes: int = 4,
        min_job_age_s: float = 10.0,
        accounting_lag_s: float = 2.0,
        requeue_delay_s: float = 2.0,
        max_array_size: int = 11,
    ) -> None:
        self.now = 0.0
        self.jobs: dict[int, FakeJob] = {}
        self.nodes = tuple(f"node{k}" for k in range(1, nodes + 1))
        self.down_nodes: set[str] = set()
        self.min_job_age_s = min_job_age_s
        self.accounting_lag_s = accounting_lag_s
        self.requeue_delay_s = requeue_delay_s
        self.max_array_size = max_array_size
        self._next_id = first_job_id
        self._placements = 0

    def clock(self) -> datetime:
        return BASE_TIME + timedelta(seconds=self.now)

    def format_time(self, seconds: float | None) -> str:
        if seconds is None:
            return "Unknown"
        return (BASE_TIME + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")

    def parse_time(self, text: str) -> float:
        moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
        return (moment - BASE_TIME).total_seconds()

    def add_job(
        self,
        *,
        name: str,
        script: str,
        indices: tuple[int, ...] | None,
        throttle: int | None,
        time_limit_s: float | None,
        requeue: bool,
    ) -> FakeJob:
        behaviour = Behaviour.from_script(script)
        job_id = self._next_id
        self._next_id += 1
        keys: tuple[int | None, ...] = (None,) if indices is None else indices
        tasks = {k: FakeTask(index=k, eligible=self.now + behaviour.pending_s) for k in keys}
        job = FakeJob(job_id, name, script, behaviour, self.now, time_limit_s, requeue, throttle, tasks)
        self.jobs[job_id] = job
        return job

    def advance(self, seconds: float) -> None:
        """Move the virtual clock on in one-second steps, starting and ending tasks on the way."""
        target = self.now + seconds
        while self.now < target:
            self.now = min(target, self.now + 1.0)
            self._step()

    def _step(self) -> None:
        for job in self.jobs.values():
            running = sum(1 for t in job.tasks.values() if t.state == "RUNNING")
            for task in job.tasks.values():
                if task.state == "RUNNING":
                    self._maybe_finish(job, task)
                elif task.state == "PENDING" and self.now >= task.eligible:
                    blockers = [self.jobs[after] for after in job.after if after in self.jobs]
                    if any(blocker.finished_at() is None for blocker in blockers):
                        task.reason = "Dependency"
                        continue
                    if job.throttle is not None and running >= job.throttle:
                        task.reason = "JobArrayTaskLimit"
                        continue
                    self._start(task)
                    running += 1
            done = job.finished_at()
            if done is not None and self.now - done >= self.min_job_age_s:
                job.left_queue = True

    def _start(self, task: FakeTask) -> None:
        up = [n for n in self.nodes if n not in self.down_nodes] or list(self.nodes)
        task.node = up[self._placements % len(up)]
        self._placements += 1
        task.state, task.reason, task.start, task.end = "RUNNING", "None", self.now, None

    def _maybe_finish(self, job: FakeJob, task: FakeTask) -> None:
        assert task.start is not None  # a running task has started
        elapsed = self.now - task.start
        limit = job.time_limit_s
        if limit is not None and elapsed >= limit and limit < job.behaviour.run_s:
            self.finish(task, "TIMEOUT", 0, 0)
        elif elapsed >= job.behaviour.run_s:
            behaviour = job.behaviour
            if behaviour.final_state is not None:
                signal = 125 if behaviour.final_state == "OUT_OF_MEMORY" else 0
                self.finish(task, behaviour.final_state, behaviour.exit_code, signal)
            else:
                self.finish(task, "COMPLETED" if behaviour.exit_code == 0 else "FAILED", behaviour.exit_code, 0)

    def finish(self, task: FakeTask, state: str, exit_code: int, signal: int) -> None:
        task.state, task.exit_code, task.signal, task.end = state, exit_code, signal, self.now
        task.reason = "NonZeroExitCode" if state == "FAILED" else "None"

    def requeue_task(self, task: FakeTask, closing_state: str) -> None:
        """End the current incarnation as ``closing_state`` and queue the task again."""
        task.history.append(Incarnation(closing_state, 0, 0, task.node, task.start, self.now))
        task.state, task.reason, task.node, task.start, task.end = "PENDING", "BeginTime", None, None, None
        task.eligible = self.now + self.requeue_delay_s

    def fail_node(self, node: str) -> None:
        """A node dies: its running tasks end NODE_FAIL (and are requeued unless submitted with --no-requeue)."""
        self.down_nodes.add(node)
        for job in self.jobs.values():
            for task in job.tasks.values():
                if task.state == "RUNNING" and task.node == node:
                    if job.requeue:
                        self.requeue_task(task, "NODE_FAIL")
                    else:
                        self.finish(task, "NODE_FAIL", 0, 0)
