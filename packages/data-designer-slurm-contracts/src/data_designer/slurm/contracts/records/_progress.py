"""``progress.json``: how far the client worker of one attempt is (one writer; replaced after every batch)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._schema import RecordSchema

WorkerState = Literal["starting", "generating", "draining", "writing", "succeeded", "partial", "failed"]
WorkerFailure = Literal["invalid_config", "client_error"]


class WorkerError(BaseModel):
    model_config = FROZEN

    kind: WorkerFailure
    message: str


class WorkerProgress(BaseModel):
    """How far the worker of one attempt is (replaced as it advances; ``written_at`` of the envelope dates it)."""

    model_config = FROZEN

    shard: NonNegativeInt
    attempt: PositiveInt
    state: WorkerState
    records_total: NonNegativeInt
    records_done: NonNegativeInt = Field(description="Records in batches the host has written so far.")
    error: WorkerError | None = None


PROGRESS_SCHEMA: RecordSchema[WorkerProgress] = RecordSchema("progress", 1, WorkerProgress)
