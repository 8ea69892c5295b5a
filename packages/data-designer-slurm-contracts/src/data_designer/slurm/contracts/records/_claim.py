"""``shards/<k>/attempts/<n>/claim``: who took an attempt (write-once; taking it is taking the number)."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._types import FROZEN, PrintableText
from data_designer.slurm.contracts.records._schema import RecordSchema


class ClaimOwner(BaseModel):
    """Who holds a claim: enough to find the process (host, pid) and its Slurm task, and when it claimed."""

    model_config = FROZEN

    host: PrintableText
    pid: PositiveInt
    job_id: PrintableText | None = Field(
        default=None,
        description="The array job id for an array task (SLURM_ARRAY_JOB_ID), else SLURM_JOB_ID; None outside Slurm.",
    )
    array_task: NonNegativeInt | None = Field(default=None, description="SLURM_ARRAY_TASK_ID, if an array task.")
    attempt: PositiveInt | None = Field(default=None, description="The attempt number claimed, when claiming one.")
    restart_count: NonNegativeInt = Field(default=0, description="SLURM_RESTART_COUNT: how often Slurm requeued it.")
    time: AwareDatetime = Field(description="When the claim was taken, by the claimant's clock.")


CLAIM_SCHEMA: RecordSchema[ClaimOwner] = RecordSchema("claim", 1, ClaimOwner)
