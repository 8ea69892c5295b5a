"""``image add``, ``image ls`` and ``image info``: the workspace's image registry as Python operations.

``add_image`` registers an existing SquashFS (pyxis/enroot) or SIF (apptainer) file: the path must be absolute (after
``~`` expansion), name a regular file and not lie on a node-local memory filesystem; its format is told by its magic
bytes (``hsqs`` at offset 0, ``SIF_MAGIC`` at offset 32 of a SIF's header). The sha256 is computed once
(``runtime.images.cached_digest``, cached by file identity under ``images/<name>/digests/``), the image is inspected
without running it (``runtime.images.inspect_image``) and the entry is written as generation 1, or as the next one
with ``replace``. Without ``replace`` a name with a current image is a ConflictError (exit 4); two writers of one
generation race on ``link(2)`` and the loser reads the registry again. A ``docker://`` reference is imported by a
CPU job (``services.images._import``) and returns at once.

``list_images`` reads the records only (no byte of an image, no stat). ``image_info`` checks the bytes cheaply: one
``stat`` when the file's identity is the one it was hashed with, a full re-hash only when it changed.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from collections.abc import Mapping
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from data_designer.slurm.contracts import (
    ImageAdded,
    InvalidInputError,
    Name,
    UnavailableError,
)
from data_designer.slurm.contracts.records import ImageEntry, ImageFormat, ImageInspection, ImageRole
from data_designer.slurm.runtime.images import cached_digest
from data_designer.slurm.runtime.scheduler import CommandRunner, SubprocessRunner
from data_designer.slurm.runtime.store import Clock, requester_from_environment, system_clock
from data_designer.slurm.services.context import ServiceContext
from data_designer.slurm.services.images._import import submit_import
from data_designer.slurm.services.images._workspace import open_workspace, refuse_current

REGISTRY_PREFIX = "docker://"
SQUASHFS_MAGIC = b"hsqs"
SIF_MAGIC = b"SIF_MAGIC\0"
SIF_MAGIC_OFFSET = 32
NODE_LOCAL_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})
"""Filesystems that live in one node's memory: an image there is not on the nodes that would run it."""
_MAX_ATTEMPTS = 8
_OPERATION = "image.add"


def check_name(name: str) -> str:
    """``name`` when it is a valid image name (the contracts' Name rule), else exit 2 naming ``--name`` and the fix."""
    try:
        return str(_NAME.validate_python(name))
    except ValidationError as exc:
        hint = next((str(e["ctx"]["hint"]) for e in exc.errors() if e.get("ctx", {}).get("hint")), None)
        raise InvalidInputError(
            f"image name {name!r} is not a valid name",
            code="invalid_image_name",
            operation=_OPERATION,
            key_path=("--name",),
            hint=hint or "use lowercase letters, digits, '.', '_' or '-'",
        ) from exc


_NAME: TypeAdapter[str] = TypeAdapter(Name)


def add_image(
    source: str,
    *,
    name: str,
    role: ImageRole = "serving",
    replace: bool = False,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
) -> ImageAdded:
    """Register ``source`` (an absolute SquashFS or SIF path, or ``docker://...``) as image ``name``.

    ``runner`` runs ``unsquashfs`` for a file's inspection (default: a subprocess runner allowed only that program),
    and the Slurm commands for a ``docker://`` import (default: those on PATH).
    Errors: a relative, missing, non-regular, node-local or unrecognised file, or a bad name, exit 2; a name with a
    current image without ``replace``, exit 4; the profile's errors; a filesystem that refuses, exit 5.
    """
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock)
    check_name(name)
    check_source(source)
    _, workspace = open_workspace(profile, cluster, environ)
    registry = workspace.registry
    if source.startswith(REGISTRY_PREFIX):
        return submit_import(
            source,
            name=name,
            role=role,
            replace=replace,
            workspace=workspace,
            environ=environ,
            clock=clock,
            runner=runner,
        )
    path = image_path(source)
    image_format = detect_format(path)
    check_shared(path, Path(workspace.profile.workspace_root))
    refuse_current(registry.history(name), replace=replace, file=str(path))
    digest = cached_digest(path, registry.digests_dir(name), workspace.modes, clock=clock)
    inspection = _inspect(path, image_format, runner, environ)
    requester = requester_from_environment(ctx.submitting_environment, clock=clock)
    for _ in range(_MAX_ATTEMPTS):
        history = registry.history(name)
        current = refuse_current(history, replace=replace, file=str(path))
        entry = ImageEntry(
            name=name,
            generation=history.highest + 1,
            role=role,
            format=image_format,
            source=source,
            source_kind=image_format,
            path=str(path),
            size=digest.identity.size,
            identity=digest.identity,
            sha256=digest.sha256,
            inspection=inspection,
            added_by=requester,
        )
        if registry.write_generation(entry, workspace.modes, clock=clock):
            return ImageAdded(
                entry=entry,
                outcome="replaced" if current is not None else "registered",
                registry_file=str(registry.generation_file(name, entry.generation)),
                hashed=digest.hashed,
            )
    raise UnavailableError(  # every attempt lost its generation to another writer of the same name
        f"image {name!r}: {_MAX_ATTEMPTS} generations were taken by other writers meanwhile",
        code="image_contended",
        operation=_OPERATION,
        file=str(registry.name_dir(name)),
        hint="another 'image add' of this name is running; wait for it, then run 'image info' or try again",
    )


def check_source(source: str) -> str:
    """``source`` when it holds no control character (a newline, a tab, NUL, ...); else exit 2 naming ``SOURCE``,
    before the workspace is opened or a byte is hashed: such a name would be recorded in the registry, printed to
    terminals and written into batch scripts."""
    bad = next((char for char in source if unicodedata.category(char) == "Cc"), None)  # C0, DEL and C1
    if bad is None:
        return source
    raise InvalidInputError(
        f"image file {source!r} holds the control character {bad!r} at position {source.index(bad)}",
        code="control_character",
        operation=_OPERATION,
        key_path=("SOURCE",),
        hint="rename the file (or the directory holding it) without newlines, tabs or other control characters",
    )


def image_path(source: str) -> Path:
    """``source`` as an absolute path to an existing regular file (exit 2 otherwise, 5 when it cannot be stat'ed)."""
    path = Path(source).expanduser()
    if not path.is_absolute():
        raise InvalidInputError(
            f"image file {source!r} is not an absolute path",
            code="image_path_relative",
            operation=_OPERATION,
            key_path=("SOURCE",),
            hint=f"give the absolute path on the shared filesystem, e.g. {str(Path.cwd() / source)!r}",
        )
    try:
        info = os.stat(path)
    except FileNotFoundError as exc:
        raise _refused(
            path,
            "does not exist",
            "image_missing",
            "give the path of an existing SquashFS (.sqsh) or SIF (.sif) file, or a docker:// reference",
        ) from exc
    except OSError as exc:
        raise _unavailable(path, "stat", exc) from exc
    if not stat.S_ISREG(info.st_mode):
        raise _refused(
            path,
            "is not a regular file",
            "image_not_a_file",
            "give the image file itself (a SquashFS or SIF file), not a directory or device",
        )
    return path


def _refused(path: Path, what: str, code: str, hint: str) -> InvalidInputError:
    """Exit 2 for the image file ``SOURCE`` names: ``image file '<path>' <what>``."""
    message = f"image file {str(path)!r} {what}"
    return InvalidInputError(message, code=code, operation=_OPERATION, file=str(path), key_path=("SOURCE",), hint=hint)


def _unavailable(path: Path, verb: str, exc: OSError) -> UnavailableError:
    """Exit 5: the filesystem refused to ``verb`` the image file."""
    message = f"cannot {verb} image file {str(path)!r}: {exc.strerror}"
    return UnavailableError(message, code="filesystem_unavailable", operation=_OPERATION, file=str(path))


def detect_format(path: Path) -> ImageFormat:
    """``squashfs`` or ``sif`` by the file's magic bytes; anything else is refused (exit 2) naming the file."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(SIF_MAGIC_OFFSET + len(SIF_MAGIC))
    except OSError as exc:
        raise _unavailable(path, "read", exc) from exc
    if head[: len(SQUASHFS_MAGIC)] == SQUASHFS_MAGIC:
        return "squashfs"
    if head[SIF_MAGIC_OFFSET:] == SIF_MAGIC:
        return "sif"
    raise _refused(
        path,
        "is neither a SquashFS (magic 'hsqs') nor a SIF (magic 'SIF_MAGIC')",
        "image_format_unknown",
        "give a SquashFS made by 'enroot import' or mksquashfs, a SIF made by 'apptainer build', or a docker:// "
        "reference to import",
    )


def check_shared(path: Path, workspace_root: Path) -> None:
    """Refuse an image on a node-local memory filesystem (tmpfs, ramfs) that the workspace is not on: the nodes
    that run it would not see the file. Elsewhere whether a filesystem is shared cannot be told from here."""
    mounts = _mounts()
    image_mount = _mount_of(path, mounts)
    if image_mount is None or image_mount[1] not in NODE_LOCAL_FILESYSTEMS:
        return
    if _mount_of(workspace_root, mounts) == image_mount:
        return
    raise _refused(
        path,
        f"is on {image_mount[0]!r}, a {image_mount[1]} filesystem in this node's memory",
        "image_not_shared",
        f"copy the image to the shared filesystem (e.g. under {str(workspace_root)!r}) and add that path",
    )


def _mounts() -> list[tuple[str, str]]:
    """(mount point, filesystem type) of every mount of this process (``/proc/self/mountinfo``; none if absent)."""
    try:
        text = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" in fields[6:]:
            separator = fields.index("-", 6)
            if len(fields) > separator + 1:
                point = fields[4].encode().decode("unicode_escape")  # octal escapes such as \040 for a space
                mounts.append((point, fields[separator + 1]))
    return mounts


def _mount_of(path: Path, mounts: list[tuple[str, str]]) -> tuple[str, str] | None:
    real = os.path.realpath(path)
    found = None
    for point, kind in mounts:  # the last of equal mount points is the one on top
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and (found is None or len(point) >= len(found[0])):
            found = (point, kind)
    return found


def _inspect(
    path: Path, image_format: ImageFormat, runner: CommandRunner | None, environ: Mapping[str, str] | None
) -> ImageInspection:
    from data_designer.slurm.runtime.images import IMAGE_TOOLS, inspect_image

    tools = runner if runner is not None else SubprocessRunner(env=environ, programs=IMAGE_TOOLS)
    return inspect_image(path, image_format, tools)
