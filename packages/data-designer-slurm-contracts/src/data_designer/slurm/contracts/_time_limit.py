"""Slurm time limits (``--time``): parsing to seconds and the canonical ``D-HH:MM:SS`` form."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from data_designer.slurm.contracts._redact import excerpt

_FORMS = (
    re.compile(r"^(?P<m>\d+)$"),
    re.compile(r"^(?P<m>\d+):(?P<s>\d+)$"),
    re.compile(r"^(?P<h>\d+):(?P<m>\d+):(?P<s>\d+)$"),
    re.compile(r"^(?P<d>\d+)-(?P<h>\d+)$"),
    re.compile(r"^(?P<d>\d+)-(?P<h>\d+):(?P<m>\d+)$"),
    re.compile(r"^(?P<d>\d+)-(?P<h>\d+):(?P<m>\d+):(?P<s>\d+)$"),
)


def parse_time_limit(text: str) -> int | None:
    """Seconds in a Slurm time string ("90", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS"), or None."""
    for form in _FORMS:
        match = form.fullmatch(text)
        if match:
            parts = {k: int(v) for k, v in match.groupdict().items() if v is not None}
            return parts.get("d", 0) * 86400 + parts.get("h", 0) * 3600 + parts.get("m", 0) * 60 + parts.get("s", 0)
    return None


def format_time_limit(seconds: int) -> str:
    """Canonical Slurm form of a duration, rounded up to whole minutes (Slurm's granularity)."""
    minutes = -(-seconds // 60)
    days, rest = divmod(minutes * 60, 86400)
    hours, rest = divmod(rest, 3600)
    mins = rest // 60
    return f"{days}-{hours:02d}:{mins:02d}:00" if days else f"{hours:02d}:{mins:02d}:00"


def _time_limit(value: str) -> str:
    seconds = parse_time_limit(value)
    if seconds is None or seconds <= 0:
        raise PydanticCustomError(
            "time_limit",
            "{value} is not a positive Slurm time limit",
            {
                "value": excerpt(value),
                "hint": "write minutes, 'HH:MM:SS' or 'D-HH:MM:SS' as a quoted string, e.g. '04:00:00'",
            },
        )
    return value


TimeLimit = Annotated[str, AfterValidator(_time_limit)]
"""A Slurm ``--time`` value, kept as written."""
