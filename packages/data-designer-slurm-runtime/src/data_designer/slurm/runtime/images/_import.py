"""A registry import's files and its last step: ``python -m data_designer.slurm.runtime.images.finish``.

``image add docker://...`` writes generation ``g`` of the name (``import_job`` set, no sha256 yet) and submits a
one-task CPU job whose script (rendered by the planner) runs ``enroot import`` into
``images/<name>/imports/<g:04d>-<token>.sqsh.partial`` (the token is the job name's: two submissions never share a
file, not even one whose ``sbatch`` failed) and then execs the finish step. :func:`finish_import` runs on the
compute node: it checks that generation ``g`` is this job's import, renames the partial file into place, hashes it
once (:func:`cached_digest`, so ``image info`` re-checks it with one ``stat``), inspects it without running it and
writes the completion as generation ``g + 1`` (write-once: when an ``image add --replace`` or an ``image rm`` took
that generation meanwhile, the import lost; its file is deleted and nothing is written). Only a completion with a
sha256 and an inspection makes the image ready; anything else the job leaves is a failure ``image info`` reports.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import ConflictError, NotFoundError, UnavailableError
from data_designer.slurm.contracts.records import ImageEntry
from data_designer.slurm.planner import PARTIAL_SUFFIX
from data_designer.slurm.runtime.images._digest import cached_digest
from data_designer.slurm.runtime.images._registry import ImageRegistry
from data_designer.slurm.runtime.polling import poll
from data_designer.slurm.runtime.scheduler import CommandRunner
from data_designer.slurm.runtime.store import (
    Clock,
    FileModes,
    check_component,
    make_directories,
    modes_of_directory,
    publish_bytes_once,
    system_clock,
)

IMPORTS_DIR = "imports"
ENTRY_WAIT_S = 30.0
"""How long the finish step waits for the import's own generation to appear (it is written right after sbatch)."""
_OPERATION = "images.import"


@dataclass(frozen=True)
class ImportPaths:
    """Where one import (generation ``g`` of a name) keeps its files, all under ``images/<name>/imports/``."""

    directory: Path
    target: Path
    script: Path
    log: Path

    @property
    def partial(self) -> Path:
        return self.target.with_name(self.target.name + PARTIAL_SUFFIX)


def import_paths(registry: ImageRegistry, name: str, generation: int, token: str) -> ImportPaths:
    """The files of the import that generation ``generation`` records, submitted with ``token``."""
    directory = registry.name_dir(name) / IMPORTS_DIR
    stem = f"{generation:04d}-{check_component(token, 'import token')}"
    return ImportPaths(directory, directory / f"{stem}.sqsh", directory / f"{stem}.sbatch", directory / f"{stem}.log")


def write_import_script(paths: ImportPaths, script: str, modes: FileModes) -> None:
    """Make the import's directory (Slurm writes the log in it, the job the image) and publish its script once."""
    make_directories(paths.directory, modes)
    publish_bytes_once(paths.script, script.encode("utf-8"), operation="image.add", mode=modes.file)


def is_completion_of(candidate: ImageEntry, entry: ImageEntry) -> bool:
    """Whether ``candidate`` is the finished import ``entry`` started: the next generation, by the same job, with
    the bytes' sha256 and the inspection."""
    return (
        not candidate.removed
        and candidate.generation == entry.generation + 1
        and entry.import_job is not None
        and candidate.import_job == entry.import_job
        and candidate.sha256 is not None
        and candidate.inspection is not None
    )


def finish_import(
    registry: ImageRegistry,
    name: str,
    generation: int,
    *,
    runner: CommandRunner,
    environ: Mapping[str, str],
    clock: Clock = system_clock,
    sleep: Callable[[float], None] = time.sleep,
    wait_s: float = ENTRY_WAIT_S,
) -> ImageEntry:
    """Record the SquashFS the job's ``enroot import`` wrote as the completion of generation ``generation``.

    Errors: no such generation, or one that is not an import by this job (``SLURM_ARRAY_JOB_ID``/``SLURM_JOB_ID``),
    or no partial file, exit 3; the completion's generation already taken (a replace or rm won), exit 4; what hashing
    and inspection raise. Nothing is written unless the file was hashed and inspected.
    """
    entry = _import_entry(registry, name, generation, environ, clock=clock, sleep=sleep, wait_s=wait_s)
    paths = _paths_of(registry, entry)
    if not paths.partial.is_file():
        raise NotFoundError(
            f"enroot import left no image at {str(paths.partial)!r}",
            code="import_output_missing",
            operation=_OPERATION,
            file=str(paths.partial),
            hint="read the job's log for enroot's output, then run 'image add --replace' again",
        )
    try:
        os.replace(paths.partial, paths.target)
    except OSError as exc:
        raise UnavailableError(
            f"cannot move {str(paths.partial)!r} into place: {exc.strerror}",
            code="filesystem_unavailable",
            operation=_OPERATION,
            file=str(paths.target),
        ) from exc
    modes = modes_of_directory(paths.directory)
    digest = cached_digest(paths.target, registry.digests_dir(name), modes, clock=clock)
    from data_designer.slurm.runtime.images._inspect import inspect_image  # unsquashfs: only in the finish step

    inspection = inspect_image(paths.target, "squashfs", runner)
    completion = ImageEntry.model_validate(
        {
            **entry.model_dump(),
            "generation": generation + 1,
            "format": "squashfs",
            "path": str(paths.target),
            "size": digest.identity.size,
            "identity": digest.identity,
            "sha256": digest.sha256,
            "inspection": inspection,
        }
    )
    if not registry.write_generation(completion, modes, clock=clock):
        taken = registry.history(name)
        paths.target.unlink(missing_ok=True)  # nobody refers to it: the name moved on
        raise ConflictError(
            f"image {name!r} generation {generation + 1} was written by someone else while it was imported "
            f"(newest now: {taken.highest}); the imported file was deleted",
            code="import_superseded",
            operation=_OPERATION,
            file=str(registry.generation_file(name, generation + 1)),
            hint=f"see 'data-designer slurm image info {name}'; import again with 'image add --replace' if wanted",
        )
    return completion


def _import_entry(
    registry: ImageRegistry,
    name: str,
    generation: int,
    environ: Mapping[str, str],
    *,
    clock: Clock,
    sleep: Callable[[float], None],
    wait_s: float,
) -> ImageEntry:
    for _ in poll(wait_s, 1.0, clock=clock, sleep=sleep):
        entry = next((e for e in registry.history(name).entries if e.generation == generation), None)
        if entry is not None:
            break
    job_id = environ.get("SLURM_ARRAY_JOB_ID") or environ.get("SLURM_JOB_ID")
    if entry is None or entry.import_job is None or (job_id is not None and entry.import_job.job_id != job_id):
        what = "does not exist" if entry is None else f"is not the import of job {job_id or '-'}"
        raise NotFoundError(
            f"image {name!r} generation {generation} {what}: nothing to finish",
            code="import_entry_missing",
            operation=_OPERATION,
            file=str(registry.generation_file(name, generation)),
            hint=f"see 'data-designer slurm image info {name}'",
        )
    return entry


def _paths_of(registry: ImageRegistry, entry: ImageEntry) -> ImportPaths:
    """The import's files from its entry; only ever inside the name's ``imports/`` (nothing else is renamed)."""
    directory = registry.name_dir(entry.name) / IMPORTS_DIR
    target = Path(entry.path or "")
    if target.parent != directory or not target.name.endswith(".sqsh") or entry.import_job is None:
        raise NotFoundError(
            f"image {entry.name!r} generation {entry.generation} names no import file in {str(directory)!r}",
            code="import_entry_missing",
            operation=_OPERATION,
            file=str(registry.generation_file(entry.name, entry.generation)),
            hint=f"see 'data-designer slurm image info {entry.name}'",
        )
    return ImportPaths(directory, target, Path(entry.import_job.script), Path(entry.import_job.log))
