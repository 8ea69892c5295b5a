"""Extra ``sbatch`` options a profile may add, checked against the options the planner controls."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from data_designer.slurm.contracts._types import find_control_character

RESERVED_SBATCH_OPTIONS: dict[str, str] = {
    "job-name": "the planner names every job after its run and chunk",
    "array": "the planner builds array specs from the shard count and MaxArraySize",
    "output": "the planner places logs in the run directory",
    "error": "the planner places logs in the run directory",
    "signal": "set the warning lead in the run file's submission settings",
    "requeue": "set requeue in the run file's submission settings",
    "no-requeue": "set requeue in the run file's submission settings",
    "export": "pass variables by name under 'environment'",
    "chdir": "the planner sets the working directory to the run directory",
    "parsable": "the scheduler adapter always submits with --parsable",
    "wrap": "the planner renders the batch script itself",
    "dependency": "the planner controls dependencies between jobs",
    "partition": "set 'partitions.gpu' / 'partitions.cpu' instead",
    "account": "set 'account' instead",
    "time": "set 'default_time_limit' (or the run file's time limit) instead",
}
"""Long option name -> why it is reserved and what to use instead."""


def sbatch_option_name(option: str) -> str:
    """The long name of an ``--name[=value]`` option."""
    return option[2:].split("=", 1)[0]


def _sbatch_option(value: str) -> str:
    bad = find_control_character(value)
    if bad is not None:
        raise PydanticCustomError(
            "control_character",
            "sbatch option {value} contains the control character {char}",
            {"value": repr(value), "char": repr(bad), "hint": "remove newlines, NUL and other control characters"},
        )
    if not value.startswith("--") or len(value) < 3 or value[2] == "=":
        raise PydanticCustomError(
            "sbatch_option_form",
            "sbatch option {value} is not of the form --name or --name=value",
            {
                "value": repr(value),
                "hint": "write long options as one item each, e.g. '--constraint=a100&ib' or '--exclusive'",
            },
        )
    name = sbatch_option_name(value)
    if name in RESERVED_SBATCH_OPTIONS:
        raise PydanticCustomError(
            "reserved_sbatch_option",
            "sbatch option --{name} is reserved",
            {"name": name, "hint": f"remove it: {RESERVED_SBATCH_OPTIONS[name]}"},
        )
    return value


SbatchOption = Annotated[str, AfterValidator(_sbatch_option)]
"""One extra ``sbatch`` argument, ``--name`` or ``--name=value``; never parsed by a shell."""
