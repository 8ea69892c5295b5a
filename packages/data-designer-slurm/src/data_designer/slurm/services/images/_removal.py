"""``image rm NAME``: a tombstone generation, refused while a live run uses the image.

A run uses an image when an :class:`ImagePlan` of its plan (a server replica's or the client's) names it: by its
registered name, or by the path of the generation being removed. Only those runs are read further, cheaply first:
a run whose last recorded observation leaves no shard pending, running, stale or unknown cannot be live; the others
are asked about with one live observation of all of them (one ``squeue``, one ``sacct``), classified as ``status``
classifies them. A shard still pending or running there (or one Slurm could not tell about) refuses the removal
(ConflictError, exit 4, naming the runs). A plan that cannot be read is not evidence of use and is counted, not
followed.

``delete_artifact`` deletes the image file only when this project made it: a registry import, whose file lies
under the workspace's ``images/`` directory. A user's own file is never deleted; the result says it was kept.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from data_designer.slurm.contracts import (
    ConflictError,
    ExecutionPlan,
    ImagePlan,
    ImageRemoved,
    SlurmExtensionError,
    UnavailableError,
)
from data_designer.slurm.contracts.records import ImageEntry
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.status import cached_observation, observe_runs
from data_designer.slurm.runtime.store import (
    Clock,
    RunLayout,
    RunSnapshot,
    list_run_dirs,
    load_plan,
    read_run,
    requester_from_environment,
    system_clock,
)
from data_designer.slurm.services.context import ServiceContext, classify_observed, collector_paused
from data_designer.slurm.services.images._workspace import current_entry, open_workspace

LIVE_STATES = frozenset({"pending", "running", "stale", "unknown"})
"""Shard states that keep an image in use: Slurm may still run the shard (or could not say)."""
_NAMED_RUNS = 5
_OPERATION = "image.rm"


def remove_image(
    name: str,
    *,
    delete_artifact: bool = False,
    profile: str | Path | None = None,
    cluster: str | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
) -> ImageRemoved:
    """Write a tombstone for image ``name`` unless a live run of the workspace uses it (``runner``: Slurm).

    Errors: no such image or removed already (exit 3); in use by a live run (exit 4, naming the runs); another
    writer took the tombstone's generation meanwhile (exit 4); the file could not be deleted (exit 5, the
    tombstone written)."""
    ctx = ServiceContext.of(profile=profile, cluster=cluster, environ=environ, runner=runner, clock=clock)
    _, workspace = open_workspace(profile, cluster, environ)
    registry = workspace.registry
    entry, history = current_entry(registry, name, operation=_OPERATION)
    users, checked = _runs_using(Path(workspace.profile.workspace_root), entry)
    live = _live(users, ctx.scheduler(), clock)
    if live:
        named = ", ".join(live[:_NAMED_RUNS]) + (
            f" and {len(live) - _NAMED_RUNS} more" if len(live) > _NAMED_RUNS else ""
        )
        raise ConflictError(
            f"image {name!r} is used by live run(s) {named}",
            code="image_in_use",
            operation=_OPERATION,
            file=str(registry.generation_file(name, entry.generation)),
            key_path=("NAME",),
            hint=f"wait for the run(s) to finish or cancel them ('data-designer slurm cancel {live[0]}'), then "
            "run 'image rm' again",
        )
    tombstone = ImageEntry(
        name=name,
        generation=history.highest + 1,
        removed=True,
        added_by=requester_from_environment(ctx.submitting_environment, clock=clock),
    )
    if not registry.write_generation(tombstone, workspace.modes, clock=clock):
        raise ConflictError(
            f"image {name!r} changed while it was being removed: generation {tombstone.generation} was written by "
            "another 'image add' or 'image rm'",
            code="image_changed_meanwhile",
            operation=_OPERATION,
            file=str(registry.generation_file(name, tombstone.generation)),
            hint=f"see 'data-designer slurm image info {name}', then run 'image rm' again if it should go",
        )
    deleted, note = _delete_artifact(entry, registry.directory) if delete_artifact else (False, None)
    return ImageRemoved(
        name=name,
        generation=tombstone.generation,
        removed_generation=entry.generation,
        path=entry.path,
        deleted_artifact=deleted,
        note=note,
        runs_checked=checked,
    )


def uses(plan: ExecutionPlan, entry: ImageEntry) -> bool:
    """Whether an image plan of ``plan`` names ``entry`` (its name, or its file's path)."""
    images: list[ImagePlan | None] = [replica.image for replica in plan.allocation.replicas]
    images.append(plan.allocation.client.image)
    return any(
        image is not None and (image.reference == entry.name or (entry.path is not None and image.path == entry.path))
        for image in images
    )


def _runs_using(root: Path, entry: ImageEntry) -> tuple[list[RunLayout], int]:
    """The runs of the workspace whose plans use ``entry``, and how many plans were read."""
    users: list[RunLayout] = []
    checked = 0
    for item in list_run_dirs(root):
        if item.layout is None:
            continue
        try:
            plan = load_plan(item.layout)
        except SlurmExtensionError:  # no plan (execute did not finish) or a corrupt one: nothing of it runs this
            continue
        checked += 1
        if uses(plan, entry):
            users.append(item.layout)
    return users, checked


def _live(users: Sequence[RunLayout], scheduler: SlurmScheduler, clock: Clock) -> list[str]:
    """The ids of the runs in ``users`` with shards Slurm may still run: a live observation of those whose last
    recorded one says they may."""
    if not users:
        return []
    with collector_paused():
        candidates: list[RunSnapshot] = []
        live: list[str] = []
        for layout in users:
            try:
                snapshot = read_run(layout, clock=clock)
            except SlurmExtensionError:  # a run that cannot be read: whether Slurm still runs it is unknown
                live.append(str(layout.run_id))
                continue
            status = classify_observed(snapshot, cached_observation(snapshot), clock(), None)
            if any(shard.state in LIVE_STATES for shard in status.shards):
                candidates.append(snapshot)
        for snapshot, seen in zip(candidates, observe_runs(candidates, scheduler, clock=clock), strict=True):
            status = classify_observed(snapshot, seen, clock(), None)
            if any(shard.state in LIVE_STATES for shard in status.shards):
                live.append(str(snapshot.layout.run_id))
    return sorted(live)


def _delete_artifact(entry: ImageEntry, images_dir: Path) -> tuple[bool, str | None]:
    """Delete the entry's file when it is an import of ours under ``images/``; else keep it and say why."""
    if entry.path is None:
        return False, "no file to delete: the import had not produced one"
    path = Path(entry.path)
    ours = entry.source_kind == "registry" and Path(os.path.realpath(path)).is_relative_to(os.path.realpath(images_dir))
    if not ours:
        return False, (
            f"kept {entry.path!r}: it is not a file 'image add' imported into the workspace, so it is not ours to "
            "delete (remove it yourself if nothing else uses it)"
        )
    try:
        path.unlink()
    except FileNotFoundError:
        return False, f"{entry.path!r} was already gone"
    except OSError as exc:
        raise UnavailableError(
            f"image {entry.name!r} is removed (tombstone written), but its file {entry.path!r} could not be "
            f"deleted: {exc.strerror}",
            code="image_file_not_deleted",
            operation=_OPERATION,
            file=entry.path,
            hint="delete the file by hand",
        ) from exc
    return True, None
