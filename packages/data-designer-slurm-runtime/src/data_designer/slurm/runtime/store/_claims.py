"""Claims on the shared filesystem: exclusive ownership by ``link(2)``, and race-free attempt numbering.

A claim is a write-once record (schema ``claim``, payload :class:`ClaimOwner`) created by linking a
complete temporary file to the claim's name (:func:`~data_designer.slurm.runtime.store._record_io.write_record_once`).
``link(2)`` fails when the name exists, on NFS and Lustre alike, so of any number of concurrent
claimants exactly one gets :class:`Claimed`; the others get :class:`AlreadyClaimed` with the owner read
back. Unlike ``O_EXCL`` create followed by a write, a claim is never visible empty or half-written.
``flock`` is not used: it is unreliable on some Lustre mounts.

Attempt directories are numbered ``0001``, ``0002``... under a shard's ``attempts/``: a number is taken
by claiming ``<number>/claim``, so concurrent callers (a requeued task and a retry, two retries) always
get distinct numbers. A numbered directory without a claim (a claimant that died between ``mkdir``
and ``link``) is skipped and is evidence of nothing.
"""

from __future__ import annotations

import os
import pwd
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import InternalError
from data_designer.slurm.contracts.records import CLAIM_SCHEMA, ClaimOwner, Requester
from data_designer.slurm.runtime.store._layout import CLAIM_FILE, format_attempt, parse_attempt
from data_designer.slurm.runtime.store._record_io import (
    Clock,
    ReadResult,
    RecordOk,
    RecordWritten,
    system_clock,
    write_record_once,
)

_MAX_ATTEMPT_TRIES = 100_000


@dataclass(frozen=True)
class Claimed:
    """This caller holds the claim at ``path``."""

    path: Path
    owner: ClaimOwner


@dataclass(frozen=True)
class AlreadyClaimed:
    """Someone else holds it: ``owner`` as read back (None when the claim record is unreadable or corrupt)."""

    path: Path
    owner: ClaimOwner | None
    evidence: ReadResult[ClaimOwner]


@dataclass(frozen=True)
class AttemptClaim:
    """An attempt number taken by this caller, its directory and the claim that holds it."""

    number: int
    directory: Path
    claim: Claimed


def claim(path: Path, owner: ClaimOwner) -> Claimed | AlreadyClaimed:
    """Take the claim at ``path`` for ``owner`` unless anyone holds it already (the record's time is ``owner.time``)."""
    result = write_record_once(path, CLAIM_SCHEMA, owner, clock=lambda: owner.time, operation="claim")
    if isinstance(result, RecordWritten):
        return Claimed(path, owner)
    existing = result.existing
    return AlreadyClaimed(path, existing.payload if isinstance(existing, RecordOk) else None, existing)


def attempt_numbers(attempts_dir: Path) -> list[int]:
    """The attempt numbers present under ``attempts_dir`` (ascending; claimed or not; other names skipped)."""
    try:
        names = os.listdir(attempts_dir)
    except FileNotFoundError:
        return []
    numbers = [number for number in map(parse_attempt, names) if number is not None]
    return sorted(numbers)


def next_attempt_number(attempts_dir: Path, owner: ClaimOwner) -> AttemptClaim:
    """Claim the next free attempt directory under ``attempts_dir`` for ``owner`` (its ``attempt`` is set).

    Starts after the highest numbered directory present and moves up while numbers are taken, so the
    result is distinct for every concurrent caller and never reuses an earlier attempt's directory.
    """
    number = max(attempt_numbers(attempts_dir), default=0) + 1
    for _ in range(_MAX_ATTEMPT_TRIES):
        directory = attempts_dir / format_attempt(number)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except FileExistsError:  # a stray file of that name: the number is unusable, not ours
            number += 1
            continue
        mine = owner.model_copy(update={"attempt": number})
        result = claim(directory / CLAIM_FILE, mine)
        if isinstance(result, Claimed):
            return AttemptClaim(number, directory, result)
        number += 1
    raise InternalError(
        f"no free attempt number under {str(attempts_dir)!r}", code="attempts_exhausted", file=str(attempts_dir)
    )


def owner_from_environment(
    environ: Mapping[str, str],
    *,
    clock: Clock = system_clock,
    host: str | None = None,
    pid: int | None = None,
) -> ClaimOwner:
    """The claimant described by Slurm's environment (``SLURM_JOB_ID``, ``SLURM_ARRAY_TASK_ID``...)."""
    task = environ.get("SLURM_ARRAY_TASK_ID", "")
    restarts = environ.get("SLURM_RESTART_COUNT", "")
    job_id = environ.get("SLURM_ARRAY_JOB_ID") or environ.get("SLURM_JOB_ID") or None
    return ClaimOwner(
        host=host if host is not None else socket.gethostname(),
        pid=pid if pid is not None else os.getpid(),
        job_id=job_id,
        array_task=int(task) if task.isascii() and task.isdigit() else None,
        restart_count=int(restarts) if restarts.isascii() and restarts.isdigit() else 0,
        time=clock(),
    )


def requester_from_environment(
    environ: Mapping[str, str], *, clock: Clock = system_clock, host: str | None = None, pid: int | None = None
) -> Requester:
    """Who is asking on this login node: ``$USER`` (else the account name), the host, this process, now."""
    user = environ.get("USER") or environ.get("LOGNAME") or _account_name()
    return Requester(
        user=user,
        host=host if host is not None else socket.gethostname(),
        pid=pid if pid is not None else os.getpid(),
        time=clock(),
    )


def _account_name() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid without a passwd entry (containers)
        return str(os.getuid())
