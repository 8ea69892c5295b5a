"""``image ls`` and ``image info NAME``: the registry's current images, and one image checked now.

``list_images`` reads the records only: no byte of an image and no ``stat`` of its file, so a listing of many
images on a slow shared filesystem stays quick; ``image info`` is what checks one. It re-checks the bytes by file
identity: one ``stat`` when the identity is the one the image was hashed with (``identity_unchanged``); when it
changed, the file is hashed once (``runtime.images.cached_digest``, which caches the new identity) and is ``ready``
only when the sha256 is the registered one (``rehashed_equal``), else ``changed``. A registry reference's state
comes from its import job's scheduler evidence (``services._image_import.import_state``), never assumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from data_designer.slurm.contracts import ImageInfo, ImageList, ImageSummary, NotFoundError, SlurmExtensionError
from data_designer.slurm.contracts.records import ImageEntry
from data_designer.slurm.runtime import CommandRunner
from data_designer.slurm.runtime.images import ImageHistory, ImageRegistry, cached_digest, file_identity
from data_designer.slurm.runtime.store import Clock, FileModes, system_clock
from data_designer.slurm.services._images import open_workspace

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


def current_entry(registry: ImageRegistry, name: str, *, operation: str) -> tuple[ImageEntry, ImageHistory]:
    """The name's current entry; NotFoundError (exit 3) when it has none or was removed, naming what to do."""
    history = registry.history(name)
    entry = history.current
    if entry is None:
        was = "was removed (its newest generation is a tombstone)" if history.entries else "is not registered"
        raise NotFoundError(
            f"image {name!r} {was} in {str(registry.directory)!r}",
            code="image_not_found",
            operation=operation,
            file=str(registry.name_dir(name)),
            key_path="NAME",
            hint="'data-designer slurm image ls' lists the registered images; 'image add SOURCE --name "
            f"{name}' registers one",
        )
    return entry, history


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
        from data_designer.slurm.services._image_import import import_state

        return import_state(
            entry, generations=generations, workspace=workspace, environ=environ, runner=runner, clock=clock
        )
    return check_file(entry, generations, workspace.registry, modes=workspace.modes, clock=clock)


def check_file(
    entry: ImageEntry, generations: int, registry: ImageRegistry, *, modes: FileModes | None, clock: Clock
) -> ImageInfo:
    """The state of a registered file: one stat when its identity is unchanged, else one re-hash (cached)."""
    path = Path(entry.path or "")
    try:
        identity = file_identity(path)
    except NotFoundError:
        return ImageInfo(
            entry=entry,
            generations=generations,
            state="missing",
            detail=f"no file at {entry.path!r}: restore it, or register the image again with 'image add --replace'",
        )
    except SlurmExtensionError as exc:
        return ImageInfo(entry=entry, generations=generations, state="unknown", detail=exc.info.message)
    if identity == entry.identity:
        return ImageInfo(entry=entry, generations=generations, state="ready", integrity="identity_unchanged")
    try:
        digest = cached_digest(path, registry.digests_dir(entry.name), modes, clock=clock)
    except SlurmExtensionError as exc:
        return ImageInfo(entry=entry, generations=generations, state="unknown", detail=exc.info.message)
    if digest.sha256 == entry.sha256:
        return ImageInfo(
            entry=entry,
            generations=generations,
            state="ready",
            integrity="rehashed_equal",
            sha256_now=digest.sha256,
            rehashed=digest.hashed,
            detail="the file was touched or copied (its inode, size or mtime changed) but holds the registered bytes",
        )
    return ImageInfo(
        entry=entry,
        generations=generations,
        state="changed",
        integrity="changed",
        sha256_now=digest.sha256,
        rehashed=digest.hashed,
        detail=f"the file's bytes changed: sha256 {digest.sha256}, registered {entry.sha256}; register the new "
        f"bytes with 'image add {entry.path} --name {entry.name} --replace', or restore the file",
    )
