"""Pure parsers for Slurm's text output, and the pieces the squeue/sacct parsers share.

Every parser takes text and returns values or raises :class:`SlurmOutputError` (an
:class:`UnavailableError`, exit 5: a scheduler whose output we cannot read is a scheduler we
cannot use). No other exception escapes a parser, whatever the input; Hypothesis tests hold
them to that.

Formats are fixed by the adapter (``--parsable``, ``--parsable2 --noheader`` and explicit
``-o``/``--format`` lists) and times are ISO-8601 UTC because the command runner forces
``TZ=UTC`` and ``SLURM_TIME_FORMAT=standard``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from data_designer.slurm.contracts import TaskState, UnavailableError

MAX_EXPANDED_INDICES = 1_000_000
"""Upper bound on the array indices one range expression may expand to (``MaxArraySize`` is at most 4,000,001)."""


class SlurmOutputError(UnavailableError):
    """A Slurm command printed something this adapter cannot read."""

    default_code = "slurm_output_unreadable"

    def __init__(self, message: str, *, command: str, line: int | None = None, hint: str | None = None) -> None:
        super().__init__(
            message,
            operation=f"parse_{command}_output",
            line=line,
            hint=hint or "check the Slurm client version and any site wrapper around the command",
        )
        self.command = command


_STATE_MAP: dict[str, TaskState] = {
    "PENDING": "pending",
    "RESV_DEL_HOLD": "pending",
    "REQUEUE_HOLD": "requeued",
    "REQUEUE_FED": "requeued",
    "REQUEUED": "requeued",
    "CONFIGURING": "running",
    "RUNNING": "running",
    "COMPLETING": "running",
    "SIGNALING": "running",
    "STAGE_OUT": "running",
    "RESIZING": "running",
    "SUSPENDED": "running",
    "STOPPED": "running",
    "COMPLETED": "completed",
    "FAILED": "failed",
    "SPECIAL_EXIT": "failed",
    "BOOT_FAIL": "node_fail",
    "NODE_FAIL": "node_fail",
    "CANCELLED": "cancelled",
    "REVOKED": "cancelled",
    "DEADLINE": "timeout",
    "TIMEOUT": "timeout",
    "OUT_OF_MEMORY": "out_of_memory",
    "PREEMPTED": "preempted",
}
_STATE_RE = re.compile(r"([A-Z_]+)\+?(?: by (\d+))?", re.ASCII)
_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", re.ASCII)
_EMPTY_TIMES = frozenset({"", "N/A", "Unknown", "None", "NONE", "(null)"})
_EMPTY_VALUES = frozenset({"", "None", "(null)", "None assigned", "N/A"})
_JOB_ID_RE = re.compile(r"[1-9]\d{0,18}", re.ASCII)
_RANGE_RE = re.compile(r"(\d{1,10})(?:-(\d{1,10})(?::(\d{1,10}))?)?", re.ASCII)


def normalise_state(raw: str, *, command: str, line: int) -> TaskState:
    """Map a Slurm state (``RUNNING``, ``CANCELLED by 0``, ``CANCELLED+``) onto the closed vocabulary.

    A well-formed state this adapter does not know maps to ``unknown``; a malformed one raises.
    """
    match = _STATE_RE.fullmatch(raw.strip())
    if match is None:
        raise SlurmOutputError(f"line {line}: {raw!r} is not a Slurm job state", command=command, line=line)
    return _STATE_MAP.get(match.group(1), "unknown")


def parse_time(raw: str, *, command: str, line: int) -> str | None:
    """An ISO time as Slurm prints it (UTC), as ISO-8601 with ``Z``; placeholders give ``None``."""
    value = raw.strip()
    if value in _EMPTY_TIMES:
        return None
    if _TIME_RE.fullmatch(value) is None:
        raise SlurmOutputError(
            f"line {line}: {raw!r} is not an ISO time",
            command=command,
            line=line,
            hint="the runner must set SLURM_TIME_FORMAT=standard",
        )
    return value + "Z"


def optional_value(raw: str) -> str | None:
    value = raw.strip()
    return None if value in _EMPTY_VALUES else value


def parse_job_id(raw: str, *, command: str, line: int) -> str:
    """A plain numeric job id."""
    value = raw.strip()
    if _JOB_ID_RE.fullmatch(value) is None:
        raise SlurmOutputError(f"line {line}: {raw!r} is not a job id", command=command, line=line)
    return value


def expand_indices(spec: str, *, command: str, line: int) -> tuple[int, ...]:
    """Expand an array range expression (``3``, ``0-9``, ``1,3,5-7``, ``0-10:2``, with an optional ``%N`` throttle)."""
    body = spec.strip()
    if "%" in body:
        body, _, throttle = body.partition("%")
        if re.fullmatch(r"[0-9]{1,9}", throttle) is None:
            raise SlurmOutputError(f"line {line}: bad array throttle in {spec!r}", command=command, line=line)
    indices: list[int] = []
    for part in body.split(","):
        match = _RANGE_RE.fullmatch(part)
        if match is None:
            raise SlurmOutputError(f"line {line}: {spec!r} is not an array index range", command=command, line=line)
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        step = int(match.group(3)) if match.group(3) is not None else 1
        if last < first or step < 1 or len(indices) + (last - first) // step + 1 > MAX_EXPANDED_INDICES:
            raise SlurmOutputError(f"line {line}: array range {spec!r} is not usable", command=command, line=line)
        indices.extend(range(first, last + 1, step))
    return tuple(sorted(set(indices)))


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One array task (or plain job) as one source printed it, before squeue and sacct are merged."""

    job_id: str
    array_index: int | None
    job_name: str | None
    state: TaskState
    raw_state: str
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    nodes: str | None = None
    submit_time: str | None = None
    start_time: str | None = None
    end_time: str | None = None


def split_fields(text_line: str, count: int, *, command: str, line: int) -> list[str]:
    """Split a ``|``-separated line whose last field (the job name) may itself contain ``|``."""
    fields = text_line.split("|", count - 1)
    if len(fields) != count:
        raise SlurmOutputError(
            f"line {line}: expected {count} '|'-separated fields, got {len(fields)}: {text_line[:200]!r}",
            command=command,
            line=line,
        )
    return fields


def content_lines(text: str) -> list[tuple[int, str]]:
    """Numbered non-blank lines (1-based), trailing whitespace removed."""
    return [(n, raw.rstrip("\r\n ")) for n, raw in enumerate(text.split("\n"), start=1) if raw.strip()]


@dataclass(frozen=True, slots=True)
class SbatchReply:
    job_id: str
    cluster: str | None


def parse_sbatch(text: str) -> SbatchReply:
    """``sbatch --parsable`` output: ``ID`` or ``ID;cluster`` on the last non-blank line (site wrappers may chat above it)."""
    lines = content_lines(text)
    if not lines:
        raise SlurmOutputError(
            "sbatch printed no job id", command="sbatch", hint="the reply was lost; look it up by name"
        )
    number, last = lines[-1]
    job, sep, cluster = last.strip().partition(";")
    job_id = parse_job_id(job, command="sbatch", line=number)
    if sep and not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", cluster):
        raise SlurmOutputError(f"line {number}: {cluster!r} is not a cluster name", command="sbatch", line=number)
    return SbatchReply(job_id=job_id, cluster=cluster if sep else None)


def parse_scontrol_config(text: str) -> dict[str, str]:
    """``scontrol show config``: ``Key = value`` lines (the banner and section headers are skipped)."""
    config: dict[str, str] = {}
    for _, raw in content_lines(text):
        key, sep, value = raw.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_/.-]*", key):
            continue
        config[key] = value.strip()
    if not config:
        raise SlurmOutputError("scontrol show config printed no 'Key = value' line", command="scontrol")
    return config


@dataclass(frozen=True, slots=True)
class PartitionRow:
    """One sinfo row: the nodes of one partition that share a state, CPUs, memory and GRES."""

    name: str
    default: bool
    available: str
    time_limit: str
    nodes: int
    node_state: str
    node_list: str
    gres: str | None
    cpus: int | None = None
    """CPUs per node; None: sinfo printed no number."""
    memory_mb: int | None = None
    """RealMemory per node in MB; None: sinfo printed no number."""


SINFO_FORMAT = "%P|%a|%l|%D|%t|%N|%c|%m|%G"
_COUNT_RE = re.compile(r"([0-9]{1,12})\+?", re.ASCII)


def _count(raw: str, *, what: str, line: int) -> int | None:
    """A per-node count as sinfo prints it: ``4``, ``4+`` (the smallest of differing nodes); ``N/A`` is None."""
    value = raw.strip()
    if value in _EMPTY_VALUES:
        return None
    match = _COUNT_RE.fullmatch(value)
    if match is None:
        raise SlurmOutputError(f"line {line}: {raw[:50]!r} is not a {what}", command="sinfo", line=line)
    return int(match.group(1))


def parse_sinfo(text: str) -> tuple[PartitionRow, ...]:
    """``sinfo --noheader -o SINFO_FORMAT``: one row per partition and node state (and shape)."""
    rows: list[PartitionRow] = []
    for number, raw in content_lines(text):
        name, avail, limit, count, state, nodes, cpus, memory, gres = split_fields(raw, 9, command="sinfo", line=number)
        if re.fullmatch(r"[0-9]{1,9}", count.strip()) is None or not name.strip():
            raise SlurmOutputError(f"line {number}: bad sinfo row {raw[:200]!r}", command="sinfo", line=number)
        default = name.endswith("*")
        rows.append(
            PartitionRow(
                name=name.strip().rstrip("*"),
                default=default,
                available=avail.strip(),
                time_limit=limit.strip(),
                nodes=int(count),
                node_state=state.strip(),
                node_list=nodes.strip(),
                gres=optional_value(gres),
                cpus=_count(cpus, what="CPU count", line=number),
                memory_mb=_count(memory, what="memory size", line=number),
            )
        )
    return tuple(rows)


@dataclass(frozen=True, slots=True)
class AssociationRow:
    cluster: str
    account: str
    user: str
    partition: str | None


SACCTMGR_ASSOC_FORMAT = "Cluster,Account,User,Partition"


def parse_sacctmgr_associations(text: str) -> tuple[AssociationRow, ...]:
    """``sacctmgr --parsable2 --noheader show assoc format=SACCTMGR_ASSOC_FORMAT``."""
    rows: list[AssociationRow] = []
    for number, raw in content_lines(text):
        cluster, account, user, partition = split_fields(raw, 4, command="sacctmgr", line=number)
        if not cluster.strip() or not account.strip():
            raise SlurmOutputError(f"line {number}: bad association {raw[:200]!r}", command="sacctmgr", line=number)
        rows.append(AssociationRow(cluster.strip(), account.strip(), user.strip(), optional_value(partition)))
    return tuple(rows)
