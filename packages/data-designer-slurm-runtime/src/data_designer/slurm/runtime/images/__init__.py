"""Container images: the workspace's registry, digests cached by file identity, and inspection without running."""

from data_designer.slurm.runtime.images._digest import (
    DigestLookup,
    cached_digest,
    digest_file_name,
    file_identity,
    hash_file,
)
from data_designer.slurm.runtime.images._registry import DIGESTS_DIR, IMAGES_DIR, ImageHistory, ImageRegistry

__all__ = [
    "DIGESTS_DIR",
    "IMAGES_DIR",
    "DigestLookup",
    "ImageHistory",
    "ImageRegistry",
    "cached_digest",
    "digest_file_name",
    "file_identity",
    "hash_file",
]
