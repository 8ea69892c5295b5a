"""Record envelopes and record kinds: what every record file in a run directory holds.

A record file is ``canonical_json(envelope) + "\\n"`` where the envelope names the payload's schema
and version, when it was written, and a sha256 ``checksum`` over the canonical JSON of every other
envelope field (``schema_name``, ``schema_version``, ``written_at``, ``payload``). Covering the
schema name as well as the payload means a flipped byte anywhere in the file reads as corrupt, and
``wrong_schema`` is only ever reported for an intact record of another kind. A :class:`RecordSchema`
binds a schema name and version to its payload model; every family module of this package defines
its own beside its models. See ``docs/architecture/run-directory.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AwareDatetime, BaseModel, Field, PositiveInt, StringConstraints

from data_designer.slurm.contracts._errors import InternalError
from data_designer.slurm.contracts._types import FROZEN

M = TypeVar("M", bound=BaseModel)

RECORD_SCHEMA_NAME_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"
_SCHEMA_NAME = re.compile(RECORD_SCHEMA_NAME_PATTERN)

RecordSchemaName = Annotated[str, StringConstraints(pattern=RECORD_SCHEMA_NAME_PATTERN)]
"""The name of a record schema, e.g. ``run``, ``attempt``, ``heartbeat``, ``claim``."""


@dataclass(frozen=True)
class RecordSchema(Generic[M]):
    """A record kind: its schema name, the version this code writes and reads, and the payload model."""

    name: str
    version: int
    model: type[M]

    def __post_init__(self) -> None:
        if not _SCHEMA_NAME.fullmatch(self.name):
            raise InternalError(f"record schema name {self.name!r} is invalid", code="invalid_schema_name")
        if isinstance(self.version, bool) or self.version < 1:
            raise InternalError(f"record schema version {self.version!r} is invalid", code="invalid_schema_version")


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
