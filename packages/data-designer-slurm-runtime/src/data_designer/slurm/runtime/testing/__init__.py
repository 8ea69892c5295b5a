"""Test doubles for the scheduler adapter: a stateful fake Slurm, runner wrappers and harnesses.

:class:`FakeSlurm` is a :class:`~data_designer.slurm.runtime.CommandRunner` that emulates the
Slurm CLIs' outputs, so :class:`~data_designer.slurm.runtime.SlurmScheduler` and its parsers run
unchanged against it. The conformance suite that runs against both the fake and a real cluster
lives in :mod:`data_designer.slurm.runtime.testing.conformance` (it needs pytest).
"""

from data_designer.slurm.runtime.testing._fake_slurm import FailureMode, FakeSlurm
from data_designer.slurm.runtime.testing._fake_state import Behaviour, FakeCluster
from data_designer.slurm.runtime.testing._harness import ClusterHarness, FakeHarness
from data_designer.slurm.runtime.testing._runners import CountingRunner, OutageRunner, ReplyLosingRunner

__all__ = [
    "Behaviour",
    "ClusterHarness",
    "CountingRunner",
    "FailureMode",
    "FakeCluster",
    "FakeHarness",
    "FakeSlurm",
    "OutageRunner",
    "ReplyLosingRunner",
]
