"""What the conformance suite needs from a cluster, and the fake cluster's implementation of it."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Protocol

from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.testing._fake_slurm import FakeSlurm


class ClusterHarness(Protocol):
    """A cluster the conformance suite can drive: the fake or a real one."""

    @property
    def runner(self) -> CommandRunner: ...

    @property
    def min_job_age_s(self) -> float:
        """How long a finished job stays in squeue (``MinJobAge``)."""
        ...

    @property
    def out_of_memory_state(self) -> str:
        """The task state an over-memory job ends in: ``out_of_memory`` with cgroups, else ``failed``."""
        ...

    @property
    def sbatch_args(self) -> tuple[str, ...]:
        """Arguments every test submission carries (e.g. where job output goes)."""
        ...

    def scheduler(self, runner: CommandRunner | None = None) -> SlurmScheduler:
        """A fresh adapter (as a new process would build it), on ``runner`` or the harness runner."""
        ...

    def now(self) -> datetime: ...

    def wait(self, seconds: float) -> None:
        """Let ``seconds`` pass (really, or on the fake's virtual clock)."""
        ...

    def unique_name(self, label: str) -> str:
        """A job name no other test (or earlier session) uses."""
        ...

    def fail_node(self, node: str) -> None:
        """Make ``node`` die (its slurmd stops answering)."""
        ...

    def restore_nodes(self) -> None:
        """Bring every failed node back."""
        ...


class FakeHarness:
    """The conformance harness over :class:`FakeSlurm`: instant, deterministic, virtual time."""

    def __init__(self, fake: FakeSlurm | None = None) -> None:
        self.fake = fake or FakeSlurm()
        self._names = itertools.count(1)

    @property
    def runner(self) -> CommandRunner:
        return self.fake

    @property
    def min_job_age_s(self) -> float:
        return self.fake.min_job_age_s

    @property
    def out_of_memory_state(self) -> str:
        return "out_of_memory"

    @property
    def sbatch_args(self) -> tuple[str, ...]:
        return ("--output=/dev/null",)

    def scheduler(self, runner: CommandRunner | None = None) -> SlurmScheduler:
        return SlurmScheduler(runner or self.fake, clock=self.fake.clock, sleep=self.fake.sleep)

    def now(self) -> datetime:
        return self.fake.clock()

    def wait(self, seconds: float) -> None:
        self.fake.advance(seconds)

    def unique_name(self, label: str) -> str:
        return f"ddconf-{label}-{next(self._names)}"

    def fail_node(self, node: str) -> None:
        self.fake.fail_node(node)

    def restore_nodes(self) -> None:
        self.fake.down_nodes.clear()
