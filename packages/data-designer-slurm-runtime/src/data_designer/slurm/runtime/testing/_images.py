"""Real small container images for tests: a fake root file system, ``mksquashfs``, and a SIF wrapping it.

:func:`write_root_fs` lays out what inspection looks for (a ``python3.X`` with its ``python3`` symlink, a ``vllm``
executable, ``<dist>-<version>.dist-info/METADATA`` in a site directory); :func:`build_squashfs` packs a directory
with the real ``mksquashfs`` (squashfs-tools; :func:`squashfs_tools_missing` says why it cannot run); and
:func:`wrap_in_sif` writes a minimal SIF around a SquashFS with this module's own writer, the mirror of
``images/_sif.py``'s parser:

* the 128-byte global header (launch script, ``SIF_MAGIC``, version ``01``, arch, a fixed UUID, times, and
  ``descriptors_total`` = 48 descriptors of 585 bytes from byte 4096; data from byte 32768);
* descriptor 1: a definition file (``0x4001``) holding ``bootstrap: scratch``;
* descriptor 2: the partition (``0x4004``) with ``fs_type``/``part_type``/``arch`` in its extra bytes (by default
  a SquashFS primary system partition), its data aligned to 4096 bytes after the definition file;
* the other 46 descriptors unused (all zero), as ``apptainer build`` leaves them.

``fs_type=`` and ``part_type=`` write the SIFs inspection must refuse (an encrypted or a non-primary partition).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from data_designer.slurm.runtime.images import (
    DATA_PARTITION,
    DESCRIPTOR,
    FS_SQUASHFS,
    HEADER,
    PART_PRIMARY_SYSTEM,
    PARTITION_EXTRA,
    SIF_LAUNCH,
    SIF_MAGIC,
    SIF_VERSION,
    normalise_name,
)

MKSQUASHFS = "mksquashfs"
SIF_DESCRIPTORS = 48
SIF_DESCRIPTORS_OFFSET = 4096
SIF_DATA_OFFSET = 32768
DATA_DEFFILE = 0x4001
GROUP_MASK = 0xF0000000
_ALIGN = 4096
_CREATED = 1_700_000_000
_UUID = bytes(range(16))
_DEFFILE = b"bootstrap: scratch\n"


def squashfs_tools_missing() -> str | None:
    """Why the image builders cannot run here (``mksquashfs`` or ``unsquashfs`` not on PATH), or None."""
    missing = [tool for tool in (MKSQUASHFS, "unsquashfs") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not on PATH: install squashfs-tools (apt-get install squashfs-tools)"
    return None


def write_root_fs(
    root: Path,
    *,
    versions: Mapping[str, str],
    python: str | None = "3.11",
    server: bool = True,
    site: str = "usr/local/lib/python{python}/site-packages",
) -> Path:
    """A fake root file system under ``root``: ``/usr/bin/python{python}`` and its ``python3`` symlink (unless
    ``python`` is None), ``/usr/local/bin/vllm`` when ``server``, and one ``METADATA`` per ``versions`` entry
    (distribution -> version) in ``site`` (formatted with ``python``). Returns ``root``."""
    for directory in ("usr/bin", "usr/local/bin", "etc", "tmp"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    (root / "etc" / "os-release").write_text('NAME="test image"\n', encoding="utf-8")
    if python is not None:
        executable = root / "usr" / "bin" / f"python{python}"
        executable.write_text("#!/bin/sh\necho not a real python\n", encoding="utf-8")
        executable.chmod(0o755)
        (root / "usr" / "bin" / "python3").symlink_to(f"python{python}")
    if server:
        vllm = root / "usr" / "local" / "bin" / "vllm"
        vllm.write_text("#!/bin/sh\necho not a real vllm\n", encoding="utf-8")
        vllm.chmod(0o755)
    site_dir = root / site.format(python=python or "3")
    for distribution, version in versions.items():
        write_dist_info(site_dir, distribution, version)
    return root


def write_dist_info(site_dir: Path, distribution: str, version: str | None) -> Path:
    """``<dist>-<version>.dist-info/METADATA`` as a wheel installs it (``version=None``: no Version header)."""
    stem = normalise_name(distribution).replace("-", "_")
    dist_info = site_dir / f"{stem}-{version or '0'}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    header = f"Metadata-Version: 2.1\nName: {distribution}\n" + (f"Version: {version}\n" if version else "")
    body = f"{header}Summary: a test distribution\n\n# {distribution}\n\nVersion: not-the-header\n"
    (dist_info / "METADATA").write_text(body, encoding="utf-8")
    (dist_info / "RECORD").write_text("", encoding="utf-8")
    return dist_info / "METADATA"


def build_squashfs(root: Path, image: Path) -> Path:
    """Pack ``root`` into the SquashFS ``image`` with the real ``mksquashfs``; returns ``image``."""
    argv = [MKSQUASHFS, str(root), str(image), "-noappend", "-no-progress", "-all-root", "-no-xattrs"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return image


def _descriptor(
    data_type: int, descriptor_id: int, offset: int, size: int, padded: int, name: bytes, extra: bytes
) -> bytes:
    return DESCRIPTOR.pack(
        data_type, True, descriptor_id, GROUP_MASK | 1, 0, offset, size, padded, _CREATED, _CREATED, 0, 0, name, extra
    )


def wrap_in_sif(
    squashfs: Path,
    sif: Path,
    *,
    arch: bytes = b"02\0",
    fs_type: int = FS_SQUASHFS,
    part_type: int = PART_PRIMARY_SYSTEM,
) -> Path:
    """Write the SIF ``sif`` holding ``squashfs`` as its partition (see the module docstring); returns ``sif``."""
    size = squashfs.stat().st_size
    deffile_offset = SIF_DATA_OFFSET
    partition_offset = -(-(deffile_offset + len(_DEFFILE)) // _ALIGN) * _ALIGN
    descriptors = [
        _descriptor(DATA_DEFFILE, 1, deffile_offset, len(_DEFFILE), partition_offset - deffile_offset, b"", b""),
        _descriptor(
            DATA_PARTITION, 2, partition_offset, size, size, b"rootfs", PARTITION_EXTRA.pack(fs_type, part_type, arch)
        ),
    ]
    table = b"".join(descriptors) + bytes(DESCRIPTOR.size * (SIF_DESCRIPTORS - len(descriptors)))
    header = HEADER.pack(
        SIF_LAUNCH,
        SIF_MAGIC,
        SIF_VERSION,
        arch,
        _UUID,
        _CREATED,
        _CREATED,
        SIF_DESCRIPTORS - len(descriptors),
        SIF_DESCRIPTORS,
        SIF_DESCRIPTORS_OFFSET,
        len(b"".join(descriptors)),
        SIF_DATA_OFFSET,
        partition_offset + size - SIF_DATA_OFFSET,
    )
    with sif.open("wb") as out:
        out.write(header)
        out.seek(SIF_DESCRIPTORS_OFFSET)
        out.write(table)
        out.seek(deffile_offset)
        out.write(_DEFFILE)
        out.seek(partition_offset)
        with squashfs.open("rb") as source:
            shutil.copyfileobj(source, out)
        out.flush()
        os.fsync(out.fileno())
    return sif
