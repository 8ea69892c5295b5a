"""``merge/NNNN/manifest.json`` and ``merge/jobs/NNNN.json``: one merge of a run's shards, and merge jobs.

A merge writes its Parquet files first (``merge/NNNN/part-<k:05d>.parquet``, each published whole), then the merge
manifest last, so a merge without a valid manifest is one that did not finish and proves nothing. The manifest
names every source part it took rows from (shard, attempt, file, sha256, the index range taken), every file it
wrote (rows, bytes, sha256, first index), the index ranges covered and the ranges missing (a partial merge), and
the unified schema, and the files' layout (spliced, encoded or compacted; the row groups). ``source_digest`` identifies the evidence merged: merging the same evidence again is the same
merge. ``merge --as-job`` appends a job record so ``status`` can tell the merge job's state.

The layout fields (``MergeFile.row_groups``, ``MergeManifest.layout``, the job's ``compact`` and
``row_group_rows``) were added compatibly within version 1: each has a default, so a manifest written before them
still reads (its layout is None: not recorded), and a merge of the default layout keeps its ``source_digest``.
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._merge import MergeLayout
from data_designer.slurm.contracts._ranges import IndexRange
from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._manifest import ColumnType
from data_designer.slurm.contracts.records._schema import RecordSchema


class MergeSource(BaseModel):
    """Rows ``[range.start, range.stop)`` taken from one validated part of one attempt."""

    model_config = FROZEN

    shard: NonNegativeInt
    attempt: PositiveInt
    path: str = Field(description="The part, relative to the run directory.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    range: IndexRange = Field(description="The global indices taken from it (a slice of its rows).")


class MergeFile(BaseModel):
    """One Parquet file the merge wrote, relative to the merge directory."""

    model_config = FROZEN

    path: str
    records: PositiveInt
    first_index: NonNegativeInt = Field(description="The global index of its first row.")
    bytes: PositiveInt
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    row_groups: PositiveInt | None = Field(default=None, description="Its row groups (None: not recorded).")


class MergeManifest(BaseModel):
    """One merge of a run: what it read, what it wrote, what is missing. Written last, once."""

    model_config = FROZEN

    run_id: str
    plan_digest: str
    source_digest: str = Field(description="sha256 of the sources list and options: the evidence merged.")
    complete: bool = Field(description="Every record of the run is in the files (no missing range).")
    records: NonNegativeInt
    records_total: PositiveInt
    ranges: tuple[IndexRange, ...] = Field(strict=False, description="The global index ranges in the files.")
    missing: tuple[IndexRange, ...] = Field(strict=False, description="Ranges of the run not merged (partial).")
    missing_shards: tuple[NonNegativeInt, ...] = Field(strict=False, default=())
    columns: tuple[ColumnType, ...] = Field(strict=False, description="The unified schema of every file.")
    provenance: bool = Field(description="Whether the files keep the provenance columns (_dd_index, ...).")
    max_rows_per_file: PositiveInt
    files: tuple[MergeFile, ...] = Field(strict=False)
    sources: tuple[MergeSource, ...] = Field(strict=False)
    runtime_version: str
    layout: MergeLayout | None = Field(
        default=None, description="How the files were written and their row groups (None: not recorded)."
    )


class MergeJobRecord(BaseModel):
    """``merge --as-job``: the one-task CPU job that runs the merge, appended when Slurm accepted it."""

    model_config = FROZEN

    job_id: str
    job_name: str
    submitted_at: AwareDatetime
    output: str | None = Field(default=None, description="--output, when the merge writes outside the run.")
    allow_partial: bool = False
    drop_provenance: bool = False
    max_rows_per_file: PositiveInt
    compact: bool = Field(default=False, description="--compact: rows re-encoded into row groups of row_group_rows.")
    row_group_rows: PositiveInt | None = Field(default=None, description="--row-group-rows (None: the default).")


MERGE_MANIFEST_SCHEMA: RecordSchema[MergeManifest] = RecordSchema("merge-manifest", 1, MergeManifest)
MERGE_JOB_SCHEMA: RecordSchema[MergeJobRecord] = RecordSchema("merge-job", 1, MergeJobRecord)
