"""What ``logs`` returns: the chosen log files of a run, each with the shard, attempt and step it belongs to.

A run's logs are Slurm's own batch output (``slurm-<job name>_<task>.out|.err`` in the run directory, one pair per
array task: what the batch script said before any attempt existed) and each attempt's ``logs/``: the supervisor's,
every server replica's and the client worker's. Only the last lines of each file are carried (``tail``); the rest
stays on disk, at ``path``.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._types import FROZEN

LogStep = Literal["batch", "supervisor", "server", "client"]
"""Which program wrote a log: Slurm's batch script output, the allocation supervisor, a model server, the client."""

LOG_STEPS: tuple[LogStep, ...] = get_args(LogStep)

LogSelection = Literal["not_succeeded", "shard", "attempt"]
"""How the files were chosen: the latest attempt of every shard not succeeded (the default), one shard's latest
attempt (``--shard``), or one attempt of one shard (``--shard`` and ``--attempt``)."""

FollowOutcome = Literal["ended", "nothing_to_follow"]


class LogFile(BaseModel):
    """One log file and its last lines."""

    model_config = FROZEN

    shard: NonNegativeInt
    attempt: PositiveInt | None = Field(
        description="The attempt whose log this is; None for the batch output of a task that ran no attempt."
    )
    step: LogStep
    path: str = Field(description="The file, as found in the run directory (names are not trusted: escape them).")
    job_id: str | None = Field(default=None, description="The Slurm job of a batch file.")
    array_task: NonNegativeInt | None = Field(default=None, description="The array task of a batch file.")
    size: NonNegativeInt = Field(description="The file's size in bytes when it was read.")
    lines: tuple[str, ...] = Field(description="Its last lines, oldest first, as written (not escaped).")
    truncated: bool = Field(description="Earlier lines exist that are not shown.")


class RunLogs(BaseModel):
    """The log files ``logs`` chose, in shard order, each shard's batch files first."""

    model_config = FROZEN

    run_id: str
    run_dir: str
    selection: LogSelection
    step: LogStep | None = Field(description="The step asked for; None: every step.")
    tail: PositiveInt = Field(description="The most lines shown of each file.")
    shards: tuple[NonNegativeInt, ...] = Field(description="The shards chosen.")
    succeeded_skipped: NonNegativeInt = Field(
        default=0, description="Shards not shown because they succeeded (the default selection only)."
    )
    files: tuple[LogFile, ...]
    notes: tuple[str, ...] = Field(default=(), description="Chosen shards with no log file yet, and why.")


class LogFollow(BaseModel):
    """What ``logs --follow`` did once it stopped: every followed attempt had ended (or there was none to follow)."""

    model_config = FROZEN

    run_id: str
    outcome: FollowOutcome
    followed: tuple[NonNegativeInt, ...] = Field(description="The shards followed.")
    polls: NonNegativeInt
    scheduler_calls: NonNegativeInt
    lines: NonNegativeInt = Field(description="Lines printed after the first tails.")
