"""What ``image add``, ``image ls``, ``image info`` and ``image rm`` return.

The records themselves (one write-once :class:`ImageEntry` per name and generation, the digests cached by file
identity) are in ``records._image``; these are the results of the commands over them. An image's ``state`` is
derived from evidence, never assumed: a registered file is ``ready`` only when its bytes are the registered ones
(its identity unchanged, or re-hashed to the same sha256), an import only from its job's scheduler evidence.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records import ImageEntry, ImageFormat, ImageRole, ImageSourceKind

ImageAddOutcome = Literal["registered", "replaced", "import_submitted"]

ImageState = Literal["ready", "importing", "import_failed", "import_cancelled", "missing", "changed", "unknown"]
"""``ready``: the file holds the registered bytes; ``importing``/``import_failed``/``import_cancelled``: the import
job's state from scheduler evidence; ``missing``: no file at the path; ``changed``: the file's bytes are not the
registered ones (re-hashed); ``unknown``: the evidence could not be had (the detail says why)."""

IMAGE_STATES: tuple[str, ...] = get_args(ImageState)

IntegrityCheck = Literal["identity_unchanged", "rehashed_equal", "changed"]
"""How ``image info`` checked the bytes: one ``stat`` found the identity it was hashed with; the identity had changed
and the bytes hashed to the registered sha256 again; or they hashed to another sha256."""


class ImageAdded(BaseModel):
    """The result of ``data-designer slurm image add``."""

    model_config = FROZEN

    entry: ImageEntry = Field(description="The generation that was written.")
    outcome: ImageAddOutcome = Field(
        description="registered: generation 1 (or the first after a tombstone); replaced: --replace wrote the next "
        "generation over a current image; import_submitted: a registry reference's import job was submitted."
    )
    registry_file: str = Field(description="The generation's record, images/<name>/<generation>.json.")
    hashed: bool = Field(description="The image's bytes were read now (False: its digest was cached by identity).")


class ImageSummary(BaseModel):
    """One name of the registry, one row of ``image ls`` (from the records alone: no byte of an image read)."""

    model_config = FROZEN

    name: str
    generation: PositiveInt
    role: ImageRole | None = None
    format: ImageFormat | None = None
    source_kind: ImageSourceKind | None = None
    path: str | None = None
    size: NonNegativeInt | None = None
    sha256: str | None = None
    python: str | None = Field(default=None, description="The image's Python version; None: undetermined.")
    versions: dict[str, str | None] = Field(
        default_factory=dict, description="Each inspected distribution's version (None: undetermined)."
    )
    import_job_id: str | None = Field(default=None, description="The import job, for a registry reference.")
    problem: str | None = Field(default=None, description="Why some generation files could not be read.")


class ImageList(BaseModel):
    """The result of ``data-designer slurm image ls``: every current image, by name; removed names omitted."""

    model_config = FROZEN

    workspace: str
    cluster: str
    images: tuple[ImageSummary, ...] = Field(description="Sorted by name.")
    removed: NonNegativeInt = Field(description="Names whose newest generation is a tombstone (not listed).")


class ImageInfo(BaseModel):
    """The result of ``data-designer slurm image info NAME``: the current generation and its state, checked now."""

    model_config = FROZEN

    entry: ImageEntry
    generations: PositiveInt = Field(description="Generations of the name on disk (tombstones included).")
    state: ImageState
    detail: str | None = Field(default=None, description="Why the state is what it is, and what to do.")
    integrity: IntegrityCheck | None = Field(
        default=None, description="How the bytes were checked; None when there is no file to check (yet)."
    )
    sha256_now: str | None = Field(default=None, description="The sha256 the file has now, when it was re-hashed.")
    rehashed: bool = Field(default=False, description="The image's bytes were read by this check.")
    scheduler_calls: NonNegativeInt = Field(default=0, description="Slurm calls made to learn an import's state.")


class ImageRemoved(BaseModel):
    """The result of ``data-designer slurm image rm NAME``."""

    model_config = FROZEN

    name: str
    generation: PositiveInt = Field(description="The tombstone's generation.")
    removed_generation: PositiveInt = Field(description="The generation that was current until now.")
    path: str | None = Field(default=None, description="The removed generation's image file.")
    deleted_artifact: bool = Field(description="The image file was deleted (only an import of ours, with the flag).")
    note: str | None = Field(default=None, description="Why the file was kept although --delete-artifact asked.")
    runs_checked: NonNegativeInt = Field(default=0, description="Runs of the workspace whose plans were read.")
