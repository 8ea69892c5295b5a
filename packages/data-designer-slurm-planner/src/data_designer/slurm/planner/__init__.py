"""Pure, deterministic planning for data-designer-slurm: strict loaders, profiles, plans (no I/O)."""

from data_designer.slurm.planner._dd_config import (
    BUILTIN_COLUMN_TYPES,
    BUILTIN_PROCESSOR_TYPES,
    MODEL_COLUMN_TYPES,
    config_digest,
    read_dd_config,
)
from data_designer.slurm.planner._digest import (
    DIGEST_ALGORITHM,
    MAX_RUN_SEED,
    SAMPLER_SEED_BITS,
    NotCanonicalError,
    canonical_json,
    derive_sampler_seed,
    sampler_seed_words,
    sha256_digest,
)
from data_designer.slurm.planner._document import Document, KeyPath, detect_format, format_key_path, parse_document
from data_designer.slurm.planner._profile import ProfileTemplate, load_profile, render_profile
from data_designer.slurm.planner._secrets import find_secret_literals, is_secret_like_key, looks_like_token
from data_designer.slurm.planner._validation import allowed_keys, validate_document

__all__ = [
    "BUILTIN_COLUMN_TYPES",
    "BUILTIN_PROCESSOR_TYPES",
    "DIGEST_ALGORITHM",
    "MAX_RUN_SEED",
    "MODEL_COLUMN_TYPES",
    "SAMPLER_SEED_BITS",
    "Document",
    "KeyPath",
    "NotCanonicalError",
    "ProfileTemplate",
    "allowed_keys",
    "canonical_json",
    "config_digest",
    "derive_sampler_seed",
    "detect_format",
    "find_secret_literals",
    "format_key_path",
    "is_secret_like_key",
    "load_profile",
    "looks_like_token",
    "parse_document",
    "read_dd_config",
    "render_profile",
    "sampler_seed_words",
    "sha256_digest",
    "validate_document",
]
