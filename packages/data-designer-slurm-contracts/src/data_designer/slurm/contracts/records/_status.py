"""``status.json``: the classified ending of one attempt (write-once, the supervisor's last record)."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeFloat, NonNegativeInt

from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._schema import RecordSchema

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
    "node_fail",
    "internal_error",
]
"""How an attempt ended; every ending of the supervisor is exactly one of these (``internal_error``: a bug in the
supervisor or a filesystem it cannot write, with the traceback as the log tail; ``node_fail``: Slurm ended the job
because a node of its allocation failed or was set DOWN)."""

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
    "node_fail": 16,
}
"""The supervisor's exit code (the job's, in ``sacct``) for each final status."""

EXIT_NOT_OURS = 4
"""The supervisor's exit when another process holds the attempt's claim (a late task superseded by a retry)."""


class StatusRecord(BaseModel):
    """The classified ending of one attempt."""

    model_config = FROZEN

    status: FinalStatus
    exit_code: int
    message: str = Field(
        description="One sentence: the cause of the ending and a fix (a client failure: the exception the worker "
        "caught, from its client-error.json)."
    )
    step: str | None = Field(default=None, description="The step that caused the ending (server or client), if any.")
    log_tail: tuple[str, ...] = ()
    signal: str | None = Field(default=None, description="The first signal the supervisor received, if any.")
    records: NonNegativeInt | None = Field(
        default=None,
        description="Records this attempt published (its valid manifest's count), 0 when it published none; None "
        "only in records of earlier releases.",
    )
    records_assigned: NonNegativeInt | None = Field(default=None, description="Records this attempt was assigned.")
    drain_s: NonNegativeFloat | None = Field(
        default=None, description="Signal received to the client worker's exit, when the attempt drained."
    )
    started_at: AwareDatetime
    finished_at: AwareDatetime


STATUS_SCHEMA: RecordSchema[StatusRecord] = RecordSchema("attempt-status", 1, StatusRecord)
