"""The SIF container format (apptainer, singularity), read in pure Python: where the SquashFS partition lies.

No apptainer on the login node: the global header and the descriptor table are parsed here and the primary
system partition's SquashFS is then read by ``unsquashfs -o OFFSET`` (see ``_squashfs.py``). Every integer is
little-endian, nothing is padded (Go's ``encoding/binary`` layout of sylabs/sif).

Global header, 128 bytes at offset 0::

    launch script   32 bytes   "#!/usr/bin/env run-singularity\\n", NUL padded
    magic           10 bytes   "SIF_MAGIC\\0"
    version          3 bytes   "01\\0"
    arch             3 bytes   "02\\0" (amd64), "04\\0" (arm64), ...
    id              16 bytes   UUID
    created_at, modified_at, descriptors_free, descriptors_total,
    descriptors_offset, descriptors_size, data_offset, data_size      8 x int64

Descriptor, 585 bytes each, ``descriptors_total`` of them from ``descriptors_offset``::

    data_type int32 (0x4004: a partition), used bool (1 byte), id uint32, group_id uint32, linked_id uint32,
    offset int64, size int64, size_with_padding int64, created_at int64, modified_at int64, uid int64,
    gid int64, name 128 bytes, extra 384 bytes

A partition's ``extra`` starts with ``fs_type int32`` (1: SquashFS, 5: encrypted SquashFS), ``part_type int32``
(2: the primary system partition) and ``arch`` (3 bytes). The primary system partition must be a SquashFS and
start with the SquashFS magic ``hsqs``; anything else is refused (exit 2) naming the file and what is wrong.
Only the header, the descriptor table and four bytes of the partition are read.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import InvalidInputError, NotFoundError, UnavailableError

SIF_LAUNCH = b"#!/usr/bin/env run-singularity\n"
SIF_MAGIC = b"SIF_MAGIC\0"
SIF_VERSION = b"01\0"
HEADER = struct.Struct("<32s10s3s3s16s8q")
DESCRIPTOR = struct.Struct("<i?IIIqqqqqqq128s384s")
PARTITION_EXTRA = struct.Struct("<ii3s")
DATA_PARTITION = 0x4004
FS_SQUASHFS = 1
FS_ENCRYPTED_SQUASHFS = 5
PART_PRIMARY_SYSTEM = 2
SQUASHFS_MAGIC = b"hsqs"
MAX_DESCRIPTORS = 4096
"""More descriptors than any real SIF holds (the default table has 48): a larger count is a corrupt header."""

SIF_ARCHES: dict[bytes, str] = {
    b"00": "unknown",
    b"01": "386",
    b"02": "amd64",
    b"03": "arm",
    b"04": "arm64",
    b"05": "ppc64",
    b"06": "ppc64le",
    b"07": "mips",
    b"08": "mipsle",
    b"09": "mips64",
    b"10": "mips64le",
    b"11": "s390x",
}

_HINT = "give a SIF built by apptainer or singularity (apptainer build IMAGE.sif ...), or a SquashFS file"


@dataclass(frozen=True, slots=True)
class SifPartition:
    """The SIF's primary system partition: a SquashFS of ``size`` bytes at ``offset`` in the file."""

    offset: int
    size: int
    descriptor_id: int
    arch: str


def _corrupt(path: Path, what: str) -> InvalidInputError:
    return InvalidInputError(
        f"{str(path)!r} is not a readable SIF file: {what}",
        code="sif_corrupt",
        operation="inspect_image",
        file=str(path),
        hint=_HINT,
    )


def _text(raw: bytes) -> bytes:
    return raw.rstrip(b"\0")


def _arch(raw: bytes) -> str:
    return SIF_ARCHES.get(_text(raw), f"unknown ({_text(raw)!r})")


def _read_at(handle: int, offset: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.pread(handle, size, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def find_squashfs_partition(path: Path) -> SifPartition:
    """Where the SquashFS of the SIF at ``path`` lies; reads the header, the descriptors and four bytes."""
    try:
        handle = os.open(path, os.O_RDONLY)
    except FileNotFoundError as exc:
        raise NotFoundError(
            f"image file {str(path)!r} does not exist", code="image_missing", operation="inspect_image", file=str(path)
        ) from exc
    except OSError as exc:
        raise UnavailableError(
            f"cannot open image file {str(path)!r}: {exc.strerror}",
            code="image_unreadable",
            operation="inspect_image",
            file=str(path),
            hint="check the file's permissions and that the shared filesystem is mounted",
        ) from exc
    try:
        file_size = os.fstat(handle).st_size
        header = _read_at(handle, 0, HEADER.size)
        total, table_offset = _table(path, header, file_size)
        table = _read_at(handle, table_offset, total * DESCRIPTOR.size)
        partition = parse_descriptors(path, table, total, file_size)
        start = _read_at(handle, partition.offset, len(SQUASHFS_MAGIC))
    finally:
        os.close(handle)
    if start != SQUASHFS_MAGIC:
        raise _corrupt(path, f"the primary system partition at byte {partition.offset} does not start with a SquashFS")
    return partition


def _table(path: Path, header: bytes, file_size: int) -> tuple[int, int]:
    """The descriptor count and the table's offset, from the global header."""
    if len(header) < HEADER.size:
        raise _corrupt(path, f"{file_size} bytes, shorter than the {HEADER.size}-byte SIF header")
    _launch, magic, version, _arch_raw, _uuid, *numbers = HEADER.unpack(header)
    if magic != SIF_MAGIC:
        raise _corrupt(path, f"no SIF magic at byte 32 (found {_text(magic)!r}, expected b'SIF_MAGIC')")
    if version != SIF_VERSION:
        raise _corrupt(path, f"SIF version {_text(version)!r} is not the supported version b'01'")
    _created, _modified, _free, total, table_offset, _table_size, _data_offset, _data_size = numbers
    if not 0 < total <= MAX_DESCRIPTORS:
        raise _corrupt(path, f"descriptors_total {total} is not between 1 and {MAX_DESCRIPTORS}")
    if table_offset < HEADER.size or table_offset + total * DESCRIPTOR.size > file_size:
        raise _corrupt(
            path,
            f"the descriptor table ({total} x {DESCRIPTOR.size} bytes at byte {table_offset}) lies outside the "
            f"file's {file_size} bytes (truncated?)",
        )
    return total, table_offset


def parse_descriptors(path: Path, table: bytes, total: int, file_size: int) -> SifPartition:
    """The primary system partition among ``total`` raw descriptors; refuses anything that is not a SquashFS."""
    if len(table) < total * DESCRIPTOR.size:
        raise _corrupt(path, f"the descriptor table ends after {len(table)} of {total * DESCRIPTOR.size} bytes")
    found: list[str] = []
    for index in range(total):
        fields = DESCRIPTOR.unpack_from(table, index * DESCRIPTOR.size)
        data_type, used, descriptor_id, _group, _link, offset, size = fields[:7]
        if not used or data_type != DATA_PARTITION:
            continue
        fs_type, part_type, arch = PARTITION_EXTRA.unpack_from(fields[-1])
        found.append(f"id {descriptor_id}: fs_type {fs_type}, part_type {part_type}")
        if part_type != PART_PRIMARY_SYSTEM:
            continue
        if fs_type == FS_ENCRYPTED_SQUASHFS:
            raise _corrupt(path, f"the primary system partition (descriptor {descriptor_id}) is encrypted")
        if fs_type != FS_SQUASHFS:
            raise _corrupt(path, f"the primary system partition (descriptor {descriptor_id}) is not a SquashFS")
        if offset < HEADER.size or size <= 0 or offset + size > file_size:
            raise _corrupt(
                path,
                f"the primary system partition ({size} bytes at byte {offset}) lies outside the file's "
                f"{file_size} bytes (truncated?)",
            )
        return SifPartition(offset=offset, size=size, descriptor_id=descriptor_id, arch=_arch(arch))
    partitions = "; ".join(found) if found else "no partitions at all"
    raise _corrupt(path, f"no primary system partition ({partitions})")
