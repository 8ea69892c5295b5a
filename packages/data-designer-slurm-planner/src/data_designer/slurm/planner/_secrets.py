"""Secret literals in authored files: configuration names environment variables, never holds values."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from data_designer.slurm.contracts import ENV_VAR_NAME_PATTERN, Problem
from data_designer.slurm.planner._document import Document, KeyPath, format_key_path

SECRET_KEY_WORDS = frozenset({"token", "password", "passwd", "secret", "credential", "credentials", "key", "apikey"})
"""A key whose name contains one of these words (split on ``_``/``-``/``.``) may only hold an env-var name."""

_TOKEN_SHAPE = re.compile(r"(?<![A-Za-z0-9])(?:sk-|nvapi-|ghp_|hf_)[A-Za-z0-9_-]{16,}")
_ENV_NAME = re.compile(ENV_VAR_NAME_PATTERN)
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")


def is_secret_like_key(key: str) -> bool:
    """Whether ``key`` names something secret (``api_key``, ``hf-token``, ``password``...)."""
    return bool(SECRET_KEY_WORDS.intersection(_WORD_SPLIT.split(key.lower())))


def looks_like_token(value: str) -> bool:
    """Whether ``value`` contains something shaped like a known API token (``sk-``, ``nvapi-``, ``ghp_``, ``hf_``)."""
    return _TOKEN_SHAPE.search(value) is not None


def find_secret_literals(document: Document) -> list[Problem]:
    """Every secret literal in ``document``: values under secret-like keys, and token-shaped strings anywhere."""
    return list(_walk(document, document.data, ()))


def _walk(document: Document, value: Any, path: KeyPath) -> Iterator[Problem]:
    if isinstance(value, dict):
        for key, child in value.items():
            child_path = (*path, key)
            if is_secret_like_key(key) and not isinstance(child, dict | list) and child is not None:
                if not (isinstance(child, str) and _ENV_NAME.fullmatch(child)):
                    yield Problem(
                        code="secret_literal",
                        message=f"key {key!r} holds a literal value; secrets are never written into configuration",
                        file=document.file,
                        line=document.line_of(child_path),
                        key_path=format_key_path(child_path),
                        hint="write the NAME of the environment variable that holds the secret (matching ^[A-Z_][A-Z0-9_]*$)",
                    )
                continue
            yield from _walk(document, child, child_path)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _walk(document, child, (*path, index))
    elif isinstance(value, str) and looks_like_token(value):
        yield Problem(
            code="secret_literal",
            message="value looks like an API token",
            file=document.file,
            line=document.line_of(path),
            key_path=format_key_path(path) or None,
            hint="remove the token; pass it through an environment variable named in the configuration",
        )
