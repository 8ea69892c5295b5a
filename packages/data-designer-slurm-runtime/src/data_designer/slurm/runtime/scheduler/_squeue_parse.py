"""Parse ``squeue --noheader -t all -o SQUEUE_FORMAT``: live (and recently finished) jobs.

Columns: array job id (``%F``, the job id itself for a plain job), array task (``%K``: ``N/A``
for a plain job, an index, or a pending range such as ``2-5%2``), the printed id (``%i``),
state (``%T``), reason (``%r``), nodes (``%N``), submit and start times (``%V``, ``%S``) and,
last because it may contain ``|``, the job name (``%j``). A pending range expands to one
record per index. squeue prints no exit code and no trustworthy end time (it projects one).
"""

from __future__ import annotations

from dataclasses import replace

from data_designer.slurm.runtime.scheduler._slurm_parse import (
    JobRecord,
    content_lines,
    expand_indices,
    normalise_state,
    optional_value,
    parse_job_id,
    parse_time,
    split_fields,
)

SQUEUE_FORMAT = "%F|%K|%i|%T|%r|%N|%V|%S|%j"
_COMMAND = "squeue"


def parse_squeue(text: str) -> tuple[JobRecord, ...]:
    """One record per array task (pending ranges expanded) or plain job."""
    records: list[JobRecord] = []
    for number, raw in content_lines(text):
        array_id, task, _printed, state, reason, nodes, submit, start, name = split_fields(
            raw, 9, command=_COMMAND, line=number
        )
        task = task.strip()
        single = int(task) if task.isascii() and task.isdigit() else None
        template = JobRecord(
            job_id=parse_job_id(array_id, command=_COMMAND, line=number),
            array_index=single,
            job_name=name,
            state=normalise_state(state, command=_COMMAND, line=number),
            raw_state=state.strip(),
            reason=optional_value(reason),
            nodes=optional_value(nodes),
            submit_time=parse_time(submit, command=_COMMAND, line=number),
            start_time=parse_time(start, command=_COMMAND, line=number),
        )
        if single is not None or task in ("N/A", ""):
            records.append(template)
        else:
            indices = expand_indices(task, command=_COMMAND, line=number)
            records.extend(replace(template, array_index=index) for index in indices)
    return tuple(records)
