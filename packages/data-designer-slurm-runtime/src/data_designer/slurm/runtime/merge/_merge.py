"""One merge of a run snapshot into a directory of Parquet files and a merge manifest, published atomically.

The files and the manifest are written into a hidden directory next to the target (``store.stage_merge``); the
manifest is written last (write-once), then the directory is renamed to its final name: ``<run>/merge/NNNN`` (the next free
number) or ``--output``. So a crash, a refused part or a schema drift never leaves anything under a final name,
and a reader that finds a final merge directory finds it whole. The same evidence (``source_digest``: every
source part's sha256 and slice, and the options) is merged once: a later merge finds the manifest and reuses it.

The layout is the splice (the parts' row groups as they are) unless ``compact``: then every row is re-encoded into
row groups of ``row_group_rows`` (default ``DEFAULT_ROW_GROUP_ROWS``), streamed through ``MergeWriter``. The
manifest's ``layout`` says which it was and the row groups written; a reused merge has the layout requested (the
digest covers ``compact`` and the row group size, and the manifest's layout is checked too).
"""

from __future__ import annotations

import hashlib
import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

from data_designer.slurm.contracts import (
    DEFAULT_MAX_ROWS_PER_FILE,
    DEFAULT_ROW_GROUP_ROWS,
    MAX_ROW_GROUP_ROWS,
    CheckFailedError,
    ConflictError,
    InvalidInputError,
    MergeLayout,
    MergeLayoutKind,
    PartDamage,
)
from data_designer.slurm.contracts import __version__ as runtime_version
from data_designer.slurm.contracts.records import (
    PROVENANCE_COLUMNS,
    MergeFile,
    MergeManifest,
    MergeSource,
)
from data_designer.slurm.planner import canonical_json, check_output_location
from data_designer.slurm.runtime.merge._compact import CompactWriter
from data_designer.slurm.runtime.merge._footer import FooterScan
from data_designer.slurm.runtime.merge._parts import PartBytes, PartReader
from data_designer.slurm.runtime.merge._sources import NULL_TYPE, MergeSources, merge_sources
from data_designer.slurm.runtime.merge._splice import SpliceMismatch, SpliceWriter
from data_designer.slurm.runtime.merge._writer import MergeWriter
from data_designer.slurm.runtime.store import (
    Clock,
    FileModes,
    RunLayout,
    RunSnapshot,
    find_latest_merge,
    modes_of_directory,
    read_merge,
    read_run,
    stage_merge,
    system_clock,
)

pq: Any = importlib.import_module("pyarrow.parquet")
_OPERATION = "merge"
_KEY = ("--output",)


@dataclass(frozen=True)
class MergeOptions:
    output: Path | None = None
    """Write the merge here instead of ``<run>/merge/NNNN`` (a directory that does not exist, or is empty)."""
    allow_partial: bool = False
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE
    provenance: bool = True
    compact: bool = False
    """Re-encode every row into row groups of :attr:`group_rows` rows instead of splicing the parts."""
    row_group_rows: int | None = None
    """``compact``: rows per row group (None: ``DEFAULT_ROW_GROUP_ROWS``, or ``max_rows_per_file`` if smaller)."""

    @property
    def group_rows(self) -> int | None:
        """The rows per row group a compacting merge writes (None: not compacting)."""
        if not self.compact:
            return None
        if self.row_group_rows is not None:
            return self.row_group_rows
        return min(DEFAULT_ROW_GROUP_ROWS, self.max_rows_per_file)


def check_options(options: MergeOptions) -> None:
    """Refuse options no merge can honour (InvalidInputError, exit 2, ``key_path`` the flag), before anything is
    read: a file size below 1, a row group size without ``--compact``, below 1, above ``MAX_ROW_GROUP_ROWS`` or
    above the file size."""
    if options.max_rows_per_file < 1:
        raise _bad_option(
            "--max-rows-per-file", f"must be at least 1, got {options.max_rows_per_file}", "--max-rows-per-file N >= 1"
        )
    rows = options.row_group_rows
    if rows is None:
        return
    if not options.compact:
        raise _bad_option(
            "--row-group-rows",
            "only a compacting merge has a row group size",
            "add --compact, or leave --row-group-rows out",
        )
    if rows < 1:
        raise _bad_option("--row-group-rows", f"must be at least 1, got {rows}", "--row-group-rows N >= 1")
    if rows > MAX_ROW_GROUP_ROWS:
        raise _bad_option(
            "--row-group-rows",
            f"at most {MAX_ROW_GROUP_ROWS:,} rows (a compacting merge holds about three row groups in memory), "
            f"got {rows:,}",
            f"--row-group-rows N <= {MAX_ROW_GROUP_ROWS}, or leave it out for {DEFAULT_ROW_GROUP_ROWS}",
        )
    if rows > options.max_rows_per_file:
        raise _bad_option(
            "--row-group-rows",
            f"{rows:,} is more than --max-rows-per-file {options.max_rows_per_file:,} (a row group never spans two "
            "files)",
            f"--row-group-rows N <= {options.max_rows_per_file}, or raise --max-rows-per-file",
        )


def _bad_option(flag: str, problem: str, fix: str) -> InvalidInputError:
    return InvalidInputError(problem, code="invalid_merge_layout", operation=_OPERATION, key_path=(flag,), hint=fix)


@dataclass(frozen=True)
class Merged:
    manifest: MergeManifest
    directory: Path
    outcome: Literal["merged", "reused"]
    parts_read: int
    bytes_read: int


@dataclass(frozen=True)
class _Run:
    """What a merge needs of its run besides the sources (the snapshot itself can then be let go)."""

    layout: RunLayout
    run_id: str
    plan_digest: str


class RunIncomplete(CheckFailedError):
    """Records of the run are missing and ``allow_partial`` was not given (exit 6); ``snapshot`` is the run as it
    was read, so a caller names each shard's state without reading it again."""

    default_code = "run_incomplete"

    def __init__(self, snapshot: RunSnapshot, sources: MergeSources) -> None:
        super().__init__(
            f"run {snapshot.run.run_id} is missing records of shard(s) {_list(sources.missing_shards)}",
            operation=_OPERATION,
            hint="retry them ('data-designer slurm retry RUN'), or merge what exists with --allow-partial",
        )
        self.snapshot = snapshot


def damaged_part(run_id: str, damage: PartDamage, *, more: int = 0) -> CheckFailedError:
    """A part that is not what its manifest says (exit 6, ``part_invalid``), with the retry that regenerates it."""
    others = f" ({more} more damaged part(s): 'data-designer slurm status RUN' lists them)" if more else ""
    return CheckFailedError(
        f"shard {damage.shard} attempt {damage.attempt}: part {damage.path} cannot be merged: {damage.detail}{others}",
        code="part_invalid",
        operation=_OPERATION,
        file=damage.path,
        hint=retry_hint(run_id, damage.shard),
    )


def retry_hint(run_id: str, shard: int) -> str:
    return (
        f"run 'data-designer slurm retry {run_id} --shard {shard}': it sets the damaged part aside (never deletes "
        "it) and generates exactly its records again; or merge the rest with --allow-partial. Nothing was written "
        "under the merge's final name"
    )


def merge_snapshot(snapshot: RunSnapshot, options: MergeOptions, *, clock: Clock = system_clock) -> Merged:
    """Merge what the snapshot's valid manifests cover. Refuses options no merge honours (:func:`check_options`,
    exit 2), missing records unless ``allow_partial`` (:class:`RunIncomplete`) and any part that fails its manifest
    (CheckFailedError, exit 6)."""
    check_options(options)
    return _merge(*_checked(snapshot, options), options, clock)


def merge_run_dir(layout: RunLayout, options: MergeOptions, *, clock: Clock = system_clock) -> Merged:
    """Read the run (``store.read_run``) and merge it as :func:`merge_snapshot` does, holding only the sources while
    the files are written: the snapshot is let go first, so the merge's memory does not grow with what the run's
    reader keeps of every shard."""
    check_options(options)
    return _merge(*_checked(read_run(layout, clock=clock), options), options, clock)


def _checked(snapshot: RunSnapshot, options: MergeOptions) -> tuple[_Run, MergeSources]:
    damaged = [item for shard in snapshot.shards for item in shard.damaged]
    if damaged and not options.allow_partial:
        raise damaged_part(snapshot.run.run_id, damaged[0], more=len(damaged) - 1)
    sources = merge_sources(snapshot)
    if sources.missing and not options.allow_partial:
        raise RunIncomplete(snapshot, sources)
    return _Run(snapshot.layout, snapshot.run.run_id, snapshot.plan.digest), sources


def _merge(run: _Run, sources: MergeSources, options: MergeOptions, clock: Clock) -> Merged:
    if not sources.slices:
        raise CheckFailedError(
            f"run {run.run_id} has no published record to merge",
            code="nothing_to_merge",
            operation=_OPERATION,
            hint="'data-designer slurm status RUN' shows why no shard published anything",
        )
    digest = source_digest(sources, options)
    base = run.layout.merge_dir if options.output is None else options.output
    if options.output is not None:  # no link, an existing parent, a name the file system takes: before anything
        check_output_location(options.output, force=True, operation=_OPERATION, key_path=_KEY, directory_ok=True)
    reused = _existing(base, digest, options, numbered=options.output is None)
    if reused is not None:
        return Merged(reused[1], reused[0], "reused", 0, 0)
    if options.output is not None:
        _check_output(options.output)
    try:
        return _write(run, sources, options, clock, base, digest)
    except ConflictError as taken:  # another merge published at --output first: its merge, if the same, is ours
        if options.output is None or taken.info.code != "output_exists":
            raise
        reused = _existing(base, digest, options, numbered=False)
        if reused is None:
            raise
        return Merged(reused[1], reused[0], "reused", 0, 0)


def _write(run: _Run, sources: MergeSources, options: MergeOptions, clock: Clock, base: Path, digest: str) -> Merged:
    modes = modes_of_directory(run.layout.run_dir)
    reader = PartReader(run.layout.run_dir, run_id=run.run_id, plan_digest=run.plan_digest)
    with stage_merge(base, numbered=options.output is None, modes=modes) as stage:
        kind, files, group_rows = _write_files(stage.directory, run.layout, sources, options, reader, modes)
        manifest = MergeManifest(
            run_id=run.run_id,
            plan_digest=run.plan_digest,
            source_digest=digest,
            complete=not sources.missing,
            records=sources.records,
            records_total=sources.records_total,
            ranges=sources.covered,
            missing=sources.missing,
            missing_shards=sources.missing_shards,
            columns=tuple(c for c in sources.columns if options.provenance or c.name not in PROVENANCE_COLUMNS),
            provenance=options.provenance,
            max_rows_per_file=options.max_rows_per_file,
            files=_with_row_groups(files, group_rows),
            sources=tuple(
                MergeSource(shard=s.shard, attempt=s.attempt, path=s.path, sha256=s.part.sha256, range=s.take)
                for s in sources.slices
            ),
            runtime_version=runtime_version,
            layout=_layout(kind, options, group_rows),
        )
        final = stage.publish(manifest, clock=clock, operation=_OPERATION)
    return Merged(manifest, final, "merged", reader.parts_read, reader.bytes_read)


def splices(sources: MergeSources, options: MergeOptions) -> bool:
    """Whether the merge can copy the parts' pages as they are: every part taken whole, in the unified schema, with
    the provenance columns kept, none larger than a file may be; never for ``compact``."""
    return (
        options.provenance
        and not options.compact
        and all(
            item.offset == 0
            and item.take.records == item.part.records
            and item.part.records <= options.max_rows_per_file
            and item.columns == sources.columns
            for item in sources.slices
        )
    )


def _write_files(
    temp: Path,
    layout: RunLayout,
    sources: MergeSources,
    options: MergeOptions,
    reader: PartReader,
    modes: FileModes,
) -> tuple[MergeLayoutKind, list[MergeFile], list[int]]:
    """The merge's files in ``temp``: spliced when :func:`splices` allows it, else decoded and re-encoded (into
    row groups of ``group_rows`` when compacting); how, the files, and the rows of every row group in order."""
    if splices(sources, options):
        splicer = SpliceWriter(temp, max_rows_per_file=options.max_rows_per_file, modes=modes)
        spliced: list[int] = []
        try:
            for item in sources.slices:
                data, footer = reader.whole(item)
                splicer.add(data, footer, rows=item.part.records, first_index=item.take.start)
                spliced += _part_row_groups(data, footer, item.part.records)
            return "spliced", splicer.close(), spliced
        except SpliceMismatch:
            splicer.abort()
            for leftover in temp.iterdir():  # the parts' schemas differ after all: encode them instead
                leftover.unlink()
            reader.parts_read = reader.bytes_read = 0
        except BaseException:
            splicer.abort()
            raise
    schema = _arrow_schema(layout, sources)
    group_rows = options.group_rows
    writer = (
        CompactWriter(
            temp,
            schema,
            max_rows_per_file=options.max_rows_per_file,
            provenance=options.provenance,
            modes=modes,
            row_group_rows=group_rows,
        )
        if options.compact and group_rows is not None
        else MergeWriter(
            temp,
            schema,
            max_rows_per_file=options.max_rows_per_file,
            provenance=options.provenance,
            modes=modes,
            row_group_rows=group_rows,
        )
    )
    try:
        for item in sources.slices:
            writer.write(reader.rows(item), item.take.start)
        files = writer.close()
        return ("compacted" if options.compact else "encoded"), files, writer.row_group_sizes
    except BaseException:
        writer.abort()
        raise


def source_digest(sources: MergeSources, options: MergeOptions) -> str:
    """The identity of the evidence merged and of the options that shape the files."""
    document = {
        "sources": [[s.shard, s.attempt, s.path, s.part.sha256, s.take.start, s.take.stop] for s in sources.slices],
        "columns": [[c.name, c.type] for c in sources.columns],
        "provenance": options.provenance,
        "max_rows_per_file": options.max_rows_per_file,
    }
    if options.compact:  # only then: a default merge's digest is the one it had before layouts were recorded
        document["compact"] = {"row_group_rows": options.group_rows}
    return hashlib.sha256(canonical_json(document)).hexdigest()


def latest_merge(merge_dir: Path) -> tuple[Path, MergeManifest] | None:
    """The newest numbered merge whose manifest reads valid (a directory without one proves nothing)."""
    found = find_latest_merge(merge_dir)
    return None if found is None else (found.directory, found.manifest)


def _existing(base: Path, digest: str, options: MergeOptions, *, numbered: bool) -> tuple[Path, MergeManifest] | None:
    found = find_latest_merge(base) if numbered else read_merge(base)
    if found is not None and found.manifest.source_digest == digest and layout_matches(found.manifest, options):
        return found.directory, found.manifest
    return None


def layout_matches(manifest: MergeManifest, options: MergeOptions) -> bool:
    """Whether a merge's files have the layout ``options`` ask for: compacted into ``group_rows`` row groups for a
    ``compact`` request, not compacted otherwise (a manifest from before layouts were recorded was not)."""
    compacted = manifest.layout is not None and manifest.layout.kind == "compacted"
    if not options.compact:
        return not compacted
    return compacted and manifest.layout is not None and manifest.layout.row_group_rows == options.group_rows


def _part_row_groups(data: PartBytes, footer: FooterScan, records: int) -> list[int]:
    """The rows of each row group of a spliced part: its records when it has one (the worker writes one per part),
    else read from its verified bytes' footer."""
    if footer.groups <= 1:
        return [records] if footer.groups else []
    metadata = pq.ParquetFile(pa.BufferReader(pa.py_buffer(data))).metadata
    return [metadata.row_group(k).num_rows for k in range(metadata.num_row_groups)]


def _with_row_groups(files: list[MergeFile], group_rows: list[int]) -> tuple[MergeFile, ...]:
    """``files`` with their row group counts: the groups, in order, fill the files in order (none spans two)."""
    counted: list[MergeFile] = []
    groups = iter(group_rows)
    for file in files:
        rows = count = 0
        while rows < file.records:
            rows += next(groups)
            count += 1
        counted.append(file.model_copy(update={"row_groups": count}))
    return tuple(counted)


def _layout(kind: MergeLayoutKind, options: MergeOptions, group_rows: list[int]) -> MergeLayout:
    return MergeLayout(
        kind=kind,
        row_group_rows=options.group_rows,
        row_groups=len(group_rows),
        min_row_group_rows=min(group_rows, default=0),
        max_row_group_rows=max(group_rows, default=0),
    )


def _check_output(output: Path) -> None:
    try:
        entries = os.listdir(output)
    except FileNotFoundError:
        return
    except NotADirectoryError as exc:
        raise ConflictError(
            f"--output {str(output)!r} is a file", code="output_exists", operation=_OPERATION, key_path=("--output",)
        ) from exc
    if entries:
        raise ConflictError(
            f"--output {str(output)!r} is not empty and holds no merge of this evidence",
            code="output_exists",
            operation=_OPERATION,
            key_path=("--output",),
            file=str(output),
            hint="name a new or empty directory (a merge never writes over other files)",
        )


def _arrow_schema(layout: RunLayout, sources: MergeSources) -> pa.Schema:
    """The unified schema with Arrow types, read from the footers of one part per contributing attempt."""
    wanted = {column.name: column.type for column in sources.columns}
    types: dict[str, pa.DataType] = {}
    seen: set[tuple[int, int]] = set()
    for item in sources.slices:
        if (item.shard, item.attempt) in seen:
            continue
        seen.add((item.shard, item.attempt))
        try:
            schema = pq.read_schema(layout.run_dir / item.path)
        except (pa.ArrowException, OSError) as exc:
            raise CheckFailedError(
                f"shard {item.shard} attempt {item.attempt}: part {item.path} cannot be merged: {exc}",
                code="part_invalid",
                operation=_OPERATION,
                file=item.path,
            ) from exc
        for field in schema:
            if field.name in wanted and str(field.type) == wanted[field.name] and field.name not in types:
                types[field.name] = field.type
        if len(types) == len(wanted):
            break
    fields = [
        pa.field(name, types.get(name, pa.null())) for name in wanted if wanted[name] == NULL_TYPE or name in types
    ]
    if len(fields) != len(wanted):
        absent = [name for name in wanted if name not in {f.name for f in fields}]
        raise CheckFailedError(
            f"the parts' footers do not show the manifests' types of {', '.join(absent)}",
            code="part_invalid",
            operation=_OPERATION,
        )
    return pa.schema(fields)


def _list(shards: tuple[int, ...]) -> str:
    shown = ", ".join(map(str, shards[:10]))
    return shown + (f" (+{len(shards) - 10} more)" if len(shards) > 10 else "")
