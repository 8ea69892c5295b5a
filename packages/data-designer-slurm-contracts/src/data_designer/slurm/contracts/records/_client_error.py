"""``client-error.json``: why the client worker failed (write-once, by the worker, right before it exits 2 or 3).

The supervisor reads it when the client exits non-zero and puts its cause and fix into ``status.json``'s
message; the client log stays the supporting evidence. The message is the innermost exception of what the
worker caught, on one line, shortened and redacted: never a secret.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._progress import WorkerFailure
from data_designer.slurm.contracts.records._schema import RecordSchema

CLIENT_ERROR_MESSAGE_LIMIT = 600
"""The most characters of the exception's message the record keeps."""

ClientCause = Literal[
    "model_not_found",
    "connection_failed",
    "authentication",
    "timeout",
    "server_error",
    "invalid_config",
    "bad_inputs",
    "other",
]
"""The well-known causes a worker names (``other``: anything else; the fix then points at the client log)."""


class ClientErrorRecord(BaseModel):
    """The exception that ended the client worker, its cause and a fix."""

    model_config = FROZEN

    kind: WorkerFailure = Field(description="How the worker exits: invalid_config (2) or client_error (3).")
    cause: ClientCause
    exception: str = Field(description="The type name of the innermost exception of the caught chain.")
    message: str = Field(
        max_length=CLIENT_ERROR_MESSAGE_LIMIT, description="That exception's message: one line, shortened, redacted."
    )
    alias: str | None = Field(default=None, description="The model alias the failure concerns, when known.")
    fix: str = Field(description="What to change or look at, naming the run-file key where there is one.")


CLIENT_ERROR_SCHEMA: RecordSchema[ClientErrorRecord] = RecordSchema("client-error", 1, ClientErrorRecord)
