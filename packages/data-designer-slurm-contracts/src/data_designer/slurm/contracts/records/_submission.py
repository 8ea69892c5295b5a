"""``submissions/NNNN.json``: one appended record per submission call (``execute``, and later ``retry``).

Each job carries its chunk number, retry generation (0: the run's first submission) and index offset as
fields: nobody parses them back out of job names. A retry keeps the plan's array indices (it submits a
subset of them), so (chunk, array index) maps to a shard through the plan's chunk bindings in every
generation.
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt

from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._schema import RecordSchema


class SubmittedJob(BaseModel):
    """One array chunk Slurm holds: its job id, and whether an earlier submission had already placed it."""

    model_config = FROZEN

    chunk: NonNegativeInt
    generation: NonNegativeInt = Field(description="0 for the run's own submission; n for retry generation n.")
    index_offset: NonNegativeInt = Field(description="Global position of array index 0 among the unit's tasks.")
    job_name: str
    job_id: str
    array_spec: str
    recovered: bool = Field(description="Found by job name (submitted before), not submitted by this call.")


class SubmissionRecord(BaseModel):
    """One (re)submission of a run's unit: the job id of every chunk and how many were new."""

    model_config = FROZEN

    submitted_at: AwareDatetime
    generation: NonNegativeInt = Field(
        default=0,
        description="0: the run's own submission (execute); n: retry generation n (its intent is retries/NNNN.json).",
    )
    jobs: tuple[SubmittedJob, ...] = Field(strict=False)
    submitted: NonNegativeInt
    recovered: NonNegativeInt
    sbatch_calls: NonNegativeInt
    error: str | None = Field(
        default=None,
        description="Set when the scheduler refused the submission: its message (jobs then lists none of this call).",
    )


SUBMISSION_SCHEMA: RecordSchema[SubmissionRecord] = RecordSchema("submission", 1, SubmissionRecord)
