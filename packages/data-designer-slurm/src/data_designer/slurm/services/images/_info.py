"""``image ls`` and ``image info NAME``: the registry's current images, and one image checked now.

``list_images`` reads the records only: no byte of an image and no ``stat`` of its file, so a listing of many
images on a slow shared filesystem stays quick; ``image info`` is what checks one. It re-checks the bytes by file
identity: one ``stat`` when the identity is the one the image was hashed with (``identity_unchanged``); when it
changed, the file is hashed once (``runtime.images.cached_digest``, which caches the new identity) and is ``ready``
only when the sha256 is the registered one (``rehashed_equal``), else ``changed``. A registry reference's state
comes from its import job's scheduler evidence (``services.images._import.import_state``), never assumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from data_designer.slurm.contracts import ImageInfo, ImageList, ImageSummary
from data_designer.slurm.contracts.records import ImageEntry
from data_designer.slurm.runtime.images import ImageHistory
from data_designer.slurm.runtime.scheduler import CommandRunner
from data_designer.slurm.runtime.store import Clock, system_clock
from data_designer.slurm.services.images._import import import_state
from data_designer.slurm.services.images._workspace import check_file, current_entry, open_workspace

_OPERATION = "image.info"


def list_images(
    *, profile: str | Path | None = None, cluster: str | None = None, environ: Mapping[str, str] | None = None
) -> ImageList:
    """Every name of the workspace's registry with a current image, sorted; names removed by a tombstone are
    counted, not listed. Errors: the profile's (exit 2/3), a registry that cannot be listed (exit 5)."""
    _, workspace = open_workspace(profile, cluster, environ)
    registry = workspace.registry
    images: list[ImageSummary] = []
    removed = 0
    for name in registry.names():
        history = registry.history(name)
        entry = history.current
        if entry is None:
            removed += 1 if history.entries else 0
            continue
        images.append(_summary(entry, history))
    return ImageList(workspace=str(registry.root), cluster=workspace.cluster, images=tuple(images), removed=removed)


def _summary(entry: ImageEntry, history: ImageHistory) -> ImageSummary:
    inspection = entry.inspection
    return ImageSummary(
        name=entry.name,
        generation=entry.generation,
        role=entry.role,
        format=entry.format,
        source_kind=entry.source_kind,
        path=entry.path,
        size=entry.size,
        sha256=entry.sha256,
        python=inspection.python if inspection is not None else None,
        versions={found.distribution: found.version for found in inspection.distributions} if inspection else {},
        import_job_id=entry.import_job.job_id if entry.import_job is not None else None,
        problem=_unreadable(history),
    )


def _unreadable(history: ImageHistory) -> str | None:
    if not history.unreadable:
        return None
    return f"unreadable generation file(s), skipped: {', '.join(history.unreadable)}"


def image_info(
    name: str,
    *,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
) -> ImageInfo:
    """Image ``name``'s current generation and its state, checked now (``runner``: Slurm, for an import's state).

    Errors: no such image or a removed one (exit 3), the profile's. A file that is missing or changed is a state
    (``missing``, ``changed``), not an error: the result says what to do.
    """
    _, workspace = open_workspace(profile, cluster, environ)
    entry, history = current_entry(workspace.registry, name, operation=_OPERATION)
    generations = max(history.highest, entry.generation)
    if entry.sha256 is None or entry.identity is None or entry.path is None:
        return import_state(
            entry, generations=generations, workspace=workspace, environ=environ, runner=runner, clock=clock
        )
    return check_file(entry, generations, workspace.registry, modes=workspace.modes, clock=clock)
