"""Secret literals in authored files: configuration names environment variables, never holds values."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from data_designer.slurm.contracts import ENV_VAR_NAME_PATTERN, KeyPath, Problem, looks_like_token
from data_designer.slurm.planner._document import Document

SECRET_KEY_WORDS = frozenset(
    {
        "token",
        "password",
        "passwd",
        "passphrase",
        "secret",
        "credential",
        "credentials",
        "key",
        "apikey",
        "authorization",
        "bearer",
        "cookie",
    }
)
"""A key whose name contains one of these words may only hold an env-var name.

Words are split on anything but letters and digits (``api_key``, ``x-api-key``, ``db.secret``) and at camelCase
humps (``hfToken``, ``clientSecret``, ``APIKey``), so ``keyboard``, ``tokens`` and ``secretary`` stay harmless."""

_ENV_NAME = re.compile(ENV_VAR_NAME_PATTERN)
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def is_secret_like_key(key: str) -> bool:
    """Whether ``key`` names something secret (``api_key``, ``hf-token``, ``hfToken``, ``password``...)."""
    words = _WORD_SPLIT.split(_CAMEL_HUMP.sub("_", key).lower())
    return bool(SECRET_KEY_WORDS.intersection(words))


def find_secret_literals(document: Document) -> list[Problem]:
    """Every secret literal in ``document``: values under secret-like keys, and token-shaped strings anywhere."""
    return list(_walk(document, document.data, ()))


def _walk(document: Document, value: Any, path: KeyPath) -> Iterator[Problem]:
    if isinstance(value, dict):
        for key, child in value.items():
            child_path = (*path, key)
            if is_secret_like_key(key) and not isinstance(child, dict | list) and child is not None:
                if not (isinstance(child, str) and _ENV_NAME.fullmatch(child)):
                    yield document.problem_at(
                        child_path,
                        code="secret_literal",
                        message=f"key {key!r} holds a literal value; secrets are never written into configuration",
                        hint="write the NAME of the environment variable that holds the secret (matching ^[A-Z_][A-Z0-9_]*$)",
                    )
                continue
            yield from _walk(document, child, child_path)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _walk(document, child, (*path, index))
    elif isinstance(value, str) and looks_like_token(value):
        yield document.problem_at(
            path,
            code="secret_literal",
            message="value looks like a secret (an API token, or a URL with a password)",
            hint="remove the token; pass it through an environment variable named in the configuration",
        )
