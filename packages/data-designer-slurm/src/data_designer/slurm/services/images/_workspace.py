"""The images room's shared ground: the selected cluster's workspace and registry, a name's current entry, a file's state.

``add_image``, ``image_info``, the ``docker://`` import and ``remove_image`` all stand on these; none of them imports
another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import ClusterProfile, ConflictError, ImageInfo, NotFoundError, SlurmExtensionError
from data_designer.slurm.contracts.records import ImageEntry
from data_designer.slurm.runtime.images import ImageHistory, ImageRegistry, cached_digest, file_identity
from data_designer.slurm.runtime.store import Clock, FileModes, modes_for
from data_designer.slurm.services.context import ServiceContext


@dataclass(frozen=True)
class Workspace:
    """The selected cluster's workspace: its registry and the modes its files get."""

    cluster: str
    profile: ClusterProfile
    registry: ImageRegistry
    modes: FileModes


def open_workspace(
    profile: str | Path | None, cluster: str | None, environ: Mapping[str, str] | None
) -> tuple[Path, Workspace]:
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ)
    path, name, cluster_profile = ctx.selected
    registry = ImageRegistry(cluster_profile.workspace_root)
    return path, Workspace(name, cluster_profile, registry, modes_for(cluster_profile.workspace_sharing))


def refuse_current(history: ImageHistory, *, replace: bool, file: str) -> ImageEntry | None:
    """The name's current entry, or ConflictError (exit 4) when it has one and ``replace`` is not set."""
    current = history.current
    if current is not None and not replace:
        raise ConflictError(
            f"image {history.name!r} is registered already (generation {current.generation}: {current.source})",
            code="image_exists",
            operation="image.add",
            file=file,
            key_path=("--name",),
            hint=f"pass --replace to register this file as generation {history.highest + 1} of {history.name!r}, "
            "or choose another --name",
        )
    return current


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
            key_path=("NAME",),
            hint="'data-designer slurm image ls' lists the registered images; 'image add SOURCE --name "
            f"{name}' registers one",
        )
    return entry, history


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
