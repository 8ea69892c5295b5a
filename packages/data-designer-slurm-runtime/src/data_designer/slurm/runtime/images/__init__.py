"""Container images: the workspace's registry, digests cached by file identity, and inspection without running."""

from data_designer.slurm.runtime.images._contents import INSPECTED_DISTRIBUTIONS, normalise_name
from data_designer.slurm.runtime.images._digest import (
    DigestLookup,
    cached_digest,
    digest_file_name,
    file_identity,
    hash_file,
)
from data_designer.slurm.runtime.images._import import (
    IMPORTS_DIR,
    ImportPaths,
    finish_import,
    import_paths,
    is_completion_of,
    write_import_script,
)
from data_designer.slurm.runtime.images._inspect import inspect_image
from data_designer.slurm.runtime.images._registry import DIGESTS_DIR, IMAGES_DIR, ImageHistory, ImageRegistry
from data_designer.slurm.runtime.images._sif import (  # the SIF layout, for writers of test images too
    DATA_PARTITION,
    DESCRIPTOR,
    FS_SQUASHFS,
    HEADER,
    PART_PRIMARY_SYSTEM,
    PARTITION_EXTRA,
    SIF_LAUNCH,
    SIF_MAGIC,
    SIF_VERSION,
    SifPartition,
    find_squashfs_partition,
)
from data_designer.slurm.runtime.images._squashfs import IMAGE_TOOLS, SquashfsEntry, SquashfsReader, parse_listing

__all__ = [
    "DATA_PARTITION",
    "DESCRIPTOR",
    "DIGESTS_DIR",
    "FS_SQUASHFS",
    "HEADER",
    "IMAGES_DIR",
    "IMAGE_TOOLS",
    "IMPORTS_DIR",
    "INSPECTED_DISTRIBUTIONS",
    "PARTITION_EXTRA",
    "PART_PRIMARY_SYSTEM",
    "SIF_LAUNCH",
    "SIF_MAGIC",
    "SIF_VERSION",
    "DigestLookup",
    "ImageHistory",
    "ImageRegistry",
    "ImportPaths",
    "SifPartition",
    "SquashfsEntry",
    "SquashfsReader",
    "cached_digest",
    "digest_file_name",
    "file_identity",
    "find_squashfs_partition",
    "finish_import",
    "hash_file",
    "import_paths",
    "inspect_image",
    "is_completion_of",
    "normalise_name",
    "parse_listing",
    "write_import_script",
]
