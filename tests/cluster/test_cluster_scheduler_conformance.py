"""The scheduler conformance suite against the real local Slurm cluster (scripts/local-slurm)."""

from __future__ import annotations

import pytest

from data_designer.slurm.runtime.testing import ClusterHarness
from data_designer.slurm.runtime.testing.conformance import SchedulerConformance

pytestmark = pytest.mark.cluster


class TestLocalSlurmConformance(SchedulerConformance):
    @pytest.fixture
    def harness(self, cluster_harness: ClusterHarness) -> ClusterHarness:
        return cluster_harness
