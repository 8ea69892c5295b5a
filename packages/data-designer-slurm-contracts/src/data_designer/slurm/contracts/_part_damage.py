"""A published part that no longer is what its manifest says: missing, not a file, another size or other bytes.

Every ``status`` checks each part of every valid manifest cheaply (it exists as a regular file of the manifest's
size, and its path is one plain name inside its attempt's ``output/``); ``status --verify`` also hashes it against
the manifest's sha256. A damaged part counts for nothing: its index range is missing again, so its shard is
``damaged`` and ``retry`` regenerates exactly that range, after setting the part aside (never deleting it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, PositiveInt

from data_designer.slurm.contracts._ranges import IndexRange
from data_designer.slurm.contracts._types import FROZEN

PartProblem = Literal["missing", "not_a_file", "size", "sha256", "unreadable", "bad_path"]
"""Why a part is damaged: absent; a directory, link or other special file; a size, or (``--verify``) a sha256,
other than its manifest's; unreadable (permissions, I/O error); a manifest path that is not one plain name."""

CHEAP_PART_PROBLEMS: frozenset[str] = frozenset({"missing", "not_a_file", "size", "bad_path"})
"""What every ``status`` finds without reading a byte of the part."""


class PartDamage(BaseModel):
    """One damaged part of a valid manifest."""

    model_config = FROZEN

    shard: int = Field(ge=0)
    attempt: PositiveInt
    path: str = Field(description="The part relative to the run directory, as its manifest names it.")
    range: IndexRange = Field(description="The record indices the part holds (lost with it).")
    problem: PartProblem
    detail: str = Field(description="What was found, e.g. 'size 1200 bytes, its manifest says 1234'.")
