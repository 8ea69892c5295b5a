"""How a run stands: one batched observation (``observe_run``) and the pure classification (``classify``).

The rules are the table in ``docs/architecture/status.md``.
"""

from data_designer.slurm.runtime.status._classify import DEFAULT_GRACE_S, DEFAULT_STALE_BEATS, Rules, classify
from data_designer.slurm.runtime.status._merge_state import merge_status
from data_designer.slurm.runtime.status._observe import (
    OBSERVE_TIMEOUT_S,
    SINCE_SLACK,
    RunObservation,
    cached_observation,
    observe_run,
    observe_runs,
)

__all__ = [
    "DEFAULT_GRACE_S",
    "DEFAULT_STALE_BEATS",
    "OBSERVE_TIMEOUT_S",
    "SINCE_SLACK",
    "Rules",
    "RunObservation",
    "cached_observation",
    "classify",
    "merge_status",
    "observe_run",
    "observe_runs",
]
