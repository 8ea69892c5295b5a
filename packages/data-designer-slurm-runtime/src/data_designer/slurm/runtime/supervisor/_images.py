"""At allocation start: every registered image the plan uses still holds the bytes the plan was made with.

An :class:`ImagePlan` with a digest (a registered image; one named by absolute path has none) is checked by file
identity (``runtime.images.cached_digest``, the cache under ``<workspace>/images/<name>/digests/``): one ``stat``
and one small record read while the identity is the one hashed at registration or plan time, a full re-hash only
when it changed (then cached, so the other array tasks stat again and no more). A digest other than the plan's, or
a missing or unreadable file, ends the attempt ``environment_mismatch`` naming the image, before any step starts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from data_designer.slurm.contracts import ExecutionPlan, ImagePlan, SlurmExtensionError
from data_designer.slurm.runtime.images import ImageRegistry, cached_digest
from data_designer.slurm.runtime.store import Clock, modes_for, system_clock
from data_designer.slurm.runtime.supervisor._environment import SetupError


def planned_images(plan: ExecutionPlan) -> tuple[ImagePlan, ...]:
    """The distinct registered images of the plan (replicas' and the client's) that carry a digest."""
    found: dict[tuple[str, str, str], ImagePlan] = {}
    for image in (*(r.image for r in plan.allocation.replicas), plan.allocation.client.image):
        if image is not None and image.path is not None and image.digest is not None:
            found.setdefault((image.reference, image.path, image.digest), image)
    return tuple(found.values())


def check_images(
    plan: ExecutionPlan, workspace: Path, *, say: Callable[[str], None], clock: Clock = system_clock
) -> None:
    """SetupError ``environment_mismatch`` naming the first registered image whose bytes are not the plan's."""
    registry = ImageRegistry(workspace)
    modes = modes_for(plan.allocation.workspace_sharing)
    for image in planned_images(plan):
        assert image.path is not None
        try:
            cache = registry.digests_dir(image.reference)
            lookup = cached_digest(Path(image.path), cache, modes, clock=clock)
        except SlurmExtensionError as exc:
            raise SetupError("environment_mismatch", f"image {image.reference!r}: {exc.info.message}") from exc
        if lookup.sha256 != image.digest:
            raise SetupError(
                "environment_mismatch",
                f"image {image.reference!r} ({image.path}) changed after the plan was made: its bytes hash to "
                f"{lookup.sha256}, the plan was made with {image.digest}; register the image again "
                f"('data-designer slurm image add {image.path} --name {image.reference} --replace') and submit "
                "a new run",
            )
        how = "re-hashed (its identity changed)" if lookup.hashed else "identity unchanged"
        say(f"image {image.reference!r} ({image.path}): sha256 {lookup.sha256[:12]}..., {how}")
