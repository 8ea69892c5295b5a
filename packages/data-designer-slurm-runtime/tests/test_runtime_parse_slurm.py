"""Parsers over real Slurm 22.05 outputs captured from the local cluster (tests/data) and over hostile text."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_designer.slurm.contracts import SlurmExtensionError, UnavailableError
from data_designer.slurm.runtime.scheduler import (
    JobRecord,
    SlurmOutputError,
    parse_sacct,
    parse_sacctmgr_associations,
    parse_sbatch,
    parse_scontrol_config,
    parse_sinfo,
    parse_squeue,
)
from data_designer.slurm.runtime.scheduler._slurm_parse import expand_indices, normalise_state

DATA = Path(__file__).parent / "data"


def data(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def by_task(records: tuple[JobRecord, ...]) -> dict[tuple[str, int | None], JobRecord]:
    return {(r.job_id, r.array_index): r for r in records}


def test_sbatch_plain_and_federated_replies() -> None:
    assert parse_sbatch(data("sbatch_parsable.txt")).job_id == "16"
    reply = parse_sbatch("1234;ddslurm\n")
    assert (reply.job_id, reply.cluster) == ("1234", "ddslurm")
    assert parse_sbatch("site wrapper: using account ddtest\n77\n").job_id == "77"


@pytest.mark.parametrize("text", ["", "\n\n", "Submitted batch job 12\n", "12;\n", "0\n", "12;bad name\n", "-3\n"])
def test_sbatch_garbage_raises_typed_error(text: str) -> None:
    with pytest.raises(SlurmOutputError) as caught:
        parse_sbatch(text)
    assert isinstance(caught.value, UnavailableError)
    assert caught.value.info.operation == "parse_sbatch_output"


def test_squeue_throttled_array_expands_pending_range() -> None:
    records = by_task(parse_squeue(data("squeue_array_throttled.txt")))
    assert [i for (j, i) in records if j == "189"] == [0, 1, 4, 5, 2, 3]
    assert records[("189", 4)].state == "pending"
    assert records[("189", 4)].reason == "JobArrayTaskLimit"
    assert records[("189", 4)].nodes is None
    assert records[("189", 4)].start_time is None
    assert records[("189", 2)].state == "running"
    assert records[("189", 2)].start_time == "2026-11-29T15:27:11Z"
    assert records[("189", 0)].state == "completed"
    failed = records[("190", None)]
    assert (failed.state, failed.reason, failed.nodes, failed.exit_code) == ("failed", "NonZeroExitCode", "node1", None)
    assert records[("191", 1)].job_name == "cap-long"
    assert records[("191", 1)].submit_time == "2026-11-29T15:27:08Z"


def test_sacct_lagging_behind_squeue() -> None:
    records = by_task(parse_sacct(data("sacct_array_throttled.txt")).records)
    assert [records[("189", i)].state for i in range(6)] == ["completed"] * 2 + ["pending"] * 4
    assert records[("190", None)].exit_code == 3
    assert records[("191", 2)].state == "running"
    assert records[("191", 2)].end_time is None


def test_sacct_placeholders_hide_even_a_finished_job() -> None:
    parsed = parse_sacct(data("sacct_placeholders_mixed.txt"))
    assert parsed.records == ()
    assert parsed.placeholders == ("190", "191")


def test_squeue_running_states_seen_on_the_cluster() -> None:
    records = by_task(parse_squeue(data("squeue_running.txt")))
    assert records[("32", None)].state == "out_of_memory"
    assert records[("32", None)].reason == "OutOfMemory"
    assert records[("31", 1)].state == "running"
    assert records[("34", None)].state == "completed"
    assert len(records) == 7


def test_squeue_after_cancel_and_requeue() -> None:
    records = by_task(parse_squeue(data("squeue_cancel_requeue.txt")))
    assert records[("31", 1)].raw_state == "CANCELLED"
    assert records[("31", 1)].state == "cancelled"
    requeued = records[("33", None)]
    assert (requeued.state, requeued.reason, requeued.nodes) == ("pending", "BeginTime", None)


def test_squeue_job_name_may_contain_the_separator() -> None:
    (record,) = parse_squeue("5|N/A|5|RUNNING|None|node1|2026-01-01T00:00:00|2026-01-01T00:00:01|a|b c\n")
    assert record.job_name == "a|b c"


def test_sacct_lag_pending_array_range_and_steps() -> None:
    parsed = parse_sacct(data("sacct_array_lag.txt"))
    records = by_task(parsed.records)
    assert sorted(i for (j, i) in records if j == "16" and i is not None) == [0, 1, 2, 3, 4, 5]
    assert all(records[("16", i)].state == "pending" for i in range(6))
    assert records[("17", None)].exit_code == 3
    assert records[("17", None)].signal == 0
    assert records[("18", 2)].state == "running"
    assert ("18", 0) not in records  # accounting lags: squeue already shows 18_0 running
    assert parsed.placeholders == ()
    assert all(r.job_name != "batch" for r in parsed.records)


def test_sacct_allocation_placeholder_is_set_apart() -> None:
    for name in ("sacct_placeholder.txt", "sacct_placeholder_completed.txt"):
        parsed = parse_sacct(data(name))
        assert parsed.records == ()
        assert parsed.placeholders == ("26",)


def test_sacct_final_states_of_every_kind() -> None:
    records = by_task(parse_sacct(data("sacct_final.txt")).records)
    assert records[("30", None)].state == "timeout"
    assert records[("30", None)].end_time == "2026-11-29T15:09:13Z"
    oom = records[("32", None)]
    assert (oom.state, oom.exit_code, oom.signal) == ("out_of_memory", 0, 125)
    assert records[("34", None)].state == "completed"
    cancelled = records[("31", 1)]
    assert (cancelled.state, cancelled.raw_state) == ("cancelled", "CANCELLED by 0")


def test_sacct_duplicates_keep_every_incarnation_in_order() -> None:
    rows = [r for r in parse_sacct(data("sacct_final.txt")).records if r.job_id == "33"]
    assert [r.state for r in rows] == ["requeued", "completed"]
    assert rows[1].reason == "BeginTime"


def test_sacct_with_steps_gives_the_same_allocations() -> None:
    with_steps = parse_sacct(data("sacct_final_steps.txt")).records
    without = parse_sacct(data("sacct_final.txt")).records
    assert sorted(map(repr, with_steps)) == sorted(map(repr, without))


def test_sacct_cancel_requeue_snapshot() -> None:
    records = by_task(parse_sacct(data("sacct_cancel_requeue.txt")).records)
    assert records[("33", None)].state == "requeued"
    assert records[("31", 1)].state == "cancelled"
    assert records[("31", 0)].state == "running"
    assert records[("31", 0)].end_time is None


@pytest.mark.parametrize(
    "line",
    [
        "x|1|RUNNING|0:0|None|n|2026-01-01T00:00:00|Unknown|Unknown|n",
        "1|1|running fast|0:0|None|n|2026-01-01T00:00:00|Unknown|Unknown|n",
        "1|1|RUNNING|zero|None|n|2026-01-01T00:00:00|Unknown|Unknown|n",
        "1|1|RUNNING|0:0|None|n|01/02/26 10:00|Unknown|Unknown|n",
        "1|1|RUNNING|0:0",
        "1_[0-999999999]|1|PENDING|0:0|None|n|2026-01-01T00:00:00|Unknown|Unknown|n",
    ],
)
def test_sacct_malformed_rows_raise_typed_error(line: str) -> None:
    with pytest.raises(SlurmOutputError):
        parse_sacct(line + "\n")


def test_state_vocabulary() -> None:
    assert normalise_state("CANCELLED by 0", command="t", line=1) == "cancelled"
    assert normalise_state("CANCELLED+", command="t", line=1) == "cancelled"
    assert normalise_state("NODE_FAIL", command="t", line=1) == "node_fail"
    assert normalise_state("PREEMPTED", command="t", line=1) == "preempted"
    assert normalise_state("REQUEUE_HOLD", command="t", line=1) == "requeued"
    assert normalise_state("SOMETHING_NEW", command="t", line=1) == "unknown"


def test_array_index_ranges() -> None:
    assert expand_indices("2-5%2", command="t", line=1) == (2, 3, 4, 5)
    assert expand_indices("1,3,5-7", command="t", line=1) == (1, 3, 5, 6, 7)
    assert expand_indices("0-10:5", command="t", line=1) == (0, 5, 10)
    for bad in ("", "5-2", "1-3%", "a", "0-4:0"):
        with pytest.raises(SlurmOutputError):
            expand_indices(bad, command="t", line=1)


def test_sinfo_partitions() -> None:
    rows = parse_sinfo(data("sinfo.txt"))
    assert [(r.name, r.default, r.nodes, r.node_state, r.cpus, r.memory_mb, r.gres) for r in rows] == [
        ("cpu", True, 1, "mix", 4, 4000, "gpu:2"),
        ("cpu", True, 3, "idle", 4, 4000, "gpu:2"),
        ("gpu", False, 1, "mix", 4, 4000, "gpu:2"),
        ("gpu", False, 3, "idle", 4, 4000, "gpu:2"),
        ("short", False, 4, "idle", 4, 4000, "gpu:2"),
    ]
    assert [r.time_limit for r in rows] == ["infinite"] * 4 + ["30:00"]


@pytest.mark.parametrize(("cpus", "memory", "expected"), [("4+", "4000+", (4, 4000)), ("N/A", "N/A", (None, None))])
def test_sinfo_counts_of_differing_or_unknown_nodes(
    cpus: str, memory: str, expected: tuple[int | None, int | None]
) -> None:
    (row,) = parse_sinfo(f"gpu|up|1-00:00:00|2|idle|node[1-2]|{cpus}|{memory}|gpu:2\n")
    assert (row.cpus, row.memory_mb) == expected


def test_sinfo_with_the_old_seven_fields_is_unreadable() -> None:
    with pytest.raises(SlurmOutputError, match="expected 9"):
        parse_sinfo("cpu*|up|infinite|4|idle|node[1-4]|gpu:2\n")


def test_scontrol_show_config() -> None:
    config = parse_scontrol_config(data("scontrol_show_config.txt"))
    assert config["MaxArraySize"] == "11"
    assert config["MinJobAge"] == "10 sec"
    assert config["ClusterName"] == "ddslurm"
    assert config["SLURM_VERSION"] == "22.05.8"
    assert config["AccountingStorageType"] == "accounting_storage/slurmdbd"


def test_sacctmgr_associations() -> None:
    rows = parse_sacctmgr_associations(data("sacctmgr_assoc.txt"))
    assert [(r.cluster, r.account, r.user, r.partition) for r in rows] == [
        ("ddslurm", "ddtest", "root", None),
        ("ddslurm", "root", "root", None),
    ]


PARSERS = [parse_sbatch, parse_squeue, parse_sacct, parse_sinfo, parse_scontrol_config, parse_sacctmgr_associations]
SLURMISH = st.text(alphabet=st.sampled_from("0123456789_[]-%,:|.+ \nabcNAUPRSTIGEDLFCO/\tT;by"), max_size=300)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(max_size=300), SLURMISH), which=st.sampled_from(range(len(PARSERS))))
def test_any_text_parses_or_raises_the_typed_error(text: str, which: int) -> None:
    with contextlib.suppress(SlurmOutputError):  # anything else escaping fails the test
        PARSERS[which](text)


def test_the_parse_error_is_an_unavailable_error_of_the_tree() -> None:
    error = SlurmOutputError("x", command="sacct", line=3)
    assert isinstance(error, SlurmExtensionError)
    assert (error.exit_code, error.info.line, error.command) == (5, 3, "sacct")


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (parse_sinfo, "cpu*|up|infinite|²|idle|node1|4|4000|gpu:2\n"),
        (parse_sinfo, "cpu*|up|infinite|1|idle|node1|٤|4000|gpu:2\n"),
        (parse_sbatch, "١٢\n"),
        (parse_squeue, "١|N/A|1|RUNNING|None|n|2026-01-01T00:00:00|N/A|x\n"),
        (parse_sacct, "1|1|RUNNING|٣:0|None|n|2026-01-01T00:00:00|Unknown|Unknown|x\n"),
    ],
)
def test_non_ascii_digits_are_not_numbers(parser: Callable[[str], object], text: str) -> None:
    with pytest.raises(SlurmOutputError):
        parser(text)
