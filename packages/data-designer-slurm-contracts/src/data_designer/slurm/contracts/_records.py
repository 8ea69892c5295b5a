"""Persisted record envelopes and claim owners: what every record file in a run directory holds.

A record file is ``canonical_json(envelope) + "\\n"`` where the envelope names the payload's schema
and version, when it was written, and a sha256 ``checksum`` over the canonical JSON of every other
envelope field (``schema_name``, ``schema_version``, ``written_at``, ``payload``). Covering the
schema name as well as the payload means a flipped byte anywhere in the file reads as corrupt, and
``wrong_schema`` is only ever reported for an intact record of another kind. See
``architecture/run-directory.md``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt, PositiveInt, StringConstraints

from data_designer.slurm.contracts._types import FROZEN, PrintableText

RECORD_SCHEMA_NAME_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"

RecordSchemaName = Annotated[str, StringConstraints(pattern=RECORD_SCHEMA_NAME_PATTERN)]
"""The name of a record schema, e.g. ``run``, ``attempt``, ``heartbeat``, ``claim``."""

CLAIM_SCHEMA_NAME = "claim"
CLAIM_SCHEMA_VERSION = 1


class RecordEnvelope(BaseModel):
    """One persisted record: schema name and version, write time, checksum and the JSON payload."""

    model_config = FROZEN

    schema_name: RecordSchemaName
    schema_version: PositiveInt
    checksum: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")] = Field(
        description="sha256 of the canonical JSON of the other four fields."
    )
    written_at: AwareDatetime | None = Field(default=None, description="The writer's clock, UTC; None: not recorded.")
    payload: dict[str, Any]


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
