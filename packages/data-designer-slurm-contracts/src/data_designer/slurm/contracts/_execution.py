"""What ``execute`` persists in a run directory and what it returns (see ``architecture/run-directory.md``).

``execute`` writes, in this order: the input snapshot (``inputs/...`` plus :class:`InputsManifest` in
``inputs/manifest.json``), the plan (``plan.json``, the plan's canonical JSON), the run record
(:class:`RunRecord` in ``run.json``, written last of the three: a run directory without it was never
completely created), then one :class:`SubmissionRecord` per submission (``submissions/NNNN.json``).
Every record is write-once. The result of the command is :class:`ExecuteResult`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._plan import ClusterFacts, SubmissionBinding
from data_designer.slurm.contracts._scheduler import SubmissionUnit
from data_designer.slurm.contracts._types import FROZEN

RUN_RECORD_SCHEMA = ("run", 1)
INPUTS_MANIFEST_SCHEMA = ("inputs", 1)
SUBMISSION_RECORD_SCHEMA = ("submission", 1)
"""(schema name, version) of the records ``execute`` writes."""

InputRole = Literal["run", "config", "seed"]


class InputFile(BaseModel):
    """One snapshotted file: where it came from, where its copy is (relative to the run directory), its digest."""

    model_config = FROZEN

    role: InputRole
    source: str = Field(description="Absolute path of the original file when it was snapshotted.")
    path: str = Field(description="The copy, relative to the run directory (under 'inputs/').")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: NonNegativeInt = Field(description="Bytes.")


class SeedRewrite(BaseModel):
    """How the allocation reads the config's seed dataset from the snapshot instead of its original path."""

    model_config = FROZEN

    key_path: str = Field(description="Where the config names the path, e.g. 'seed_config.source.path'.")
    original: str = Field(description="The path as the config writes it.")
    snapshot: str = Field(description="The same path into the snapshot, relative to the run directory.")


class InputsManifest(BaseModel):
    """Every input the run reads, copied into ``inputs/`` with its sha256 (the allocation reads only these)."""

    model_config = FROZEN

    files: tuple[InputFile, ...] = Field(strict=False)
    seed: SeedRewrite | None = Field(default=None, description="None when the config has no local seed dataset.")


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


class SubmittedJob(BaseModel):
    """One array chunk Slurm holds: its job id, and whether an earlier submission had already placed it."""

    model_config = FROZEN

    chunk: NonNegativeInt
    job_name: str
    job_id: str
    array_spec: str
    recovered: bool = Field(description="Found by job name (submitted before), not submitted by this call.")


class SubmissionRecord(BaseModel):
    """One (re)submission of a run's unit: the job id of every chunk and how many were new."""

    model_config = FROZEN

    submitted_at: AwareDatetime
    jobs: tuple[SubmittedJob, ...] = Field(strict=False)
    submitted: NonNegativeInt
    recovered: NonNegativeInt
    sbatch_calls: NonNegativeInt


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
