"""``run.json``: the identity of one run (write-once, written last by ``execute``: its presence makes the run exist)."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._plan import ClusterFacts, SubmissionBinding
from data_designer.slurm.contracts._scheduler import SubmissionUnit
from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._schema import RecordSchema


class RunRecord(BaseModel):
    """The identity of one run: what was compiled, against what, and the exact submission unit bound to it."""

    model_config = FROZEN

    run_id: str
    name: str
    created_at: AwareDatetime = Field(description="When the run was created (the run id's time, UTC).")
    run_file: str = Field(description="The run file as given (its copy is in the inputs manifest).")
    profile_file: str
    cluster: str
    facts: ClusterFacts = Field(description="The cluster facts the plan was compiled with (resolved from Slurm).")
    plan_digest: str
    config_digest: str
    shards: NonNegativeInt
    records: PositiveInt
    binding: SubmissionBinding
    unit: SubmissionUnit = Field(description="The bound submission unit: resubmitting uses exactly this.")


RUN_SCHEMA: RecordSchema[RunRecord] = RecordSchema("run", 1, RunRecord)
