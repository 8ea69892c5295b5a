"""Pure, deterministic planning for data-designer-slurm: strict loaders, profiles, plans (no I/O)."""

from data_designer.slurm.planner._document import Document, KeyPath, detect_format, format_key_path, parse_document
from data_designer.slurm.planner._profile import ProfileTemplate, load_profile, render_profile
from data_designer.slurm.planner._secrets import find_secret_literals, is_secret_like_key, looks_like_token
from data_designer.slurm.planner._validation import allowed_keys, validate_document

__all__ = [
    "Document",
    "KeyPath",
    "ProfileTemplate",
    "allowed_keys",
    "detect_format",
    "find_secret_literals",
    "format_key_path",
    "is_secret_like_key",
    "load_profile",
    "looks_like_token",
    "parse_document",
    "render_profile",
    "validate_document",
]
