"""What ``merge`` returns: where the merged dataset is and what it holds, or the merge job it submitted."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._ranges import IndexRange
from data_designer.slurm.contracts._types import FROZEN

DEFAULT_MAX_ROWS_PER_FILE = 1_000_000
"""Rows per merged Parquet file unless ``--max-rows-per-file`` says otherwise."""

DEFAULT_ROW_GROUP_ROWS = 131_072
"""Rows per row group of ``merge --compact`` unless ``--row-group-rows`` says otherwise (128Ki: the ~10^5 rows
DuckDB, Polars and Spark scan well; a file smaller than that is one row group)."""

MAX_ROW_GROUP_ROWS = 1_048_576
"""The most ``--row-group-rows`` may ask for (1Mi). A compacting merge holds about three row groups of decoded rows
(one filling, one being encoded) and one source part, so the cap bounds its memory; it must also be at most
``--max-rows-per-file`` (a row group never spans two files)."""

MergeLayoutKind = Literal["spliced", "encoded", "compacted"]
"""How a merge wrote its files. ``spliced``: the parts' row groups copied as they are (the default, when every part
is taken whole); ``encoded``: rows re-encoded by the default merge where it cannot splice (a part sliced, a null
column cast, ``--drop-provenance``); ``compacted``: ``--compact``, rows re-encoded into row groups of
``row_group_rows``."""


class MergeLayout(BaseModel):
    """The layout of a merge's files: how they were written and the row groups they hold (every file's, summed)."""

    model_config = FROZEN

    kind: MergeLayoutKind
    row_group_rows: PositiveInt | None = Field(
        default=None, description="compacted: the target rows per row group (a file's last may hold fewer)."
    )
    row_groups: NonNegativeInt = Field(description="Row groups in all files together.")
    min_row_group_rows: NonNegativeInt = Field(description="Rows of the smallest row group.")
    max_row_group_rows: NonNegativeInt = Field(description="Rows of the largest row group.")


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
    layout: MergeLayout | None = Field(default=None, description="The files' row groups (None: --as-job).")
    job_id: str | None = Field(default=None, description="--as-job: the merge job.")
    job_name: str | None = None
