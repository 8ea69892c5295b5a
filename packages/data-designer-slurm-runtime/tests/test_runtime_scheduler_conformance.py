"""The scheduler conformance suite against the fake Slurm (the same suite runs on the real cluster in tests/cluster)."""

from __future__ import annotations

import pytest

from data_designer.slurm.runtime.testing import ClusterHarness, FakeHarness
from data_designer.slurm.runtime.testing.conformance import SchedulerConformance


class TestFakeSlurmConformance(SchedulerConformance):
    @pytest.fixture
    def harness(self) -> ClusterHarness:
        return FakeHarness()
