"""Merging a run's shards into one validated dataset (``merge``): sources, part checks, streaming writer, manifest.

``merge_sources`` decides from a run snapshot which rows of which parts make the dataset and its unified schema
(pure); ``merge_snapshot`` reads every part once, checks it against its attempt's manifest, streams the rows in
global index order into Parquet files with bounded memory, writes the merge manifest last and publishes the
directory atomically. See ``docs/architecture/run-directory.md`` ("Merges").
"""

from data_designer.slurm.contracts import DEFAULT_MAX_ROWS_PER_FILE, DEFAULT_ROW_GROUP_ROWS, MAX_ROW_GROUP_ROWS
from data_designer.slurm.runtime.merge._compact import ENCODERS, CompactWriter
from data_designer.slurm.runtime.merge._footer import FooterScan, ThriftError, scan_footer
from data_designer.slurm.runtime.merge._job_main import MERGE_MODULE, merge_job_argv
from data_designer.slurm.runtime.merge._merge import (
    Merged,
    MergeOptions,
    RunIncomplete,
    check_options,
    latest_merge,
    layout_matches,
    merge_run_dir,
    merge_snapshot,
    source_digest,
    splices,
)
from data_designer.slurm.runtime.merge._parts import PartReader
from data_designer.slurm.runtime.merge._sources import MergeSources, SourceSlice, merge_sources, unified_columns
from data_designer.slurm.runtime.merge._splice import SpliceMismatch, SpliceWriter, footer_bytes
from data_designer.slurm.runtime.merge._writer import (
    COMPRESSION,
    ROW_GROUP_BYTES,
    ROW_GROUP_ROWS,
    HashingSink,
    MergeWriter,
    dictionary_columns,
)

__all__ = [
    "COMPRESSION",
    "DEFAULT_MAX_ROWS_PER_FILE",
    "DEFAULT_ROW_GROUP_ROWS",
    "ENCODERS",
    "MAX_ROW_GROUP_ROWS",
    "MERGE_MODULE",
    "ROW_GROUP_BYTES",
    "ROW_GROUP_ROWS",
    "CompactWriter",
    "FooterScan",
    "HashingSink",
    "MergeOptions",
    "MergeSources",
    "MergeWriter",
    "Merged",
    "PartReader",
    "RunIncomplete",
    "SourceSlice",
    "SpliceMismatch",
    "SpliceWriter",
    "ThriftError",
    "check_options",
    "dictionary_columns",
    "footer_bytes",
    "latest_merge",
    "layout_matches",
    "merge_job_argv",
    "merge_run_dir",
    "merge_snapshot",
    "merge_sources",
    "scan_footer",
    "source_digest",
    "splices",
    "unified_columns",
]
