"""The local files of a run's seed dataset: found, checked and mapped to their snapshot paths (one check for
``execute`` and its dry run)."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from data_designer.slurm.contracts import (
    MAX_SEED_FILE_BYTES,
    InvalidInputError,
    NotFoundError,
    RunSpec,
    describe_bytes,
    format_key_path,
)
from data_designer.slurm.contracts.records import SeedRewrite
from data_designer.slurm.planner import read_dd_config, resolve_config

SEED_TYPES_WITH_FILES = frozenset({"local", "directory", "file_contents"})
SEED_TOO_LARGE = "split the seed dataset into several files and name them with a directory or a glob"
GLOB_CHARS = frozenset("*?[")


def seed_files(
    run: RunSpec, config_text: str | None, *, operation: str
) -> tuple[SeedRewrite, list[tuple[Path, str]]] | None:
    """The seed dataset's files (absolute path, snapshot path under ``inputs/seed``) and its rewrite, if local.

    Exit 3 when the seed names no files, exit 2 for a file above the size cap: the same check for ``execute``
    (before its run directory is made) and its dry run."""
    seed = read_dd_config(resolve_config(run, config_text), operation=operation).seed_dataset
    if seed is None or seed.path is None or seed.seed_type not in SEED_TYPES_WITH_FILES:
        return None
    key_path = (*seed.key_path, "source", "path")
    original = Path(seed.path).expanduser().absolute()
    parts = original.parts
    magic = next((i for i, part in enumerate(parts) if GLOB_CHARS & set(part)), None)
    tail: tuple[str, ...] = ()
    if magic is None:
        root = original
        matches = sorted(p for p in original.rglob("*") if p.is_file()) if original.is_dir() else [original]
    else:
        root, tail = Path(*parts[:magic]), parts[magic:]
        matches = sorted(Path(p) for p in glob.glob(str(original), recursive=True) if os.path.isfile(p))
    matches = [
        p for p in matches if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]
    if not matches:
        raise NotFoundError(
            f"the seed dataset {seed.path!r} names no files",
            code="file_not_found",
            operation=operation,
            file=str(original),
            key_path=key_path,
            line=seed.line,
            hint="fix seed_config.source.path: the run's inputs are snapshotted when it is submitted",
        )
    for match in matches:  # before the run directory is made: each file is read whole to be snapshotted
        size = match.stat().st_size
        if size > MAX_SEED_FILE_BYTES:
            raise InvalidInputError(
                f"seed file {str(match)!r} is {describe_bytes(size)}, above the limit of "
                f"{describe_bytes(MAX_SEED_FILE_BYTES)} per file",
                code="file_too_large",
                operation=operation,
                file=str(match),
                key_path=key_path,
                line=seed.line,
                hint=SEED_TOO_LARGE,
            )
    base = ("inputs", "seed", root.name or "root")
    files = [(p, "/".join((*base, *p.relative_to(root).parts)) if p != root else "/".join(base)) for p in matches]
    rewrite = SeedRewrite(key_path=format_key_path(key_path), original=seed.path, snapshot="/".join((*base, *tail)))
    return rewrite, files
