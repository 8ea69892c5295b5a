"""``load_dataset``: a run's records as one ``pandas.DataFrame``, for notebooks; every byte checked before it is read.

The source is the run's newest valid merge (``runtime.merge.latest_merge``: ``<run>/merge/NNNN`` with a valid
manifest), each of its files checked against the merge manifest (size, sha256, rows) before it is parsed. When the
run has no merge yet, the frame is made from the run's validated parts exactly as ``merge`` would write them:
``runtime.merge.merge_sources`` picks the rows (every shard's attempts over disjoint index ranges, in global index
order, the shards' schemas unified losslessly) and ``PartReader`` checks each part against its attempt's manifest.
Nothing is written. A run (or a merge) that lacks records is refused, exit 6 naming the shards, unless
``allow_partial``. pandas and pyarrow are imported when the function is called, never at import: pandas comes with
``data-designer`` (a hard dependency of it, so of ``data-designer[slurm]``).
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from data_designer.slurm.contracts import CheckFailedError, InvalidInputError, UnavailableError
from data_designer.slurm.contracts.records import PROVENANCE_COLUMNS, MergeFile, MergeManifest
from data_designer.slurm.runtime.store import (
    RunFileRefused,
    RunLayout,
    find_latest_merge,
    plain_part_name,
    read_run,
    read_run_file,
    read_run_record,
)
from data_designer.slurm.services.runs import locate_run

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in the workspace: DataFrame is Any
    import pyarrow as pa

_OPERATION = "load_dataset"
_SHOWN = 10


def load_dataset(
    run: str | Path,
    *,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    columns: Sequence[str] | None = None,
    provenance: bool = True,
    allow_partial: bool = False,
) -> pd.DataFrame:
    """The records of ``run`` (a run id or a run directory) in global index order.

    ``columns`` picks data columns (default: all); ``provenance`` adds ``_dd_index``, ``_dd_run_id``, ... (a merge
    written with ``--drop-provenance`` serves only ``provenance=False``). Errors: no such run exit 3; an unknown
    column, or provenance asked of a merge without it, exit 2; records missing (without ``allow_partial``), a
    file or part that fails its manifest, schema drift between shards exit 6.
    """
    layout = locate_run(run, profile=profile, cluster=cluster, environ=environ)
    record = read_run_record(layout)  # NotFoundError (exit 3) for a run that is not there
    found = find_latest_merge(layout.merge_dir)
    latest = None if found is None else (found.directory, found.manifest)
    if latest is None:
        table = _from_parts(layout, allow_partial=allow_partial)
    elif latest[1].run_id != record.run_id or latest[1].plan_digest != record.plan_digest:
        raise CheckFailedError(
            f"{str(latest[0] / 'manifest.json')!r} is a merge of run {latest[1].run_id}, not of {record.run_id}",
            code="merge_of_another_run",
            operation=_OPERATION,
            file=str(latest[0] / "manifest.json"),
            hint="move that merge directory out of the run (it was copied in), or merge the run again",
        )
    else:
        table = _from_merge(layout, *latest, provenance=provenance, allow_partial=allow_partial)
    table = table.select(_wanted(table.column_names, columns, provenance=provenance))
    frame: pd.DataFrame = table.to_pandas()
    return frame


def _from_merge(
    layout: RunLayout, directory: Path, manifest: MergeManifest, *, provenance: bool, allow_partial: bool
) -> pa.Table:
    name = str(directory.relative_to(layout.run_dir))
    if not manifest.complete and not allow_partial:
        raise _incomplete(
            f"run {manifest.run_id}: its newest merge {name} is partial: {_missing(manifest.missing_shards)}",
            hint="merge again once the shards succeeded ('data-designer slurm merge RUN'), or pass "
            "allow_partial=True to load what the merge holds",
        )
    if provenance and not manifest.provenance:
        raise InvalidInputError(
            f"run {manifest.run_id}: its newest merge {name} was written with --drop-provenance",
            code="provenance_dropped",
            operation=_OPERATION,
            key_path=("provenance",),
            file=str(directory / "manifest.json"),
            hint="pass provenance=False, or merge again without --drop-provenance",
        )
    import pyarrow as pa

    pq: Any = importlib.import_module("pyarrow.parquet")  # untyped
    tables = [pq.read_table(pa.BufferReader(_checked_file(directory, item))) for item in manifest.files]
    for item, table in zip(manifest.files, tables, strict=True):
        if table.num_rows != item.records:
            raise _bad_file(directory, item, f"it holds {table.num_rows} rows, the merge manifest says {item.records}")
    return pa.concat_tables(tables)


def _checked_file(directory: Path, item: MergeFile) -> bytes:
    """The file's bytes, whose size and sha256 are the merge manifest's."""
    if not plain_part_name(item.path):
        raise _bad_file(directory, item, "its merge manifest names it by a path, not one plain name in the merge")
    path = directory / item.path
    try:
        data = read_run_file(path, item.bytes)  # one byte more than announced proves it grew
    except FileNotFoundError as exc:
        raise _bad_file(directory, item, "it is missing") from exc
    except RunFileRefused as exc:
        raise _bad_file(directory, item, f"it is {exc.kind}, not a regular file") from exc
    except OSError as exc:
        raise UnavailableError(
            f"cannot read {str(path)!r}: {exc.strerror}", code="filesystem_unavailable", file=str(path)
        ) from exc
    if len(data) != item.bytes:
        size = f"more than {item.bytes}" if len(data) > item.bytes else str(len(data))
        raise _bad_file(directory, item, f"it has {size} bytes, the merge manifest says {item.bytes}")
    if hashlib.sha256(data).hexdigest() != item.sha256:
        raise _bad_file(directory, item, "its sha256 is not the merge manifest's (the bytes changed after the merge)")
    return data


def _from_parts(layout: RunLayout, *, allow_partial: bool) -> pa.Table:
    """The rows a merge would write now, read through the merge's own sources and part checks."""
    import pyarrow as pa

    snapshot = read_run(layout)
    from data_designer.slurm.runtime.merge import PartReader, merge_sources  # pyarrow: only when it reads

    sources = merge_sources(snapshot)  # schema drift: CheckFailedError (exit 6) naming column and shards
    if sources.missing and not allow_partial:
        raise _incomplete(
            f"run {snapshot.run.run_id} has no merge and is missing records: {_missing(sources.missing_shards)}",
            hint="retry them ('data-designer slurm retry RUN') or wait for them, or pass allow_partial=True to load "
            "what the shards published",
        )
    if not sources.slices:
        raise CheckFailedError(
            f"run {snapshot.run.run_id} has no published record to load",
            code="nothing_to_merge",
            operation=_OPERATION,
            hint="'data-designer slurm status RUN' shows why no shard published anything",
        )
    reader = PartReader(layout.run_dir, run_id=snapshot.run.run_id, plan_digest=snapshot.plan.digest)
    names = [column.name for column in sources.columns]
    tables = [reader.rows(item).select(names) for item in sources.slices]
    # merge_sources refused every drift but a column that is null in some shards: "default" promotion is exactly
    # that (null -> the other type) and refuses anything else, as the merge writer's cast does.
    schema = pa.unify_schemas([table.schema for table in tables], promote_options="default")
    return pa.concat_tables([table.cast(schema) for table in tables])


def _wanted(names: list[str], columns: Sequence[str] | None, *, provenance: bool) -> list[str]:
    data = [name for name in names if name not in PROVENANCE_COLUMNS]
    if columns is None:
        picked = data
    else:
        if isinstance(columns, str):
            columns = [columns]
        if unknown := [name for name in columns if name not in names]:
            raise InvalidInputError(
                f"the run has no column {', '.join(map(repr, unknown))} (it has {', '.join(map(repr, data))})",
                code="unknown_column",
                operation=_OPERATION,
                key_path=("columns",),
                hint="name columns of the run's Data Designer config, or pass columns=None for all",
            )
        picked = list(dict.fromkeys(columns))
    extra = [name for name in PROVENANCE_COLUMNS if provenance and name in names and name not in picked]
    return picked + extra


def _missing(shards: tuple[int, ...]) -> str:
    shown = ", ".join(map(str, shards[:_SHOWN]))
    more = f" (+{len(shards) - _SHOWN} more)" if len(shards) > _SHOWN else ""
    return f"records of shard(s) {shown}{more} are missing"


def _incomplete(message: str, *, hint: str) -> CheckFailedError:
    return CheckFailedError(
        message, code="run_incomplete", operation=_OPERATION, key_path=("allow_partial",), hint=hint
    )


def _bad_file(directory: Path, item: MergeFile, why: str) -> CheckFailedError:
    return CheckFailedError(
        f"merge {directory.name}: file {item.path} cannot be loaded: {why}",
        code="merge_file_invalid",
        operation=_OPERATION,
        file=str(directory / item.path),
        hint="merge the run again ('data-designer slurm merge RUN --output DIR' writes a new copy from the parts)",
    )
