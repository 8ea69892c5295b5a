"""What every service call stands on: its resolved context, counted scheduler calls, cluster facts, claim liveness,
and the one classification of a run with an observation (``classify_observed``)."""

from data_designer.slurm.services.context._calls import CountingRunner
from data_designer.slurm.services.context._context import (
    SelectedCluster,
    ServiceContext,
    classify_observed,
    collector_paused,
)
from data_designer.slurm.services.context._facts import DEFAULT_MAX_ARRAY_SIZE, cluster_facts, refuse_misfit
from data_designer.slurm.services.context._liveness import Alive, default_alive

__all__ = [
    "DEFAULT_MAX_ARRAY_SIZE",
    "Alive",
    "CountingRunner",
    "SelectedCluster",
    "ServiceContext",
    "classify_observed",
    "cluster_facts",
    "collector_paused",
    "default_alive",
    "refuse_misfit",
]
