"""The records the allocation supervisor writes into its attempt directory, and the final statuses.

* ``attempt.json`` (:class:`AttemptRecord`, replaced as the attempt advances): who runs it, on which
  nodes, and per replica its step, node address, probed port(s), endpoint and start/ready times.
* ``endpoints.json`` (:class:`EndpointsRecord`, write-once, before the client starts): per model alias
  the base URLs the client worker talks to (``DDSLURM_ENDPOINTS`` names it).
* ``heartbeat.json`` (:class:`HeartbeatRecord`, replaced every few seconds): the supervisor is alive.
* ``status.json`` (:class:`StatusRecord`, write-once, last): the classified ending of the attempt.
* ``ports/<alias>-<replica>.<task>.json`` (:class:`PortRecord`, write-once): what the launcher of one
  server task probed on its node (``data_designer.slurm.runtime._launch``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.runtime._records import RecordSchema
from data_designer.slurm.runtime._worker_records import IndexRange

FinalStatus = Literal[
    "succeeded",
    "server_failed_to_start",
    "server_died",
    "client_error",
    "invalid_config",
    "environment_mismatch",
    "cancelled",
    "time_limit",
    "preempted",
    "endpoint_unreachable",
    "internal_error",
]
"""How an attempt ended; every ending of the supervisor is exactly one of these (``internal_error``: a bug in the
supervisor or a filesystem it cannot write, with the traceback as the log tail)."""

EXIT_CODES: dict[str, int] = {
    "succeeded": 0,
    "internal_error": 1,
    "invalid_config": 2,
    "client_error": 3,
    "environment_mismatch": 6,
    "server_failed_to_start": 10,
    "server_died": 11,
    "cancelled": 12,
    "time_limit": 13,
    "preempted": 14,
    "endpoint_unreachable": 15,
}
"""The supervisor's exit code (the job's, in ``sacct``) for each final status."""

Phase = Literal["starting", "servers_starting", "client_running", "draining", "stopping"]


class PortRecord(BaseModel):
    """What one server task's launcher found on its node before exec'ing the server."""

    model_config = FROZEN

    alias: str
    replica: NonNegativeInt
    task: NonNegativeInt = Field(description="SLURM_PROCID of the task (one task per node of the replica).")
    bind_host: str
    port: PositiveInt
    hostname: str
    node: str | None = Field(default=None, description="SLURMD_NODENAME, when run by srun.")
    step_gpus: str | None = Field(default=None, description="SLURM_STEP_GPUS: the step's Slurm-assigned GPUs.")
    cuda_visible_devices: str | None = None
    pid: PositiveInt
    probed_at: AwareDatetime


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


class AliasEndpoints(BaseModel):
    model_config = FROZEN

    kind: Literal["deployed", "external"]
    base_urls: tuple[str, ...]
    model: str
    api_key_env: str | None


class EndpointsRecord(BaseModel):
    """What the client worker talks to: per model alias, its base URLs (``http://HOST:PORT/v1``)."""

    model_config = FROZEN

    aliases: dict[str, AliasEndpoints]


class HeartbeatRecord(BaseModel):
    model_config = FROZEN

    pid: PositiveInt
    hostname: str
    phase: Phase
    beat: NonNegativeInt = Field(description="Counts up from 0 with every heartbeat of this supervisor.")
    time: AwareDatetime


class StatusRecord(BaseModel):
    """The classified ending of one attempt."""

    model_config = FROZEN

    status: FinalStatus
    exit_code: int
    message: str
    step: str | None = Field(default=None, description="The step that caused the ending (server or client), if any.")
    log_tail: tuple[str, ...] = ()
    signal: str | None = Field(default=None, description="The first signal the supervisor received, if any.")
    records: NonNegativeInt | None = Field(
        default=None, description="Records this attempt published (its manifest), when it wrote one."
    )
    records_assigned: NonNegativeInt | None = Field(default=None, description="Records this attempt was assigned.")
    drain_s: NonNegativeFloat | None = Field(
        default=None, description="Signal received to the client worker's exit, when the attempt drained."
    )
    started_at: AwareDatetime
    finished_at: AwareDatetime


PORT_SCHEMA: RecordSchema[PortRecord] = RecordSchema("replica-port", 1, PortRecord)
ATTEMPT_SCHEMA: RecordSchema[AttemptRecord] = RecordSchema("attempt", 1, AttemptRecord)
ENDPOINTS_SCHEMA: RecordSchema[EndpointsRecord] = RecordSchema("endpoints", 1, EndpointsRecord)
HEARTBEAT_SCHEMA: RecordSchema[HeartbeatRecord] = RecordSchema("heartbeat", 1, HeartbeatRecord)
STATUS_SCHEMA: RecordSchema[StatusRecord] = RecordSchema("attempt-status", 1, StatusRecord)

ENDPOINTS_RECORD = "endpoints.json"
PORTS_DIR = "ports"
ENV_ATTEMPT_DIR = "DDSLURM_ATTEMPT_DIR"
ENV_ENDPOINTS = "DDSLURM_ENDPOINTS"
