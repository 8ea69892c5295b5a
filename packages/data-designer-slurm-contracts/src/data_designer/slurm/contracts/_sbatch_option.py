"""Extra ``sbatch`` arguments a profile or run file may add: one argv element each, never parsed by a shell.

Only their form as text is checked here (no control characters). What sbatch makes of a list (abbreviated and
short options, values in the next element, options the plan controls) is the planner's to resolve, against the
option table of the pinned Slurm: ``data_designer.slurm.planner.resolve_sbatch_options``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from data_designer.slurm.contracts._redact import excerpt
from data_designer.slurm.contracts._types import find_control_character


def _sbatch_option(value: str) -> str:
    bad = find_control_character(value)
    if bad is not None:
        raise PydanticCustomError(
            "control_character",
            "sbatch option {value} contains the control character {char}",
            {"value": excerpt(value), "char": repr(bad), "hint": "remove newlines, NUL and other control characters"},
        )
    return value


SbatchOption = Annotated[str, AfterValidator(_sbatch_option)]
"""One extra ``sbatch`` argument (an option such as ``--constraint=a100`` or ``-C``, or the value after one)."""
