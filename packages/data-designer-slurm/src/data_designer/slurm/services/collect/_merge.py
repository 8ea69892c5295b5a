"""``merge``: every shard of a run into one validated dataset under ``<run>/merge/NNNN`` (or ``--output``).

The run is read once with the one reader (``store.read_run``); the rows to merge are what ``status`` counts (every
shard's attempts over disjoint index ranges), and the work is ``runtime.merge.merge_snapshot``: each part checked
against its manifest before a row of it is used, rows streamed in global index order with bounded memory, the
merge manifest last, the directory published atomically. A run whose shards are not all succeeded is refused
(exit 6) with each such shard's state, unless ``allow_partial``, which records exactly the missing ranges.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from data_designer.slurm.contracts import DEFAULT_MAX_ROWS_PER_FILE, CheckFailedError, MergeResult
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.status import Rules, observe_run
from data_designer.slurm.runtime.store import Clock, RunLayout, RunSnapshot, read_run, system_clock
from data_designer.slurm.services.collect._merge_job import submit_merge_job
from data_designer.slurm.services.context import ServiceContext
from data_designer.slurm.services.runs import classify_observed, layout_of

if TYPE_CHECKING:  # runtime.merge loads pyarrow: imported when a merge runs, not with the services
    from data_designer.slurm.runtime.merge import Merged

_OPERATION = "merge"
_SHOWN = 10


def merge_run(
    run: str | Path,
    *,
    output: str | Path | None = None,
    allow_partial: bool = False,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    drop_provenance: bool = False,
    compact: bool = False,
    row_group_rows: int | None = None,
    as_job: bool = False,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
    rules: Rules | None = None,
) -> MergeResult:
    """Merge ``run`` here, in this process; with ``as_job``, submit the same merge as a one-task CPU job and return
    at once (``outcome="submitted"``; ``status`` shows the merge job's state, ``services.collect._merge_job``).
    The files are the parts spliced (their row groups as they are) unless ``compact``: then every row is re-encoded
    into row groups of ``row_group_rows`` (default ``DEFAULT_ROW_GROUP_ROWS``, or ``max_rows_per_file`` if
    smaller); the result's ``layout`` says which, with the row groups written.

    Errors: a row group size without ``compact``, below 1, above ``MAX_ROW_GROUP_ROWS`` or above
    ``max_rows_per_file`` (or ``max_rows_per_file`` below 1) exit 2, before the run is read; no such run exit 3; shards not succeeded (without ``allow_partial``), a part that fails its manifest,
    schema drift between shards exit 6 (nothing is written under a final name); a non-empty ``output`` exit 4.
    Slurm is asked (once) only to name the states of shards that are not succeeded.
    """
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock, rules=rules)
    from data_designer.slurm.runtime.merge import MergeOptions, RunIncomplete, check_options, merge_run_dir

    options = MergeOptions(
        output=Path(output).expanduser().absolute() if output is not None else None,
        allow_partial=allow_partial,
        max_rows_per_file=max_rows_per_file,
        provenance=not drop_provenance,
        compact=compact,
        row_group_rows=row_group_rows,
    )
    check_options(options)
    layout = layout_of(run, ctx)
    started = time.monotonic()
    if as_job:
        snapshot = read_run(layout, clock=clock)
        if not allow_partial and any(shard.missing for shard in snapshot.shards):
            raise _not_succeeded(snapshot, ctx.scheduler(), clock, rules)
        return submit_merge_job(
            snapshot, options, profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock
        )
    try:  # read, checked and let go before the files are written (the merge's memory does not grow with the run)
        merged = merge_run_dir(layout, options, clock=clock)
    except RunIncomplete as refused:  # the run as read names its shards' states: it is not read again
        raise _not_succeeded(refused.snapshot, ctx.scheduler(), clock, rules) from None
    return result_of(layout, merged, seconds=time.monotonic() - started)


def result_of(layout: RunLayout, merged: Merged, *, seconds: float = 0.0) -> MergeResult:
    manifest = merged.manifest
    return MergeResult(
        run_id=manifest.run_id,
        run_dir=str(layout.run_dir),
        outcome=merged.outcome,
        merge_dir=str(merged.directory),
        manifest=str(merged.directory / "manifest.json"),
        complete=manifest.complete,
        records=manifest.records,
        records_total=manifest.records_total,
        files=len(manifest.files),
        bytes=sum(item.bytes for item in manifest.files),
        missing=manifest.missing,
        missing_shards=manifest.missing_shards,
        parts_read=merged.parts_read,
        layout=manifest.layout,
        seconds=max(0.0, seconds),
    )


def _not_succeeded(
    snapshot: RunSnapshot, scheduler: SlurmScheduler, clock: Clock, rules: Rules | None
) -> CheckFailedError:
    """Exit 6 listing the shards that are not succeeded with their states (as ``status`` shows them now: the
    snapshot classified with one observation)."""
    status = classify_observed(snapshot, observe_run(snapshot, scheduler, clock=clock), clock(), rules)
    pending = [shard for shard in status.shards if shard.state != "succeeded"]
    shown = ", ".join(f"{s.shard} ({s.state}{', ' + s.reason if s.reason else ''})" for s in pending[:_SHOWN])
    more = f" and {len(pending) - _SHOWN} more" if len(pending) > _SHOWN else ""
    active = any(s.state in ("pending", "running", "unknown") for s in pending)
    hint = (
        "wait for them ('data-designer slurm wait RUN'), or merge what exists now with --allow-partial"
        if active
        else "retry them ('data-designer slurm retry RUN'), or merge what exists with --allow-partial"
    )
    return CheckFailedError(
        f"run {snapshot.run.run_id}: {len(pending)} of {len(status.shards)} shard(s) are not succeeded: {shown}{more}",
        code="run_incomplete",
        operation=_OPERATION,
        key_path=("--allow-partial",),
        hint=hint,
    )
