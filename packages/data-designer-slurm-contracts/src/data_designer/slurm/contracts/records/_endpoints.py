"""``endpoints.json``: per model alias the base URLs the client worker talks to (write-once, before the client).

The supervisor starts the client worker with :data:`ENV_ATTEMPT_DIR` (the attempt directory) and
:data:`ENV_ENDPOINTS` (this record's path) set: the whole interface between the two processes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._schema import RecordSchema

ENV_ATTEMPT_DIR = "DDSLURM_ATTEMPT_DIR"
ENV_ENDPOINTS = "DDSLURM_ENDPOINTS"


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


ENDPOINTS_SCHEMA: RecordSchema[EndpointsRecord] = RecordSchema("endpoints", 1, EndpointsRecord)
