"""What ``merge`` returns: where the merged dataset is and what it holds, or the merge job it submitted."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._ranges import IndexRange
from data_designer.slurm.contracts._types import FROZEN

DEFAULT_MAX_ROWS_PER_FILE = 1_000_000
"""Rows per merged Parquet file unless ``--max-rows-per-file`` says otherwise."""

MergeOutcome = Literal["merged", "reused", "submitted"]
"""``merged``: this call wrote the files and manifest; ``reused``: a merge of the same evidence already existed;
``submitted``: ``--as-job`` submitted the merge as a CPU job (``job_id``), which writes them."""


class MergeResult(BaseModel):
    """The result of ``data-designer slurm merge RUN``."""

    model_config = FROZEN

    run_id: str
    run_dir: str
    outcome: MergeOutcome
    merge_dir: str | None = Field(default=None, description="Where the files and manifest.json are.")
    manifest: str | None = Field(default=None, description="The merge manifest (written last).")
    complete: bool = False
    records: NonNegativeInt = 0
    records_total: PositiveInt
    files: NonNegativeInt = 0
    bytes: NonNegativeInt = 0
    missing: tuple[IndexRange, ...] = Field(default=(), description="Index ranges not merged (--allow-partial).")
    missing_shards: tuple[NonNegativeInt, ...] = ()
    parts_read: NonNegativeInt = Field(default=0, description="Source parts validated and read.")
    seconds: NonNegativeFloat = 0.0
    job_id: str | None = Field(default=None, description="--as-job: the merge job.")
    job_name: str | None = None
