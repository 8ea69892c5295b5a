"""``inspect_image``: what a SquashFS or SIF image holds, read without running it.

One ``unsquashfs -help`` (what it supports), one listing of the file system and one small read per METADATA file
of the inspected distributions: the image's data is otherwise never read (a SIF contributes its header, its
descriptor table and four bytes). Everything that cannot be determined is recorded as undetermined, with why.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from data_designer.slurm.contracts import NotFoundError, find_control_character
from data_designer.slurm.contracts.records import FoundVersion, ImageFormat, ImageInspection
from data_designer.slurm.runtime.images._contents import (
    INSPECTED_DISTRIBUTIONS,
    MetadataCandidate,
    find_python,
    find_server,
    metadata_candidates,
    metadata_fields,
    normalise_name,
    shown,
)
from data_designer.slurm.runtime.images._sif import find_squashfs_partition
from data_designer.slurm.runtime.images._squashfs import (
    DEFAULT_LIST_TIMEOUT_S,
    DEFAULT_READ_TIMEOUT_S,
    ExtractedFile,
    SquashfsReader,
)
from data_designer.slurm.runtime.scheduler import CommandRunner


def inspect_image(
    path: Path,
    fmt: ImageFormat,
    runner: CommandRunner,
    *,
    list_timeout_s: float = DEFAULT_LIST_TIMEOUT_S,
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
) -> ImageInspection:
    """Inspect the image file at ``path`` (``squashfs``, or ``sif`` with its SquashFS partition) via ``runner``."""
    if not path.is_file():
        raise NotFoundError(
            f"image file {str(path)!r} does not exist (or is not a regular file)",
            code="image_missing",
            operation="inspect_image",
            file=str(path),
            hint="give the path of an existing SquashFS (.sqsh) or SIF (.sif) file",
        )
    offset = find_squashfs_partition(path).offset if fmt == "sif" else 0
    reader = SquashfsReader(path, runner, offset=offset, list_timeout_s=list_timeout_s, read_timeout_s=read_timeout_s)
    entries = reader.entries()
    undetermined: list[str] = []
    python = find_python(entries)
    if python.problem is not None:
        undetermined.append(python.problem)
    server = find_server(entries)
    if server is None:
        undetermined.append("server executable: no vllm in /usr/local/bin, /usr/bin, /bin or /opt/*/bin")
    candidates = metadata_candidates(entries, python.version)
    reads = {read.path: read for read in reader.read(sorted({c.path for c in candidates}))}
    distributions = tuple(_distribution(name, candidates, reads) for name in INSPECTED_DISTRIBUTIONS)
    undetermined.extend(f"{d.distribution}: {d.detail}" for d in distributions if d.version is None)
    return ImageInspection(
        python=python.version,
        python_executable=python.executable,
        server_executable=server,
        distributions=distributions,
        files=len(entries),
        undetermined=tuple(undetermined),
    )


def _distribution(
    name: str, candidates: tuple[MetadataCandidate, ...], reads: dict[str, ExtractedFile]
) -> FoundVersion:
    """One distribution's version from its METADATA files: found once (or alike everywhere), else undetermined."""
    mine = [c.path for c in candidates if c.distribution == name]
    if not mine:
        return FoundVersion(distribution=name, version=None, detail=_absent(name))
    versions: dict[str, list[str]] = defaultdict(list)
    problems: list[str] = []
    for where in mine:
        read = reads.get(where)
        if read is None or read.text is None:
            problems.append(shown(f"{where}: {read.problem if read is not None else 'not read'}"))
            continue
        found_name, version = metadata_fields(read.text)
        if found_name is None or normalise_name(found_name) != normalise_name(name):
            continue  # another distribution whose dist-info name starts alike (e.g. vllm-flash-attn)
        if version is None or find_control_character(version) is not None:
            problems.append(f"{where}: no Version header" if version is None else f"{where}: Version {version!r}")
            continue
        versions[version].append(where)
    if len(versions) == 1 and not problems:
        version, places = next(iter(versions.items()))
        return FoundVersion(distribution=name, version=version, where=places[0])
    if len(versions) > 1:
        seen = "; ".join(f"{v} in {places[0]}" for v, places in sorted(versions.items()))
        return FoundVersion(distribution=name, version=None, detail=f"several versions installed ({seen})")
    if problems:
        return FoundVersion(distribution=name, version=None, detail="metadata unreadable: " + "; ".join(problems))
    return FoundVersion(distribution=name, version=None, detail=_absent(name))


def _absent(name: str) -> str:
    stem = normalise_name(name).replace("-", "_")
    return f"no {stem}-<version>.dist-info/METADATA in any site-packages or dist-packages directory"
