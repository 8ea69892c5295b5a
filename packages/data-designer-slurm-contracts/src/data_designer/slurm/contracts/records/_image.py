"""The image registry: ``<workspace>/images/<name>/<generation:04d>.json``, one write-once record per generation.

A name's current image is its highest generation; ``image add --replace`` writes the next generation, ``image rm``
writes a tombstone generation (``removed: true``). Nothing is ever rewritten and there are no lock files: two
``image add`` of one name race on ``link(2)`` of the same generation and exactly one wins. The sha256 of an image's
bytes is computed once and cached by file identity (inode, size, mtime in ns; not the device, which differs between
nodes) in ``images/<name>/digests/<inode>-<size>-<mtime_ns>.json``: a plan or an allocation re-checks the identity
(one ``stat``) and re-hashes only when it changed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._types import FROZEN, Name, PrintableText
from data_designer.slurm.contracts.records._retry import Requester
from data_designer.slurm.contracts.records._schema import RecordSchema

ImageFormat = Literal["squashfs", "sif"]
ImageRole = Literal["serving", "client"]
ImageSourceKind = Literal["squashfs", "sif", "registry"]


class FileIdentity(BaseModel):
    """What tells a file's bytes changed without reading them: inode, size and mtime in ns (no device number)."""

    model_config = FROZEN

    inode: NonNegativeInt
    size: NonNegativeInt
    mtime_ns: NonNegativeInt


class DigestRecord(BaseModel):
    """``digests/<inode>-<size>-<mtime_ns>.json``: the sha256 of the bytes the file had with that identity."""

    model_config = FROZEN

    path: str
    identity: FileIdentity
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    hashed_at: AwareDatetime


class FoundVersion(BaseModel):
    """A distribution found in the image's site-packages (its ``*.dist-info/METADATA``), or why it was not."""

    model_config = FROZEN

    distribution: PrintableText
    version: PrintableText | None = Field(description="None: undetermined (absent, or its metadata unreadable).")
    where: PrintableText | None = Field(default=None, description="The METADATA file inside the image.")
    detail: PrintableText | None = Field(default=None, description="Why it is undetermined.")


class ImageInspection(BaseModel):
    """What the image holds, read without running it (``unsquashfs``; a SIF's SquashFS partition)."""

    model_config = FROZEN

    python: PrintableText | None = Field(description="The Python version (e.g. 3.11) or None: undetermined.")
    python_executable: PrintableText | None = Field(default=None, description="e.g. /usr/bin/python3.11.")
    server_executable: PrintableText | None = Field(default=None, description="e.g. /usr/local/bin/vllm.")
    distributions: tuple[FoundVersion, ...] = Field(
        strict=False, description="vllm, data-designer and our four packages, each found or undetermined."
    )
    files: NonNegativeInt = Field(description="Entries listed in the image's file system.")
    undetermined: tuple[PrintableText, ...] = Field(
        default=(), strict=False, description="Everything that could not be determined, with why."
    )


class ImportJob(BaseModel):
    """The CPU job that imports a registry reference into a SquashFS (``enroot import``)."""

    model_config = FROZEN

    job_id: PrintableText
    job_name: PrintableText
    submitted_at: AwareDatetime
    script: PrintableText = Field(description="The batch script's path (rendered by the planner).")
    log: PrintableText = Field(description="Where the job writes its output.")


class ImageEntry(BaseModel):
    """One generation of one image name: what ``image add`` registered (or a tombstone from ``image rm``)."""

    model_config = FROZEN

    name: Name
    generation: PositiveInt
    removed: bool = Field(default=False, description="A tombstone: the name has no image from this generation on.")
    role: ImageRole | None = None
    format: ImageFormat | None = Field(default=None, description="The file's format (what the planner calls kind).")
    source: PrintableText | None = Field(default=None, description="As given to 'image add' (a path or docker://...).")
    source_kind: ImageSourceKind | None = None
    path: PrintableText | None = Field(default=None, description="The image file on the shared filesystem.")
    size: NonNegativeInt | None = None
    identity: FileIdentity | None = Field(default=None, description="The file's identity when it was hashed.")
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$", description="None until imported.")
    inspection: ImageInspection | None = Field(default=None, description="None until imported (a registry source).")
    import_job: ImportJob | None = Field(default=None, description="Set for a registry source.")
    added_by: Requester


IMAGE_SCHEMA: RecordSchema[ImageEntry] = RecordSchema("image", 1, ImageEntry)
DIGEST_SCHEMA: RecordSchema[DigestRecord] = RecordSchema("image-digest", 1, DigestRecord)
