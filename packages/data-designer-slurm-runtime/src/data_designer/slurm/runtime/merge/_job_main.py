"""``python -m data_designer.slurm.runtime.merge --run-dir DIR``: the merge job's process (``merge --as-job``).

The same merge as ``merge`` in the foreground: the run read once (``store.read_run``), then
:func:`merge_run_dir`. It prints one JSON line (where the merge is, its records) and exits 0 when it merged or
found the same evidence merged; 6 when the merge was refused (``CheckFailedError``: records missing without
``--allow-partial``, a part failing its manifest, schema drift; the message on stderr, where Slurm's
``slurm-<job name>.err`` keeps it for ``status``); 1 on anything else. It imports nothing above the runtime.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from data_designer.slurm.contracts import (
    DEFAULT_MAX_ROWS_PER_FILE,
    CheckFailedError,
    SlurmExtensionError,
    format_key_path,
)
from data_designer.slurm.runtime.merge._merge import MergeOptions, merge_run_dir
from data_designer.slurm.runtime.store import RunLayout

MERGE_MODULE = "data_designer.slurm.runtime.merge"
EXIT_MERGED = 0
EXIT_FAILED = 1
EXIT_REFUSED = 6


def merge_job_argv(launcher: Sequence[str], run_dir: str, options: MergeOptions) -> tuple[str, ...]:
    """The words the merge job execs: the compute Python (``launcher``) running this module with ``options``."""
    words = [*launcher, "-m", MERGE_MODULE, "--run-dir", run_dir]
    if options.output is not None:
        words += ["--output", str(options.output)]
    if options.allow_partial:
        words.append("--allow-partial")
    words += ["--max-rows-per-file", str(options.max_rows_per_file)]
    if not options.provenance:
        words.append("--drop-provenance")
    if options.compact:
        words.append("--compact")
    if options.row_group_rows is not None:
        words += ["--row-group-rows", str(options.row_group_rows)]
    return tuple(words)


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(prog="python -m data_designer.slurm.runtime.merge", description=__doc__)
    parse.add_argument("--run-dir", required=True, type=Path, help="The run directory (<workspace>/runs/<run id>).")
    parse.add_argument("--output", type=Path, help="Write the merge here instead of <run>/merge/NNNN.")
    parse.add_argument("--allow-partial", action="store_true", help="Merge what exists; record the missing ranges.")
    parse.add_argument("--max-rows-per-file", type=int, default=DEFAULT_MAX_ROWS_PER_FILE, metavar="N")
    parse.add_argument("--drop-provenance", action="store_true", help="Leave out the provenance columns.")
    parse.add_argument("--compact", action="store_true", help="Re-encode into row groups of --row-group-rows rows.")
    parse.add_argument("--row-group-rows", type=int, metavar="N", help="--compact: rows per row group.")
    return parse


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    run_dir: Path = args.run_dir.absolute()
    if args.max_rows_per_file < 1:
        print(f"merge: --max-rows-per-file must be at least 1, got {args.max_rows_per_file}", file=sys.stderr)
        return EXIT_FAILED
    try:
        layout = RunLayout.of(run_dir.parent.parent, run_dir.name)
        options = MergeOptions(
            output=args.output.absolute() if args.output is not None else None,
            allow_partial=args.allow_partial,
            max_rows_per_file=args.max_rows_per_file,
            provenance=not args.drop_provenance,
            compact=args.compact,
            row_group_rows=args.row_group_rows,
        )
        merged = merge_run_dir(layout, options)
    except CheckFailedError as exc:
        print(f"merge refused: {exc.info.message}", file=sys.stderr)
        return EXIT_REFUSED
    except SlurmExtensionError as exc:  # an option no merge honours names its flag (``key_path``)
        where = f"{format_key_path(exc.info.key_path)}: " if exc.info.key_path else ""
        print(f"merge failed: {where}{exc.info.message}", file=sys.stderr)
        return EXIT_FAILED
    summary = {
        "outcome": merged.outcome,
        "merge_dir": str(merged.directory),
        "records": merged.manifest.records,
        "records_total": merged.manifest.records_total,
        "complete": merged.manifest.complete,
        "layout": None if merged.manifest.layout is None else merged.manifest.layout.model_dump(mode="json"),
    }
    print(json.dumps(summary, sort_keys=True))
    return EXIT_MERGED
