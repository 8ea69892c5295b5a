"""``output/manifest.json``: what one attempt produced (write-once, after every Parquet part it lists).

Records, the Arrow schema, each Parquet part with its index range and sha256, per-alias request and
token counts, routing, timings and provenance. A part without a manifest counts for nothing. Every
output row carries the provenance columns :data:`PROVENANCE_COLUMNS`: its global record index, the run
id, the plan digest, the shard and the attempt. The client worker's exit codes (``EXIT_*``) are how the
supervisor reads its ending.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._ranges import IndexRange
from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._schema import RecordSchema

INDEX_COLUMN = "_dd_index"
RUN_ID_COLUMN = "_dd_run_id"
PLAN_DIGEST_COLUMN = "_dd_plan_digest"
SHARD_COLUMN = "_dd_shard"
ATTEMPT_COLUMN = "_dd_attempt"
PROVENANCE_COLUMNS = (INDEX_COLUMN, RUN_ID_COLUMN, PLAN_DIGEST_COLUMN, SHARD_COLUMN, ATTEMPT_COLUMN)
"""Columns the worker appends to every record; a Data Designer column with one of these names is refused."""

EXIT_OK = 0
EXIT_INVALID_CONFIG = 2
EXIT_CLIENT_ERROR = 3
EXIT_DRAINED = 4
"""The worker's exit codes, as the supervisor reads them; :data:`EXIT_DRAINED`: it stopped on a signal and
published a partial manifest (possibly with no records)."""


DrainSignal = Literal["SIGUSR1", "SIGTERM"]
"""What made the worker drain: the supervisor's forward of the time-limit warning, or a termination."""


class Drained(BaseModel):
    """Why an attempt's output is partial: it stopped on a signal and published what was complete."""

    model_config = FROZEN

    signal: DrainSignal
    requested_at: AwareDatetime
    published_at: AwareDatetime
    settled: bool = Field(
        description="True: every in-flight request finished before publication; False: the grace ran out first "
        "(or the signal was a termination, which publishes at once)."
    )
    message: str


class OutputPart(BaseModel):
    """One Parquet file of the output, relative to the output directory."""

    model_config = FROZEN

    path: str
    records: PositiveInt
    first_index: NonNegativeInt = Field(description="Global index of its first row; rows are consecutive.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: PositiveInt


class ColumnType(BaseModel):
    model_config = FROZEN

    name: str
    type: str = Field(description="The Arrow type as Arrow prints it, e.g. 'large_string', 'int64'.")


class ReplicaRequests(BaseModel):
    """What one replica (base URL) of a routed alias served."""

    model_config = FROZEN

    base_url: str
    requests: NonNegativeInt = Field(description="Requests it answered (any HTTP status).")
    failures: NonNegativeInt = Field(description="Exchanges that failed (refused, reset, closed unanswered).")


class Routing(BaseModel):
    """How the worker's local router spread an alias's requests over its replicas (``runtime._router``)."""

    model_config = FROZEN

    router_url: str = Field(description="The local endpoint the client used.")
    replicas: tuple[ReplicaRequests, ...] = Field(description="One per base URL, in the endpoints record's order.")
    failovers: NonNegativeInt = Field(description="Requests sent on to another replica after one failed.")
    unrouted: NonNegativeInt = Field(description="Requests no replica answered (the client got 502).")
    failover_s: tuple[NonNegativeFloat, ...] = Field(
        default=(),
        description="Per failed-over request that another replica answered (the first 100): seconds from the failure "
        "to that answer.",
    )


class ModelUsage(BaseModel):
    """What one model alias served to this attempt (from the host's usage tracking)."""

    model_config = FROZEN

    kind: Literal["deployed", "external"]
    model: str
    base_urls: tuple[str, ...] = Field(description="Every base URL the alias had.")
    used_base_url: str = Field(description="The first base URL (with several, ``routing`` tells how they served).")
    successful_requests: NonNegativeInt | None = Field(description="None when usage_source is 'unavailable'.")
    failed_requests: NonNegativeInt | None
    input_tokens: NonNegativeInt | None
    output_tokens: NonNegativeInt | None
    routing: Routing | None = Field(default=None, description="Per-replica counts; None for an alias with one URL.")


class Timings(BaseModel):
    """Where the attempt's time went, in seconds; None where it cannot be known."""

    model_config = FROZEN

    worker_started_at: AwareDatetime
    worker_finished_at: AwareDatetime
    queue_wait_s: NonNegativeFloat | None = Field(
        default=None, description="Latest submission of the run to the supervisor's start (first attempt)."
    )
    server_start_s: NonNegativeFloat | None = Field(
        default=None, description="Servers spawned to all ready, from attempt.json."
    )
    host_import_s: NonNegativeFloat
    setup_s: NonNegativeFloat = Field(description="Config load, full host validation and alias rewriting.")
    generation_s: NonNegativeFloat = Field(description="The host's create calls, profiling included.")
    write_s: NonNegativeFloat = Field(description="Parquet parts and manifest.")
    records_per_s: NonNegativeFloat = Field(description="Records over generation_s.")


class OutputManifest(BaseModel):
    """What one attempt produced (write-once, after every part it lists)."""

    model_config = FROZEN

    run_id: str
    plan_digest: str
    config_digest: str
    shard: NonNegativeInt
    attempt: PositiveInt
    seed: NonNegativeInt = Field(
        description="The shard's sampler seed; a range not starting the shard is seeded from it and its start "
        "(planner.derive_range_seed)."
    )
    assigned: tuple[IndexRange, ...] = Field(description="The index ranges this attempt was assigned (attempt.json).")
    ranges: tuple[IndexRange, ...] = Field(
        description="The global index ranges produced: the parts hold exactly these indices. Equal to 'assigned' "
        "unless the output is partial."
    )
    complete: bool = Field(description="Whether 'ranges' covers 'assigned'.")
    drained: Drained | None = Field(default=None, description="Set when the attempt stopped early on a signal.")
    records: NonNegativeInt
    columns: tuple[ColumnType, ...] = Field(description="The Arrow schema of every part, provenance included.")
    arrow_schema: str = Field(description="The same schema as Arrow prints it.")
    parts: tuple[OutputPart, ...]
    usage_source: Literal["host", "unavailable"] = Field(
        description="'host': counts read from the host's usage tracking; 'unavailable': this host hides them."
    )
    models: dict[str, ModelUsage]
    timings: Timings
    host_version: str
    runtime_version: str
    python: str


MANIFEST_SCHEMA: RecordSchema[OutputManifest] = RecordSchema("result-manifest", 1, OutputManifest)
