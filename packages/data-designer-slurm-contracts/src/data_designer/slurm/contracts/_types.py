"""Validated scalar types shared by every contract.

Each validator raises ``PydanticCustomError`` with a stable type code and a ``hint`` in its
context, so loaders can turn it into a :class:`Problem` that says how to fix the value.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, StringConstraints
from pydantic_core import PydanticCustomError

from data_designer.slurm.contracts._redact import excerpt

FROZEN = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False, defer_build=True)
"""Model configuration for every contract: immutable, no unknown keys, no coercion, no NaN/Inf.

Schemas build on first use (``defer_build``): importing the contracts stays cheap for CLIs, servers and the
supervisor, which use only a few models per process."""

ENV_VAR_NAME_PATTERN = r"^[A-Z_][A-Z0-9_]*$"
_ENV_VAR_NAME = re.compile(ENV_VAR_NAME_PATTERN)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$")


def find_control_character(value: str) -> str | None:
    """The first NUL, newline or other control character in ``value``, or None."""
    match = _CONTROL.search(value)
    return match.group(0) if match else None


def printable(value: str) -> str:
    """``value`` when it holds no control character; else a ``control_character`` error (an ``AfterValidator``)."""
    bad = find_control_character(value)
    if bad is not None:
        raise PydanticCustomError(
            "control_character",
            "value contains the control character {char} at position {pos}",
            {
                "char": repr(bad),
                "pos": value.index(bad),
                "hint": "remove NUL, newline and other control characters; any printable character is allowed",
            },
        )
    return value


def _absolute_path(value: str) -> str:
    printable(value)
    if not value.startswith("/"):
        raise PydanticCustomError(
            "relative_path",
            "path {value} is relative",
            {"value": excerpt(value), "hint": "use an absolute path (starting with '/') on the shared filesystem"},
        )
    return value


def _env_var_name(value: str) -> str:
    if not _ENV_VAR_NAME.fullmatch(value):
        raise PydanticCustomError(
            "env_var_name",
            "{value} is not an environment-variable name",
            {
                "value": excerpt(value),
                "hint": "write the NAME of an environment variable matching ^[A-Z_][A-Z0-9_]*$, never its value",
            },
        )
    return value


def _name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise PydanticCustomError(
            "invalid_name",
            "{value} is not a valid name",
            {
                "value": excerpt(value),
                "hint": "use 1-64 characters of lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit",
            },
        )
    return value


PrintableText = Annotated[str, StringConstraints(min_length=1), AfterValidator(printable)]
"""Non-empty text without control characters; may hold any printable character (no shell ever parses it)."""

AbsolutePath = Annotated[str, AfterValidator(_absolute_path)]
"""An absolute POSIX path."""

EnvVarName = Annotated[str, AfterValidator(_env_var_name)]
"""The name (never the value) of an environment variable."""

Name = Annotated[str, AfterValidator(_name)]
"""A short identifier: cluster names, run names, aliases."""


def hint_of(error: dict[str, Any]) -> str | None:
    """The fix hint carried by one pydantic error dict, if any."""
    ctx = error.get("ctx") or {}
    hint = ctx.get("hint")
    return str(hint) if hint is not None else None
