"""``supervisor._stopping``: the cause of a SIGTERM from the job's fields as ``scontrol show job -o`` prints them."""

from __future__ import annotations

import pytest

from data_designer.slurm.runtime.supervisor._stopping import classify_fields, job_fields

LINE = "JobId=77 JobName=dd-x JobState={state} Reason={reason} Restarts={restarts} NodeList=node3 BatchHost=node3"


def cause(state: str, reason: str, restarts: int = 0) -> tuple[str, str]:
    found = classify_fields(job_fields(LINE.format(state=state, reason=reason, restarts=restarts)), restart_count=0)
    return found.status, found.detail


@pytest.mark.parametrize(("state", "reason"), [("NODE_FAIL", "None"), ("COMPLETING", "NodeDown"), ("BOOT_FAIL", "x")])
def test_a_node_failure_is_node_fail_naming_the_node_never_cancelled(state: str, reason: str) -> None:
    status, detail = cause(state, reason)
    assert status == "node_fail"
    assert detail.startswith("node(s) node3 failed or was set DOWN")
    assert "retry" in detail


def test_the_other_causes_keep_their_classification() -> None:
    assert cause("COMPLETING", "TimeLimit")[0] == "time_limit"
    assert cause("PREEMPTED", "None")[0] == "preempted"
    assert cause("COMPLETING", "None", restarts=1)[0] == "preempted"  # requeued
    assert cause("CANCELLED", "None")[0] == "cancelled"
