"""What the supervisor writes before it starts a client worker, for tests that start a worker without one."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence

from data_designer.slurm.contracts.records import AttemptRecord, IndexRange
from data_designer.slurm.runtime.store import AttemptWriter, RunLayout, system_clock


def assign_attempt(
    layout: RunLayout, *, plan_digest: str, shard: int, attempt: int, assigned: Sequence[tuple[int, int]]
) -> AttemptRecord:
    """Write ``attempt.json`` of (shard, attempt) assigning ``assigned`` ranges, as the supervisor would."""
    record = AttemptRecord(
        run_id=str(layout.run_id),
        plan_digest=plan_digest,
        shard=shard,
        attempt=attempt,
        chunk=0,
        array_task=shard,
        job_id=None,
        restart_count=0,
        hostname=socket.gethostname(),
        nodes=("localhost",),
        node_addresses=("127.0.0.1",),
        supervisor_pid=os.getpid(),
        supervisor_started_at=system_clock(),
        heartbeat_interval_s=5.0,
        assigned=tuple(IndexRange(start, stop) for start, stop in assigned),
    )
    AttemptWriter(layout, shard, attempt).write_attempt(record)
    return record
