"""Why the allocation is being stopped: the time-limit warning, the time limit, a preemption or requeue, a cancel.

The batch script asks for ``--signal=B:USR1@<warning lead>``, so ``SIGUSR1`` reaching the supervisor is the
time-limit warning (``scancel --batch --signal=USR1`` sends the same). ``SIGTERM`` says only that Slurm is
ending the job; one ``scontrol show job -o <job id>`` tells why, as Slurm 22.05 shows it while the job is
``COMPLETING`` (checked on the local cluster): ``Reason=TimeLimit`` at the time limit, ``Restarts`` one above
the task's ``SLURM_RESTART_COUNT`` when it is being requeued (``scontrol requeue``, or a preemption with
``PreemptMode=REQUEUE``), ``JobState=PREEMPTED`` or a ``Preempt...`` reason for a preemption that cancels, ``JobState=NODE_FAIL`` or
``Reason=NodeDown`` when a node of the allocation failed or was set DOWN (``node_fail``, naming ``NodeList``),
and ``Reason=None`` for ``scancel``. ``SIGINT`` (an interactive stop) and anything the scheduler cannot
explain are ``cancelled``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from data_designer.slurm.contracts.records import FinalStatus
from data_designer.slurm.runtime.scheduler import CommandRunner

SCONTROL_TIMEOUT_S = 3.0
"""Short: under SIGTERM the job has only Slurm's ``KillWait`` left."""
_FIELD = re.compile(r"(?:^|\s)(JobState|Reason|Restarts|NodeList)=(\S*)")
_NODE_FAILURE_STATES = frozenset({"NODE_FAIL", "BOOT_FAIL"})
_NODE_FAILURE_REASONS = frozenset({"NodeDown", "NodeFail", "Node_Fail", "NodeBoot", "BootFail"})


@dataclass(frozen=True)
class StopCause:
    """How a stopped attempt is classified, and one line saying why."""

    status: FinalStatus
    detail: str


def job_fields(text: str) -> dict[str, str]:
    """``JobState``, ``Reason``, ``Restarts`` and ``NodeList`` from ``scontrol show job -o`` output (first value of each)."""
    fields: dict[str, str] = {}
    for key, value in _FIELD.findall(text):
        fields.setdefault(key, value)
    return fields


def classify_fields(fields: Mapping[str, str], *, restart_count: int) -> StopCause:
    """The cause of a SIGTERM from the job's fields as scontrol shows them while it ends."""
    state, reason = fields.get("JobState", ""), fields.get("Reason", "")
    restarts = fields.get("Restarts", "")
    if restarts.isdigit() and int(restarts) > restart_count:
        return StopCause("preempted", f"Slurm is requeueing the job (restart {restarts}); a new attempt continues")
    if state in _NODE_FAILURE_STATES or reason in _NODE_FAILURE_REASONS:
        nodes = fields.get("NodeList", "")
        where = f"node(s) {nodes}" if nodes and nodes != "(null)" else "a node of the allocation"
        return StopCause(
            "node_fail",
            f"{where} failed or was set DOWN (JobState={state or '?'}, Reason={reason or '?'}); "
            "'data-designer slurm retry RUN' runs the shard again",
        )
    if state == "PREEMPTED" or reason.startswith("Preempt"):
        return StopCause("preempted", f"the job was preempted (JobState={state}, Reason={reason})")
    if state in ("TIMEOUT", "DEADLINE") or reason in ("TimeLimit", "DeadLine"):
        return StopCause("time_limit", f"the job reached its time limit (JobState={state}, Reason={reason})")
    return StopCause("cancelled", f"the job was cancelled (JobState={state or '?'}, Reason={reason or '?'})")


def classify_stop(
    received: Sequence[str], environ: Mapping[str, str], runner: CommandRunner, *, restart_count: int
) -> StopCause:
    """The cause of the stop from the first signal received (and, for SIGTERM, one scontrol call on the job's
    ``SLURM_JOB_ID``); ``restart_count``: the task's ``SLURM_RESTART_COUNT`` as the supervisor read it."""
    first = received[0] if received else ""
    if first == "SIGUSR1":
        return StopCause("time_limit", "the time-limit warning (SIGUSR1) arrived")
    if first != "SIGTERM":
        return StopCause("cancelled", f"{first or 'a stop'} was received")
    job_id = environ.get("SLURM_JOB_ID", "")
    if not job_id.isdigit():
        return StopCause("cancelled", "SIGTERM was received outside a Slurm job")
    result = runner.run(["scontrol", "show", "job", "-o", job_id], timeout_s=SCONTROL_TIMEOUT_S)
    if not result.ok:
        return StopCause("cancelled", f"SIGTERM was received and scontrol could not say why: {result.describe()}")
    return classify_fields(job_fields(result.stdout), restart_count=restart_count)
