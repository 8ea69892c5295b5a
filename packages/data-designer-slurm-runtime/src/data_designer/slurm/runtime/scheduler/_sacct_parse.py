"""Parse ``sacct --parsable2 --noheader -X -D --format=SACCT_FORMAT``: the accounting record.

Columns: ``JobID`` (``17``, ``16_3``, a pending range ``16_[3-5%2]``, or a step such as
``17.batch`` / ``16_0.extern`` when ``-X`` is not given: steps are skipped), ``JobIDRaw``,
``State`` (``CANCELLED by 0`` included), ``ExitCode`` (``code:signal``), ``Reason``,
``NodeList``, ``Submit``, ``Start``, ``End`` and, last because it may contain ``|``,
``JobName``.

Two Slurm 22.05 habits are kept visible rather than hidden: right after submission slurmdbd
knows a job only as a placeholder row named ``allocation`` whose state is meaningless (it can
read PENDING while the job runs), reported in :attr:`SacctRecords.placeholders`; and with
``-D`` a requeued task has one row per incarnation, oldest first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from data_designer.slurm.runtime.scheduler._slurm_parse import (
    JobRecord,
    SlurmOutputError,
    content_lines,
    expand_indices,
    normalise_state,
    optional_value,
    parse_time,
    split_fields,
)

SACCT_FORMAT = "JobID,JobIDRaw,State,ExitCode,Reason,NodeList,Submit,Start,End,JobName"
PLACEHOLDER_NAME = "allocation"
_COMMAND = "sacct"
_JOB_ID_RE = re.compile(
    r"([1-9]\d{0,18})(?:_(\d{1,10}|\[[0-9,\-:%]{1,100000}\]))?(\+\d{1,6})?(\.[A-Za-z0-9_+-]{1,64})?", re.ASCII
)
_RAW_ID_RE = re.compile(r"[1-9]\d{0,18}(\.[A-Za-z0-9_+-]{1,64})?", re.ASCII)
_EXIT_RE = re.compile(r"(\d{1,5}):(\d{1,5})", re.ASCII)


@dataclass(frozen=True, slots=True)
class SacctRecords:
    """Task records in printed order (a requeued task's incarnations oldest first) and placeholder job ids."""

    records: tuple[JobRecord, ...]
    placeholders: tuple[str, ...]


def parse_exit_code(raw: str, *, command: str, line: int) -> tuple[int | None, int | None]:
    value = raw.strip()
    if value == "":
        return None, None
    match = _EXIT_RE.fullmatch(value)
    if match is None:
        raise SlurmOutputError(f"line {line}: {raw!r} is not an exit code 'code:signal'", command=command, line=line)
    return int(match.group(1)), int(match.group(2))


def parse_sacct(text: str) -> SacctRecords:
    """Records per array task or plain job; steps skipped, pending ranges expanded, placeholders set apart."""
    records: list[JobRecord] = []
    placeholders: list[str] = []
    for number, raw in content_lines(text):
        job, raw_id, state, exit_code, reason, nodes, submit, start, end, name = split_fields(
            raw, 10, command=_COMMAND, line=number
        )
        match = _JOB_ID_RE.fullmatch(job.strip())
        if match is None or _RAW_ID_RE.fullmatch(raw_id.strip()) is None:
            raise SlurmOutputError(f"line {number}: bad job id {job!r}/{raw_id!r}", command=_COMMAND, line=number)
        master, task, het, step = match.groups()
        if step is not None:  # a step's row (17.batch): the task's own row says it all
            continue
        code, signal = parse_exit_code(exit_code, command=_COMMAND, line=number)
        single = int(task) if task is not None and not task.startswith("[") else None
        template = JobRecord(
            job_id=master + (het or ""),
            array_index=single,
            job_name=name,
            state=normalise_state(state, command=_COMMAND, line=number),
            raw_state=state.strip(),
            exit_code=code,
            signal=signal,
            reason=optional_value(reason),
            nodes=optional_value(nodes),
            submit_time=parse_time(submit, command=_COMMAND, line=number),
            start_time=parse_time(start, command=_COMMAND, line=number),
            end_time=parse_time(end, command=_COMMAND, line=number),
        )
        if single is not None:
            records.append(template)
        elif task is None:
            if name == PLACEHOLDER_NAME and het is None:
                placeholders.append(master)
            else:
                records.append(template)
        elif task.startswith("["):
            indices = expand_indices(task[1:-1], command=_COMMAND, line=number)
            records.extend(replace(template, array_index=index) for index in indices)
    return SacctRecords(records=tuple(records), placeholders=tuple(dict.fromkeys(placeholders)))
