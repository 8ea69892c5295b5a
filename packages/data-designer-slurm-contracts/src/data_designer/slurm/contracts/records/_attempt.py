"""``attempt.json``: the attempt as the supervisor runs it (one writer, the claim holder; replaced at milestones)."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from data_designer.slurm.contracts._ranges import IndexRange
from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._ports import PortRecord
from data_designer.slurm.contracts.records._schema import RecordSchema


class ReplicaRecord(BaseModel):
    """One server replica of the attempt, as far as it got."""

    model_config = FROZEN

    alias: str
    replica: NonNegativeInt
    step: str = Field(description="The srun step's job name and the log name stem.")
    log: str = Field(description="Log file, relative to the attempt directory.")
    nodes: tuple[str, ...]
    address: str = Field(description="The address the client connects to (the node's NodeAddr, or loopback).")
    port: PositiveInt | None = None
    ports: tuple[PortRecord, ...] = ()
    base_url: str | None = None
    spawned_at: AwareDatetime
    ready_at: AwareDatetime | None = None
    startup_s: NonNegativeFloat | None = Field(default=None, description="Spawn to detected ready.")
    readiness_lag_s: float | None = Field(
        default=None, description="Detected ready minus the server's own ready time, when the server reports one."
    )
    exited_at: AwareDatetime | None = Field(default=None, description="When the supervisor saw the step end early.")
    exit_code: int | None = Field(default=None, description="The step's exit code (negative: killed by a signal).")


class AttemptRecord(BaseModel):
    """The attempt as the supervisor runs it (replaced at each milestone)."""

    model_config = FROZEN

    run_id: str
    plan_digest: str
    shard: NonNegativeInt
    attempt: PositiveInt
    chunk: NonNegativeInt
    array_task: NonNegativeInt
    job_id: str | None
    restart_count: NonNegativeInt
    hostname: str
    nodes: tuple[str, ...]
    node_addresses: tuple[str, ...]
    supervisor_pid: PositiveInt
    supervisor_started_at: AwareDatetime
    heartbeat_interval_s: PositiveFloat = Field(
        description="How often the supervisor beats: a reader calls the attempt stale after several missed beats."
    )
    servers_spawned_at: AwareDatetime | None = None
    servers_ready_at: AwareDatetime | None = None
    client_started_at: AwareDatetime | None = None
    assigned: tuple[IndexRange, ...] | None = Field(
        default=None,
        description="The record-index ranges this attempt generates: the shard's range minus what earlier attempts' "
        "valid manifests cover (None until computed).",
    )
    covered_before: tuple[IndexRange, ...] = Field(
        default=(), description="The ranges earlier attempts published, as they were when this attempt started."
    )
    replicas: tuple[ReplicaRecord, ...] = ()


ATTEMPT_SCHEMA: RecordSchema[AttemptRecord] = RecordSchema("attempt", 1, AttemptRecord)
