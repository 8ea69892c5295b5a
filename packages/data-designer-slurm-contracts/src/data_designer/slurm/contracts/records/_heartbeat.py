"""``heartbeat.json``: the supervisor is alive (one writer; replaced every interval and on every phase change)."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._schema import RecordSchema

Phase = Literal["starting", "servers_starting", "client_running", "draining", "stopping"]


class HeartbeatRecord(BaseModel):
    model_config = FROZEN

    pid: PositiveInt
    hostname: str
    phase: Phase
    beat: NonNegativeInt = Field(description="Counts up from 0 with every heartbeat of this supervisor.")
    time: AwareDatetime


HEARTBEAT_SCHEMA: RecordSchema[HeartbeatRecord] = RecordSchema("heartbeat", 1, HeartbeatRecord)
