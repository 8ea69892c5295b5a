"""A merge's dataset profile: the host's profiler results over the merged records, kept beside the merge's manifest.

``<merge directory>/dataset-profile.json`` holds bytes the caller encodes (the Python client writes the host's
``DatasetProfilerResults`` as JSON, with the merge manifest's sha256 it was computed from). It is derived, never
evidence: write-once (temp file, fsync, ``link(2)``), so two processes profiling the same merge keep the first; a
missing, unreadable or oversized file reads as None and is computed again.
"""

from __future__ import annotations

from pathlib import Path

from data_designer.slurm.contracts import SlurmExtensionError
from data_designer.slurm.planner import modes_of_directory, read_bounded
from data_designer.slurm.runtime.store._record_io import publish_bytes_once

DATASET_PROFILE = "dataset-profile.json"
"""The profile's file name in a merge directory (``merge/NNNN/`` or a merge's ``--output``)."""
MAX_DATASET_PROFILE_BYTES = 64 * 1024 * 1024
"""A profile above this is not read (it is computed again): per-column statistics, never the records."""


def dataset_profile_file(merge_directory: Path) -> Path:
    """Where the dataset profile of the merge in ``merge_directory`` is kept."""
    return merge_directory / DATASET_PROFILE


def keep_dataset_profile(merge_directory: Path, data: bytes, *, operation: str) -> bool:
    """Write ``data`` as the merge's dataset profile, write-once; False when one is already kept there."""
    mode = modes_of_directory(merge_directory).file
    return publish_bytes_once(dataset_profile_file(merge_directory), data, operation=operation, mode=mode)


def read_dataset_profile(merge_directory: Path, *, operation: str) -> bytes | None:
    """The kept profile's bytes, or None when there is none or it cannot be read (a profile proves nothing)."""
    try:
        return read_bounded(dataset_profile_file(merge_directory), operation=operation, limit=MAX_DATASET_PROFILE_BYTES)
    except SlurmExtensionError:
        return None
