"""What ``execute`` returns (the records it persists are in :mod:`data_designer.slurm.contracts.records`).

``execute`` writes, in this order: the input snapshot (``inputs/...`` plus ``inputs/manifest.json``), the
plan (``plan.json``, the plan's canonical JSON), the run record (``run.json``, written last of the three: a
run directory without it was never completely created), then one submission record per submission
(``submissions/NNNN.json``). Every record is write-once. The result of the command is :class:`ExecuteResult`.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._plan import PlanWarning
from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records import SubmittedJob


class ExecuteResult(BaseModel):
    """The result of ``data-designer slurm execute RUN``: the run, its directory and its jobs."""

    model_config = FROZEN

    run_id: str
    run_dir: str
    name: str
    cluster: str
    plan_digest: str
    records: PositiveInt
    shards: NonNegativeInt
    jobs: tuple[SubmittedJob, ...] = Field(description="One per array chunk, in chunk order.")
    submitted: NonNegativeInt = Field(description="Chunks newly submitted by this call.")
    recovered: NonNegativeInt = Field(description="Chunks an earlier call had already submitted (found by name).")
    resumed: bool = Field(description="True with --run-id: an existing run was submitted again.")
    submission_record: str = Field(description="The submission record this call wrote (absolute path).")
    warnings: tuple[PlanWarning, ...] = Field(
        default=(), description="The plan's warnings (as the dry run shows them): submitted all the same."
    )
