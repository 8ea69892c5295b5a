"""A run's merges as their records show them: numbered merge directories, their manifests and the merge jobs.

Pyarrow-free, so ``status`` can tell a merge's state without loading Arrow: ``merge/NNNN/manifest.json`` is the
proof that a merge finished (written last, write-once), ``merge/jobs/NNNN.json`` the merge jobs ``merge --as-job``
submitted. A directory without a valid manifest proves nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from data_designer.slurm.contracts import UnavailableError
from data_designer.slurm.contracts.records import MERGE_MANIFEST_SCHEMA, MergeJobRecord, MergeManifest
from data_designer.slurm.runtime.store._layout import MANIFEST, RunLayout
from data_designer.slurm.runtime.store._record_io import RecordOk, read_record

MERGE_JOBS_DIR = "jobs"
"""``<run>/merge/jobs/``: the merge job records and Slurm's stdout and stderr of each merge job."""


@dataclass(frozen=True)
class MergeFound:
    """A merge whose manifest reads valid: where it is, what it holds, when the manifest was written."""

    directory: Path
    manifest: MergeManifest
    written_at: datetime | None


@dataclass(frozen=True)
class MergeJobSnapshot:
    """One ``merge/jobs/NNNN.json`` record and when it was written."""

    record: MergeJobRecord
    written_at: datetime | None
    last_error_line: str | None = None
    """The last line of Slurm's stderr of the job (``slurm-<job name>.err``), read only for the newest job and only
    while no merge manifest newer than its record exists."""


def merge_job_error_file(layout: RunLayout, job_name: str) -> Path:
    """Where Slurm writes the merge job's stderr (its stdout: the same name with ``.out``)."""
    return merge_jobs_dir(layout) / f"slurm-{job_name}.err"


def merge_jobs_dir(layout: RunLayout) -> Path:
    return layout.merge_dir / MERGE_JOBS_DIR


def merge_numbers(merge_dir: Path) -> list[int]:
    """The numbered merges under ``<run>/merge`` (``NNNN``), ascending; hidden and other names skipped."""
    try:
        names = os.listdir(merge_dir)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UnavailableError(
            f"cannot list {str(merge_dir)!r}: {exc.strerror}", code="filesystem_unavailable", file=str(merge_dir)
        ) from exc
    return sorted(int(name) for name in names if name.isascii() and name.isdigit() and len(name) >= 4)


def read_merge(directory: Path) -> MergeFound | None:
    """The merge in ``directory`` when its manifest reads valid, else None."""
    found = read_record(directory / MANIFEST, MERGE_MANIFEST_SCHEMA)
    if isinstance(found, RecordOk):
        return MergeFound(directory, found.payload, found.written_at)
    return None


def find_latest_merge(merge_dir: Path) -> MergeFound | None:
    """The newest numbered merge whose manifest reads valid."""
    for number in reversed(merge_numbers(merge_dir)):
        found = read_merge(merge_dir / f"{number:04d}")
        if found is not None:
            return found
    return None
