"""The runs of a workspace: every entry of ``<workspace>/runs/``, newest first, read from names alone.

``list_run_dirs`` lists ``runs/`` once and stats nothing but the entries' types: no record is read, so a caller
(``runs ls``) can pick the newest runs before reading any. The order is the run id's creation time (the stamp in
the name, the run record's ``created_at`` truncated to seconds), newest first, ties by the id. Hidden names are
skipped: writers' temporary files and run directories being removed (``.removing-<run id>-<random>``, renamed
away atomically before their tree is deleted). Anything else is listed, a name that is not a run id or an entry
that is not a plain directory with the reason it cannot be a run, so nothing under ``runs/`` is hidden.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from data_designer.slurm.contracts import NotFoundError, SlurmExtensionError, UnavailableError
from data_designer.slurm.runtime.store._layout import RUNS_DIR, RunId, RunLayout

REMOVING_PREFIX = ".removing-"
"""A run directory renamed away by ``runs rm`` before its tree is deleted (hidden: every reader skips it)."""
_OPERATION = "store.list_run_dirs"
_OLDEST = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class RunDirectory:
    """One entry of ``runs/``: its layout when the name is a run id and it is a plain directory, else why not."""

    name: str
    path: Path
    layout: RunLayout | None
    problem: str | None = None

    @property
    def created(self) -> datetime | None:
        return self.layout.run_id.created if self.layout is not None else None


def list_run_dirs(root: Path | str) -> tuple[RunDirectory, ...]:
    """Every visible entry of ``<root>/runs/``, newest first (no runs/ yet: none). UnavailableError
    ``filesystem_unavailable`` when ``runs/`` cannot be listed."""
    runs = Path(root) / RUNS_DIR
    found: list[RunDirectory] = []
    try:
        with os.scandir(runs) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                found.append(_entry(Path(root), runs, entry))
    except (FileNotFoundError, NotADirectoryError):
        return ()
    except OSError as exc:
        raise UnavailableError(
            f"cannot list the runs in {str(runs)!r}: {exc.strerror}",
            code="filesystem_unavailable",
            operation=_OPERATION,
            file=str(runs),
            hint="check that the profile's workspace_root is readable on this host",
        ) from exc
    found.sort(key=lambda item: (item.created or _OLDEST, item.name), reverse=True)
    return tuple(found)


def remove_run_dir(layout: RunLayout) -> None:
    """Rename the run directory to a hidden name in ``runs/`` (atomic: readers see it or nothing), then delete its
    tree. NotFoundError when it is gone already; UnavailableError when it cannot be renamed, or (``run_partly_removed``)
    when some of its entries could not be deleted."""
    hidden = layout.run_dir.parent / f"{REMOVING_PREFIX}{layout.run_id}-{secrets.token_hex(4)}"
    try:
        os.rename(layout.run_dir, hidden)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise NotFoundError(
                f"run {str(layout.run_id)!r} was removed meanwhile (no {str(layout.run_dir)!r})",
                code="run_not_found",
                file=str(layout.run_dir),
            ) from exc
        raise UnavailableError(
            f"cannot rename {str(layout.run_dir)!r} away for removal: {exc.strerror}",
            code="filesystem_unavailable",
            file=str(layout.run_dir),
            hint="check the permissions of the workspace's runs/ directory; nothing was removed",
        ) from exc
    failures: list[str] = []

    def record(_function: object, path: str, exc: object) -> None:
        failures.append(f"{path}: {exc[1] if isinstance(exc, tuple) else exc}")

    if sys.version_info >= (3, 12):
        shutil.rmtree(hidden, onexc=record)
    else:
        shutil.rmtree(hidden, onerror=record)
    if failures:
        raise UnavailableError(
            f"run {str(layout.run_id)!r} is gone from the listing, but {len(failures)} entr(ies) of {str(hidden)!r} "
            f"could not be deleted (first: {failures[0]})",
            code="run_partly_removed",
            file=str(hidden),
            hint=f"delete the hidden directory {str(hidden)!r} by hand (readers already skip it)",
        )


def _entry(root: Path, runs: Path, entry: os.DirEntry[str]) -> RunDirectory:
    path = runs / entry.name
    try:
        is_dir = entry.is_dir(follow_symlinks=False)
        is_link = not is_dir and entry.is_symlink()
    except OSError as exc:
        return RunDirectory(entry.name, path, None, f"cannot be inspected: {exc.strerror}")
    if not is_dir:
        kind = "a symbolic link" if is_link else "not a directory"
        return RunDirectory(entry.name, path, None, f"is {kind}, not a run directory")
    try:
        run_id = RunId.parse(entry.name)
    except SlurmExtensionError:
        return RunDirectory(entry.name, path, None, "is not named like a run id (<name>-<YYYYMMDDTHHMMSSZ>-<hex>)")
    return RunDirectory(entry.name, path, RunLayout(root, run_id))
