"""The registry as the planner sees it: the images a run names, their digests verified by file identity.

``execute``, ``benchmark run`` and the dry runs (``plan_run``, ``plan_benchmark``) all call :func:`registered_images`
with the names the run (or every child of the benchmark) uses (``planner.named_images``, ``benchmark_images``), so
they resolve the same images to the same :class:`ImageRecord` and an image gives the same plan digest in a dry run
and in ``execute``. Only the names used are read: a broken entry of another name never stops a plan. For each one
with a usable current entry (not a tombstone, imported: a path and a sha256), :func:`runtime.images.cached_digest`
checks the file: one ``stat`` when its identity has a cached digest (no byte of the image read), a full re-hash only
when the identity changed (a touch, an append, a copy), cached for the next plan and the allocations. A digest that
differs from the registered one refuses the plan (exit 6, naming the image and the fix), as does a missing file
(exit 3). A name without a usable entry is left out: the planner reports it unresolved. An image named by absolute
path is not the registry's: it is never read or checked here.

:func:`submitting_installation` is what a client image must match: our lockstep version and the top package's
requirement on ``data-designer``, read from the installed metadata.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterable
from pathlib import Path

from data_designer.slurm.contracts import CheckFailedError, ClusterProfile, ImageRecord, InvalidInputError, __version__
from data_designer.slurm.contracts.records import ImageEntry
from data_designer.slurm.planner import Installation
from data_designer.slurm.runtime.images import ImageRegistry, cached_digest
from data_designer.slurm.runtime.store import Clock, modes_for, system_clock

TOP_DISTRIBUTION = "data-designer-slurm"
HOST_DISTRIBUTION = "data-designer"
_REQUIREMENT = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*\(?(?P<spec>[^;)]*)\)?\s*$")
_OPERATION = "plan.images"


def registered_images(
    profile: ClusterProfile, names: Iterable[str], *, clock: Clock = system_clock
) -> tuple[ImageRecord, ...]:
    """The planner's records of the current registry entries of ``names``, each digest verified by identity."""
    registry = ImageRegistry(profile.workspace_root)
    modes = modes_for(profile.workspace_sharing)
    records: list[ImageRecord] = []
    for name in sorted(set(names)):
        try:
            entry = registry.current(name)
        except InvalidInputError:
            continue  # no registry name can be this (not a path component): the planner reports it unresolved
        if entry is None or entry.path is None or entry.sha256 is None:
            continue
        lookup = cached_digest(Path(entry.path), registry.digests_dir(name), modes, clock=clock)
        if lookup.sha256 != entry.sha256:
            raise CheckFailedError(
                f"image {name!r} ({entry.path}) changed since it was registered: its bytes now hash to "
                f"{lookup.sha256[:12]}..., generation {entry.generation} registered {entry.sha256[:12]}...",
                code="image_changed",
                operation=_OPERATION,
                file=entry.path,
                hint=f"restore the registered file, or register it again: 'data-designer slurm image add "
                f"{entry.path} --name {name} --replace'",
            )
        records.append(image_record(entry))
    return tuple(records)


def image_record(entry: ImageEntry) -> ImageRecord:
    """The planner's view of a verified registry entry: where it is, its digest and what its inspection found."""
    assert entry.path is not None
    inspection = entry.inspection
    return ImageRecord(
        name=entry.name,
        path=entry.path,
        kind=entry.format or "other",
        digest=entry.sha256,
        role=entry.role,
        python=inspection.python if inspection is not None else None,
        versions=None if inspection is None else {d.distribution: d.version for d in inspection.distributions},
    )


def submitting_installation() -> Installation:
    """Our version and the top package's specifier on ``data-designer`` (None when its metadata says none)."""
    try:
        requires = importlib.metadata.requires(TOP_DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    wanted = None
    for text in requires:
        match = _REQUIREMENT.match(text)
        if match is not None and _normalise(match.group("name")) == HOST_DISTRIBUTION:
            wanted = match.group("spec").strip() or None
            break
    return Installation(version=__version__, data_designer=wanted)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
