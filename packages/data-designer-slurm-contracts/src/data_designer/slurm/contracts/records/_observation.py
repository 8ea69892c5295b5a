"""``observations/NNNN.json``: every scheduler observation of a run, appended (many writers, never replaced).

``status``, ``wait`` and later commands append what they saw (time, per-source health, the evidence), so a
later process that cannot reach the scheduler shows the last known state with its age.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from data_designer.slurm.contracts._scheduler import Observation
from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._schema import RecordSchema


class ObservationRecord(BaseModel):
    """One batched observation of every job of a run."""

    model_config = FROZEN

    job_ids: tuple[str, ...] = Field(strict=False, description="The jobs asked about (every submission's job ids).")
    observation: Observation


OBSERVATION_SCHEMA: RecordSchema[ObservationRecord] = RecordSchema("observation", 1, ObservationRecord)
