"""``data-designer slurm merge RUN``: one validated dataset from every shard of a run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from data_designer.slurm.cli._output import DebugOption, JsonOption, run
from data_designer.slurm.cli._profile_commands import ClusterOption, ProfileOption
from data_designer.slurm.cli._status_commands import RunArgument

if TYPE_CHECKING:
    from data_designer.slurm.contracts import MergeLayout, MergeResult

DEFAULT_MAX_ROWS = 1_000_000


def merge(
    run_ref: RunArgument,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", metavar="DIR", help="Write the dataset here (new or empty). Default: <run>/merge/NNNN."
        ),
    ] = None,
    allow_partial: Annotated[
        bool,
        typer.Option("--allow-partial", help="Merge what exists; the manifest records exactly the missing ranges."),
    ] = False,
    max_rows_per_file: Annotated[
        int, typer.Option("--max-rows-per-file", min=1, metavar="N", help="Rows per Parquet file at most.")
    ] = DEFAULT_MAX_ROWS,
    drop_provenance: Annotated[
        bool, typer.Option("--drop-provenance", help="Leave out _dd_index, _dd_run_id, ... (they are still checked).")
    ] = False,
    compact: Annotated[
        bool,
        typer.Option(
            "--compact",
            help="Re-encode the rows into row groups of --row-group-rows (for DuckDB, Polars, Spark) instead of "
            "splicing the parts' row groups as they are.",
        ),
    ] = False,
    row_group_rows: Annotated[
        int | None,
        typer.Option(
            "--row-group-rows",
            metavar="N",
            help="With --compact: rows per row group (default 131072; at most 1048576 and --max-rows-per-file).",
        ),
    ] = None,
    as_job: Annotated[
        bool,
        typer.Option(
            "--as-job", help="Run the merge as a one-task job on the profile's CPU partition; 'status' shows it."
        ),
    ] = False,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Merge every shard of a run into one dataset: each part checked against its manifest, every record once.

    Exit codes: 0 merged (or the same evidence was merged before, or --as-job submitted the job); 6 shards are
    not succeeded (without --allow-partial), a part fails its manifest, or the shards' schemas drift; 4 --output
    is not empty; 3 no such run; 2 --as-job with an image as the compute Python, sbatch refused the job, or
    --row-group-rows without --compact, below 1, above 1048576 or above --max-rows-per-file.
    """
    from data_designer.slurm.services import merge_run

    run(
        "merge",
        lambda: merge_run(
            run_ref,
            output=output,
            allow_partial=allow_partial,
            max_rows_per_file=max_rows_per_file,
            drop_provenance=drop_provenance,
            compact=compact,
            row_group_rows=row_group_rows,
            as_job=as_job,
            profile=profile,
            cluster=cluster,
        ),
        render_merge,
        as_json=as_json,
        debug=debug,
    )


def render_merge(result: MergeResult) -> str:
    if result.outcome == "submitted":
        return f"{result.run_id}: merge submitted as job {result.job_id} ({result.job_name}); 'status' shows it"
    verb = "already merged (same evidence)" if result.outcome == "reused" else "merged"
    size = f"{result.bytes / 1e6:.1f} MB" if result.bytes >= 100_000 else f"{result.bytes} bytes"
    lines = [
        f"{result.run_id}: {verb}: {result.records}/{result.records_total} records in {result.files} file(s)"
        f"{_layout(result.layout)}, {size}, in {result.merge_dir}"
    ]
    if result.missing:
        shown = ", ".join(f"{r.start}-{r.stop - 1}" for r in result.missing[:5])
        more = f" (+{len(result.missing) - 5} more)" if len(result.missing) > 5 else ""
        shards = ", ".join(map(str, result.missing_shards))
        lines.append(f"partial: missing indices {shown}{more} (shard(s) {shards}), recorded in the manifest")
    lines.append(f"manifest: {result.manifest}")
    return "\n".join(lines)


def _layout(layout: MergeLayout | None) -> str:
    """`` (spliced: 32 row group(s) of 5 rows)``, `` (compacted: 3 row group(s) of 32-64 rows, target 64)``."""
    if layout is None:
        return ""
    low, high = layout.min_row_group_rows, layout.max_row_group_rows
    rows = f"{low:,}" if low == high else f"{low:,}-{high:,}"
    target = f", target {layout.row_group_rows:,}" if layout.row_group_rows is not None else ""
    return f" ({layout.kind}: {layout.row_groups:,} row group(s) of {rows} rows{target})"
