"""``inputs/manifest.json``: every snapshotted input with its sha256 (write-once, after the copies)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, NonNegativeInt

from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._schema import RecordSchema

InputRole = Literal["run", "config", "seed", "benchmark"]


class InputFile(BaseModel):
    """One snapshotted file: where it came from, where its copy is (relative to the run directory), its digest."""

    model_config = FROZEN

    role: InputRole
    source: str = Field(description="Absolute path of the original file when it was snapshotted.")
    path: str = Field(description="The copy, relative to the run directory (under 'inputs/').")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: NonNegativeInt = Field(description="Bytes.")


class SeedRewrite(BaseModel):
    """How the allocation reads the config's seed dataset from the snapshot instead of its original path."""

    model_config = FROZEN

    key_path: str = Field(description="Where the config names the path, e.g. 'seed_config.source.path'.")
    original: str = Field(description="The path as the config writes it.")
    snapshot: str = Field(description="The same path into the snapshot, relative to the run directory.")


class InputsManifest(BaseModel):
    """Every input the run reads, copied into ``inputs/`` with its sha256 (the allocation reads only these)."""

    model_config = FROZEN

    files: tuple[InputFile, ...] = Field(strict=False)
    seed: SeedRewrite | None = Field(default=None, description="None when the config has no local seed dataset.")


INPUTS_SCHEMA: RecordSchema[InputsManifest] = RecordSchema("inputs", 1, InputsManifest)
