"""``data-designer slurm image add/ls/info/rm``: the workspace's registry of container images."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from data_designer.slurm.cli._output import DebugOption, JsonOption, run, table
from data_designer.slurm.cli._profile_commands import ClusterOption, ProfileOption

if TYPE_CHECKING:
    from data_designer.slurm.contracts import ImageAdded, ImageInfo, ImageList, ImageRemoved
    from data_designer.slurm.contracts.records import ImageEntry

image_app = typer.Typer(
    name="image",
    help="Register container images by name, and list, inspect and remove them. An image is a SquashFS or SIF "
    "file, or a docker:// reference imported by a CPU job; run and benchmark files name it.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


class Role(StrEnum):
    serving = "serving"
    client = "client"


NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The image's registered name.")]


@image_app.command("add")
def add(
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE",
            help="An absolute path to a SquashFS or SIF file, or docker://[USER@][REGISTRY#]IMAGE[:TAG] to import.",
        ),
    ],
    name: Annotated[str, typer.Option("--name", help="The name run and benchmark files refer to it by.")],
    role: Annotated[
        Role,
        typer.Option("--role", help="serving: it runs model servers; client: it runs the Data Designer client."),
    ] = Role.serving,
    replace: Annotated[
        bool, typer.Option("--replace", help="Register it as the next generation of a name that has an image.")
    ] = False,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Register an image under NAME: its sha256 (once), its format and what it holds (read without running it).

    A docker:// reference is imported into a SquashFS by a CPU job; the command returns once the job is
    submitted and 'image info NAME' shows the import's state.

    Exit codes: 0; 2 a relative, missing or unrecognised file, or a bad name; 3 no profile; 4 NAME has an
    image (pass --replace); 5 the filesystem, unsquashfs or Slurm is unavailable.
    """
    from data_designer.slurm.services import add_image

    run(
        "image.add",
        lambda: add_image(
            source,
            name=name,
            role="client" if role is Role.client else "serving",
            replace=replace,
            profile=profile,
            cluster=cluster,
        ),
        render_added,
        as_json=as_json,
        debug=debug,
    )


@image_app.command("ls")
def ls(
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """List the registered images from their records (no image file is read; 'image info' checks one).

    Exit codes: 0; 2 invalid profile; 3 no profile; 5 the registry cannot be listed.
    """
    from data_designer.slurm.services import list_images

    run("image.ls", lambda: list_images(profile=profile, cluster=cluster), render_list, as_json=as_json, debug=debug)


@image_app.command("info")
def info(
    name: NameArgument,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show an image and its state, checked now: one stat of the file, a re-hash only when it changed; an
    import's state from Slurm.

    Exit codes: 0 (whatever the state); 2 invalid profile; 3 no such image, or no profile.
    """
    from data_designer.slurm.services import image_info

    run(
        "image.info",
        lambda: image_info(name, profile=profile, cluster=cluster),
        render_info,
        as_json=as_json,
        debug=debug,
    )


@image_app.command("rm")
def rm(
    name: NameArgument,
    delete_artifact: Annotated[
        bool,
        typer.Option(
            "--delete-artifact",
            help="Also delete the image file if this tool imported it into the workspace (never your own file).",
        ),
    ] = False,
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Remove NAME from the registry (a tombstone generation; the history stays). Refuses while a live run
    uses it.

    Exit codes: 0; 3 no such image; 4 a live run uses it, or it changed meanwhile; 5 Slurm could not be asked or
    the file could not be deleted.
    """
    from data_designer.slurm.services import remove_image

    run(
        "image.rm",
        lambda: remove_image(name, delete_artifact=delete_artifact, profile=profile, cluster=cluster),
        render_removed,
        as_json=as_json,
        debug=debug,
    )


def render_added(result: ImageAdded) -> str:
    entry = result.entry
    if result.outcome == "import_submitted":
        job = entry.import_job
        return (
            f"image {entry.name!r} generation {entry.generation}: import of {entry.source} submitted"
            + (f" as job {job.job_id}" if job is not None else "")
            + f"\n'data-designer slurm image info {entry.name}' shows its state"
        )
    lines = [f"image {entry.name!r} generation {entry.generation} {result.outcome}: {entry.format} {entry.path}"]
    lines.extend(_details(entry))
    lines.append("sha256 " + (entry.sha256 or "") + (" (hashed now)" if result.hashed else " (cached by identity)"))
    return "\n".join(lines)


def render_list(result: ImageList) -> str:
    if not result.images:
        return f"no images in {result.workspace}/images (cluster {result.cluster})"
    rows = [
        [
            item.name,
            str(item.generation),
            item.role or "",
            item.format or item.source_kind or "",
            item.python or "?",
            ", ".join(f"{dist} {version or '?'}" for dist, version in item.versions.items() if version) or "",
            item.path or (f"importing (job {item.import_job_id})" if item.import_job_id else ""),
        ]
        for item in result.images
    ]
    lines = [table(["NAME", "GEN", "ROLE", "FORMAT", "PYTHON", "FOUND", "PATH"], rows)]
    lines.extend(f"{item.name}: {item.problem}" for item in result.images if item.problem)
    tail = f"{len(result.images)} image(s) in {result.workspace}/images"
    lines.append(tail + (f"; {result.removed} removed name(s) not shown" if result.removed else ""))
    return "\n".join(lines)


_INTEGRITY = {
    "identity_unchanged": "identity unchanged (one stat, no byte read)",
    "rehashed_equal": "identity changed, re-hashed: same bytes",
    "changed": "identity changed, re-hashed: DIFFERENT bytes",
}


def render_info(result: ImageInfo) -> str:
    entry = result.entry
    lines = [
        f"image {entry.name!r} generation {entry.generation} of {result.generations}: {result.state}",
        f"source {entry.source} ({entry.source_kind}), role {entry.role}",
    ]
    if entry.path:
        lines.append(f"file {entry.path} ({entry.format}, {entry.size} bytes)")
    if entry.sha256:
        lines.append(f"sha256 {entry.sha256}")
    if result.integrity is not None:
        lines.append("integrity: " + _INTEGRITY[result.integrity])
    lines.extend(_details(entry))
    if result.detail:
        lines.append(result.detail)
    return "\n".join(lines)


def render_removed(result: ImageRemoved) -> str:
    lines = [
        f"image {result.name!r} removed: tombstone generation {result.generation} over generation "
        f"{result.removed_generation} ({result.runs_checked} run plan(s) checked, none live using it)"
    ]
    if result.deleted_artifact:
        lines.append(f"deleted {result.path}")
    if result.note:
        lines.append(result.note)
    return "\n".join(lines)


def _details(entry: ImageEntry) -> list[str]:
    inspection = entry.inspection
    if inspection is None:
        return []
    lines = [
        f"python {inspection.python or 'undetermined'}"
        + (f" ({inspection.python_executable})" if inspection.python_executable else ""),
        f"server {inspection.server_executable or 'undetermined'}",
    ]
    rows = [
        [found.distribution, found.version or "undetermined", found.where or found.detail or ""]
        for found in inspection.distributions
    ]
    if rows:
        lines.append(table(["DISTRIBUTION", "VERSION", "WHERE"], rows))
    shown = [found.distribution for found in inspection.distributions if found.version is None]
    # what the table already says (an undetermined distribution, with why) is not repeated below it
    lines.extend(f"undetermined: {what}" for what in inspection.undetermined if not what.startswith(tuple(shown)))
    return lines
