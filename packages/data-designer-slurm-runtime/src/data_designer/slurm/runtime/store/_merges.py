"""A run's merges as their records show them: numbered merge directories, their manifests and the merge jobs.

Pyarrow-free, so ``status`` can tell a merge's state without loading Arrow: ``merge/NNNN/manifest.json`` is the
proof that a merge finished (written last, write-once), ``merge/jobs/NNNN.json`` the merge jobs ``merge --as-job``
submitted. A directory without a valid manifest proves nothing. The verbs that write them: :func:`stage_merge`
(a hidden directory the merge fills, published whole with its manifest) and :func:`reserve_merge_job` /
:func:`record_merge_job`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from data_designer.slurm.contracts import ConflictError, UnavailableError
from data_designer.slurm.contracts.records import MERGE_JOB_SCHEMA, MERGE_MANIFEST_SCHEMA, MergeJobRecord, MergeManifest
from data_designer.slurm.planner import (
    FileModes,
    fsync_directory,
    make_directories,
    modes_of_directory,
    output_os_error,
)
from data_designer.slurm.runtime.store._layout import MANIFEST, RunLayout
from data_designer.slurm.runtime.store._record_io import (
    Clock,
    RecordOk,
    append_record,
    read_record,
    sequence_numbers,
    write_record_once,
)

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


@dataclass(frozen=True)
class MergeStage:
    """A merge being written: ``directory`` (hidden, next to its final place) takes its files, :meth:`publish`
    its manifest (last, write-once) and then its final name."""

    directory: Path
    base: Path
    numbered: bool

    def publish(self, manifest: MergeManifest, *, clock: Clock, operation: str) -> Path:
        """Write the manifest, then rename the directory to the next free ``NNNN`` under ``base`` (numbered), or to
        ``base`` itself (``--output``: absent or empty, checked before)."""
        write_record_once(self.directory / MANIFEST, MERGE_MANIFEST_SCHEMA, manifest, clock=clock, operation=operation)
        fsync_directory(self.directory)
        if not self.numbered:
            self._publish_at_base(operation)
            return self.base
        number = max(merge_numbers(self.base), default=0) + 1
        for _ in range(1000):
            final = self.base / f"{number:04d}"
            try:
                os.mkdir(final)  # claims the number (mkdir fails when another merge took it), then is replaced
            except FileExistsError:
                number += 1
                continue
            os.rename(self.directory, final)  # onto the empty directory just made: atomic
            fsync_directory(self.base)
            return final
        raise ConflictError(
            f"no free merge number under {str(self.base)!r}", code="merge_numbers_exhausted", file=str(self.base)
        )

    def _publish_at_base(self, operation: str) -> None:
        """Rename the directory to ``base`` (``--output``): absent, or empty as checked before. Another merge that
        published there first (or a file that appeared) is a :class:`ConflictError` ``output_exists``: the caller
        reuses the winner's merge when it holds the same evidence."""
        try:
            with contextlib.suppress(FileNotFoundError):  # another merge may have removed the empty one already
                if os.path.isdir(self.base) and not os.path.islink(self.base):
                    os.rmdir(self.base)  # empty (checked before): rename(2) would replace it anyway
            os.rename(self.directory, self.base)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise ConflictError(
                    f"--output {str(self.base)!r} was written by another process meanwhile",
                    code="output_exists",
                    operation=operation,
                    key_path=("--output",),
                    file=str(self.base),
                    hint="name a new or empty directory (a merge never writes over other files)",
                ) from exc
            raise output_os_error(exc, self.base, operation, ("--output",)) from exc
        fsync_directory(self.base.parent)


@contextmanager
def stage_merge(base: Path, *, numbered: bool, modes: FileModes) -> Iterator[MergeStage]:
    """A hidden ``.merge-<random>.tmp`` in ``base`` (numbered: a run's ``merge/``) or next to it (``--output``),
    made with ``modes`` (numbered: with a missing ``merge/``; ``--output``: its parent is never made); deleted unless
    it was published, so nothing half-written ever has a final name. An OS error making it is mapped as an output's
    (``planner.output_os_error``: a missing parent or an unwritable one exit 2)."""
    parent = base if numbered else base.parent
    temp = parent / f".merge-{secrets.token_hex(6)}.tmp"
    try:
        if numbered:
            make_directories(parent, modes)
        os.mkdir(temp, 0o700)  # never its parent: --output's is the user's to make
        os.chmod(temp, modes.directory)
    except OSError as exc:
        raise output_os_error(exc, base, "merge", None if numbered else ("--output",)) from exc
    try:
        yield MergeStage(temp, base, numbered)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def reserve_merge_job(layout: RunLayout) -> int:
    """Make ``merge/jobs/`` (Slurm opens the job's output files in it) and return the next merge job number."""
    jobs = merge_jobs_dir(layout)
    make_directories(jobs, modes_of_directory(layout.run_dir))
    return max(sequence_numbers(jobs), default=0) + 1


def merge_job_output_file(layout: RunLayout, job_name: str) -> Path:
    """Where Slurm writes the merge job's stdout."""
    return merge_jobs_dir(layout) / f"slurm-{job_name}.out"


def record_merge_job(layout: RunLayout, record: MergeJobRecord, *, clock: Clock, operation: str) -> None:
    """Append the record of a merge job Slurm accepted (``merge/jobs/NNNN.json``)."""
    append_record(merge_jobs_dir(layout), MERGE_JOB_SCHEMA, record, clock=clock, operation=operation)
