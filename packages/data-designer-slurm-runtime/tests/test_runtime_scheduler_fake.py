"""SlurmScheduler against the fake Slurm: source failures, rejections, lost replies, merging rules."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_designer.slurm.contracts import (
    TERMINAL_TASK_STATES,
    ArrayTaskBinding,
    InvalidInputError,
    SubmissionChunk,
    SubmissionUnit,
    UnavailableError,
)
from data_designer.slurm.runtime.scheduler import CommandResult, CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.testing import CountingRunner, FailureMode, FakeSlurm

SCRIPT = "#!/bin/bash\n# fake-slurm: run=5\nsleep 5\n"


def unit(*names: str, array: str = "0-1", sbatch_args: Sequence[str] = ()) -> SubmissionUnit:
    tasks = (ArrayTaskBinding(index=0, shard=0, attempt=1), ArrayTaskBinding(index=1, shard=1, attempt=1))
    chunks = tuple(
        SubmissionChunk(job_name=n, chunk=k, array_spec=array, index_offset=2 * k, tasks=tasks)
        for k, n in enumerate(names)
    )
    return SubmissionUnit(script=SCRIPT, sbatch_args=tuple(sbatch_args), chunks=chunks)


@pytest.fixture
def fake() -> FakeSlurm:
    return FakeSlurm()


def scheduler(fake: FakeSlurm, runner: CommandRunner | None = None) -> SlurmScheduler:
    return SlurmScheduler(fake if runner is None else runner, clock=fake.clock, sleep=fake.sleep)


def submitted(fake: FakeSlurm, *names: str) -> list[str]:
    result = scheduler(fake).submit(unit(*names), since=fake.clock() - timedelta(hours=1))
    return [c.job_id for c in result.chunks]


def test_ids_are_deterministic_and_observed_at_comes_from_the_clock(fake: FakeSlurm) -> None:
    assert submitted(fake, "a", "b") == ["1000", "1001"]
    fake.advance(5)
    observation = scheduler(fake).observe(["1000", "1001"])
    assert observation.observed_at == "2026-01-01T00:00:05.000000Z"
    assert {t.observed_at for t in observation.tasks} == {observation.observed_at}
    assert [(t.job_id, t.array_index) for t in observation.tasks] == [
        ("1000", 0),
        ("1000", 1),
        ("1001", 0),
        ("1001", 1),
    ]


def test_many_jobs_are_observed_with_one_squeue_and_one_sacct(fake: FakeSlurm) -> None:
    ids = submitted(fake, *[f"job{k}" for k in range(50)])
    fake.advance(3)
    counting = CountingRunner(fake)
    observation = scheduler(fake, counting).observe(ids)
    assert (observation.calls, counting.count("squeue"), counting.count("sacct"), len(counting.calls)) == (2, 1, 1, 2)
    assert len(observation.tasks) == 100


def test_disabled_accounting_is_reported_and_squeue_still_used(fake: FakeSlurm) -> None:
    (job,) = submitted(fake, "a")
    fake.advance(3)
    fake.fail("sacct", "disabled")
    observation = scheduler(fake).observe([job])
    assert observation.sacct.status == "disabled"
    assert "accounting storage is disabled" in (observation.sacct.detail or "")
    assert observation.squeue.status == "ok"
    assert {t.state for t in observation.tasks} == {"running"}


@pytest.mark.parametrize(
    ("mode", "status"), [("timeout", "timed_out"), ("error", "failed"), ("garbage", "failed"), ("not_found", "failed")]
)
def test_failing_sacct_is_never_read_as_success(fake: FakeSlurm, mode: FailureMode, status: str) -> None:
    (job,) = submitted(fake, "a")
    fake.advance(30)  # finished, and gone from squeue after MinJobAge
    fake.fail("sacct", mode)
    observation = scheduler(fake).observe([job])
    assert observation.sacct.status == status
    assert observation.tasks == ()
    assert observation.missing_job_ids == (job,)


def test_failing_squeue_falls_back_to_sacct(fake: FakeSlurm) -> None:
    (job,) = submitted(fake, "a")
    fake.advance(4)
    fake.fail("squeue", "garbage")
    observation = scheduler(fake).observe([job])
    assert observation.squeue.status == "failed"
    assert "Bad Gateway" in (observation.squeue.detail or "")
    assert {(t.state, t.source) for t in observation.tasks} == {("running", "sacct")}


def test_both_sources_down_raise_unavailable(fake: FakeSlurm) -> None:
    (job,) = submitted(fake, "a")
    fake.fail("squeue", "timeout")
    fake.fail("sacct", "error")
    with pytest.raises(UnavailableError) as caught:
        scheduler(fake).observe([job])
    assert caught.value.exit_code == 5
    assert caught.value.info.code == "scheduler_unavailable"
    assert "squeue timed_out" in str(caught.value)


def test_placeholder_row_is_lag_not_state(fake: FakeSlurm) -> None:
    (job,) = submitted(fake, "a")
    fake.advance(1)
    fake.fail("squeue", "error")
    observation = scheduler(fake).observe([job])
    assert observation.accounting_lag
    assert observation.tasks == ()
    assert observation.missing_job_ids == (job,)


def test_terminal_state_prefers_sacct_exit_code(fake: FakeSlurm) -> None:
    (job,) = submitted(fake, "a")
    fake.advance(3)
    fake.set_state(job, 1, "FAILED", exit_code=7)
    observation = scheduler(fake).observe([job])
    failed = next(t for t in observation.tasks if t.array_index == 1)
    assert (failed.state, failed.exit_code, failed.source) == ("failed", 7, "sacct")


def test_node_failure_with_requeue_is_a_restart(fake: FakeSlurm) -> None:
    (job,) = submitted(fake, "a")
    fake.advance(2)
    node = scheduler(fake).observe([job]).tasks[0].nodes
    assert node is not None
    fake.fail_node(node)
    requeued = [t for t in scheduler(fake).observe([job]).tasks if t.restarts]
    assert requeued
    assert {(t.state, t.raw_state, t.restarts) for t in requeued} == {("requeued", "PENDING", 1)}


def test_unknown_job_is_missing(fake: FakeSlurm) -> None:
    observation = scheduler(fake).observe(["4242"])
    assert observation.missing_job_ids == ("4242",)
    assert observation.squeue.status == "ok"


def test_observing_nothing_runs_nothing(fake: FakeSlurm) -> None:
    observation = scheduler(fake).observe([])
    assert (observation.calls, observation.squeue.status, observation.sacct.status) == (0, "not_run", "not_run")
    assert fake.calls == []


@pytest.mark.parametrize("bad", ["", "12a", "0", "1,2", "12_3"])
def test_bad_job_ids_are_invalid_input(fake: FakeSlurm, bad: str) -> None:
    with pytest.raises(InvalidInputError):
        scheduler(fake).observe([bad])


def test_federated_reply_keeps_the_cluster() -> None:
    fake = FakeSlurm(cluster_reply=True)
    result = scheduler(fake).submit(unit("a"), since=fake.clock())
    assert (result.chunks[0].job_id, result.chunks[0].cluster) == ("1000", "fakeslurm")


def test_rejected_submission_is_invalid_input(fake: FakeSlurm) -> None:
    with pytest.raises(InvalidInputError) as caught:
        scheduler(fake).submit(unit("a", sbatch_args=["--account=ddother"]), since=fake.clock())
    assert caught.value.info.code == "sbatch_rejected"
    assert "Invalid account" in str(caught.value)


def test_unreachable_controller_on_sbatch_is_unavailable(fake: FakeSlurm) -> None:
    fake.fail("sbatch", "error")
    with pytest.raises(UnavailableError) as caught:
        scheduler(fake).submit(unit("a"), since=fake.clock())
    assert caught.value.info.code == "scheduler_unreachable"


def test_lost_reply_then_recovery_submits_nothing_twice(fake: FakeSlurm) -> None:
    fake.lose_sbatch_replies(1)
    with pytest.raises(UnavailableError) as caught:
        scheduler(fake).submit(unit("a", "b"), since=fake.clock())
    assert caught.value.info.code == "sbatch_reply_lost"
    result = scheduler(fake).submit(unit("a", "b"), since=fake.clock())
    assert [(c.job_id, c.recovered) for c in result.chunks] == [("1000", True), ("1001", False)]
    assert fake.count_calls("sbatch") == 2


def test_unreadable_sbatch_reply_is_a_lost_reply(fake: FakeSlurm) -> None:
    class Chatty(CountingRunner):
        def run(
            self, argv: Sequence[str], *, timeout_s: float, stdin: str | None = None, environment: object = None
        ) -> CommandResult:
            result = super().run(argv, timeout_s=timeout_s, stdin=stdin)
            return CommandResult(result.argv, 0, "", "", 0.0) if argv[0] == "sbatch" else result

    with pytest.raises(UnavailableError) as caught:
        scheduler(fake, Chatty(fake)).submit(unit("a"), since=fake.clock())
    assert caught.value.info.code == "sbatch_reply_lost"
    assert scheduler(fake).submit(unit("a"), since=fake.clock()).recovered == 1


def test_lookup_needs_sacct_unless_accounting_is_disabled(fake: FakeSlurm) -> None:
    fake.fail("sacct", "timeout")
    with pytest.raises(UnavailableError) as caught:
        scheduler(fake).submit(unit("a"), since=fake.clock())
    assert caught.value.info.code == "submission_lookup_failed"
    assert fake.count_calls("sbatch") == 0
    fake.fail("sacct", "disabled")
    assert scheduler(fake).submit(unit("a"), since=fake.clock()).submitted == 1


def test_lookup_finds_jobs_only_sacct_still_knows(fake: FakeSlurm) -> None:
    submitted(fake, "a")
    fake.advance(30)
    result = scheduler(fake).submit(unit("a"), since=fake.clock() - timedelta(minutes=1))
    assert (result.recovered, result.sbatch_calls) == (1, 0)
    later = scheduler(fake).submit(unit("a"), since=fake.clock())  # -S after the submission: not found
    assert later.submitted == 1


@pytest.mark.parametrize("name", ["a,b", "has space", "x" * 201])
def test_unlookupable_job_names_are_refused(fake: FakeSlurm, name: str) -> None:
    with pytest.raises(InvalidInputError):
        scheduler(fake).submit(unit(name), since=fake.clock())
    assert fake.calls == []


def test_cancel_unconfirmed_and_failed(fake: FakeSlurm) -> None:
    (job,) = submitted(fake, "a")
    fake.advance(3)

    class Deaf(CountingRunner):
        def run(
            self, argv: Sequence[str], *, timeout_s: float, stdin: str | None = None, environment: object = None
        ) -> CommandResult:
            if argv[0] == "scancel":
                return CommandResult(tuple(argv), 0, "", "", 0.0)
            return super().run(argv, timeout_s=timeout_s, stdin=stdin)

    with pytest.raises(UnavailableError) as caught:
        scheduler(fake, Deaf(fake)).cancel([job], confirm_timeout_s=1, poll_s=0.5)
    assert caught.value.info.code == "cancel_unconfirmed"
    fake.fail("scancel", "error")
    with pytest.raises(UnavailableError) as failed:
        scheduler(fake).cancel([job])
    assert failed.value.info.code == "cancel_failed"


def test_cancelling_a_purged_job_is_confirmed(fake: FakeSlurm) -> None:
    observation = scheduler(fake).cancel(["777"])
    assert observation.missing_job_ids == ("777",)


def test_cluster_facts(fake: FakeSlurm) -> None:
    sched = scheduler(fake)
    assert sched.cluster_config()["MaxArraySize"] == "11"
    assert [p.name for p in sched.partitions()] == ["cpu", "gpu"]
    assert [a.account for a in sched.associations("root")] == ["ddtest"]
    fake.fail("sinfo", "error")
    with pytest.raises(UnavailableError):
        sched.partitions()


def test_naive_since_is_refused(fake: FakeSlurm) -> None:
    with pytest.raises(InvalidInputError) as caught:
        scheduler(fake).submit(unit("a"), since=fake.clock().replace(tzinfo=None))
    assert caught.value.info.code == "naive_datetime"


def test_adapter_arguments_come_last_so_they_win(fake: FakeSlurm) -> None:
    scheduler(fake).submit(unit("a", sbatch_args=["--job-name=other", "--array=0-9"]), since=fake.clock())
    (argv,) = [a for a in fake.calls if a[0] == "sbatch"]
    assert argv == ("sbatch", "--job-name=other", "--array=0-9", "--parsable", "--job-name=a", "--array=0-1")
    assert fake.jobs[1000].name == "a"
    assert sorted(i for i in fake.jobs[1000].tasks if i is not None) == [0, 1]


def test_fake_answers_version_like_slurm(fake: FakeSlurm) -> None:
    for command in ("sbatch", "squeue", "sacct", "scancel", "scontrol", "sinfo", "sacctmgr"):
        result = fake.run([command, "--version"], timeout_s=5)
        assert (result.returncode, result.stdout) == (0, "slurm 22.05.8\n")
    assert fake.jobs == {}


def test_cancel_all_jobs_of_a_run(fake: FakeSlurm) -> None:
    ids = submitted(fake, "a", "b", "c")
    fake.advance(3)
    confirmed = scheduler(fake).cancel(ids)
    assert {t.state for t in confirmed.tasks} == {"cancelled"}
    assert len(confirmed.tasks) == 6
    (scancel,) = [argv for argv in fake.calls if argv[0] == "scancel"]
    assert scancel == ("scancel", *ids)


@pytest.mark.parametrize(
    ("args", "script", "message"),
    [
        (["--time=soon"], SCRIPT, "Invalid time limit"),
        ([], "#!/bin/bash\n# fake-slurm: run=long\n", "directive"),
        ([], "echo no shebang\n", "batch script"),
        (["--array=0-11"], SCRIPT, "Invalid job array"),
    ],
)
def test_fake_sbatch_rejects_like_slurm(fake: FakeSlurm, args: list[str], script: str, message: str) -> None:
    result = fake.run(["sbatch", "--parsable", *args], timeout_s=5, stdin=script)
    assert result.returncode == 1
    assert message in result.stderr
    assert fake.jobs == {}


def test_fake_time_limit_forms(fake: FakeSlurm) -> None:
    result = fake.run(["sbatch", "--parsable", "--time=0:01:30"], timeout_s=5, stdin=SCRIPT)
    assert result.ok
    assert fake.jobs[1000].time_limit_s == 90.0


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), st.integers(1, 5), st.integers(0, 3)),
        st.tuples(st.just("advance"), st.integers(1, 15), st.just(0)),
        st.tuples(st.just("cancel"), st.integers(0, 9), st.integers(0, 4)),
        st.tuples(st.just("requeue"), st.integers(0, 9), st.just(0)),
        st.tuples(st.just("fail_node"), st.integers(1, 4), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(operations=OPERATIONS)
def test_any_history_reads_back_consistently(operations: list[tuple[str, int, int]]) -> None:
    fake = FakeSlurm()
    sched = scheduler(fake)
    sizes: dict[str, int] = {}
    for op, a, b in operations:
        ids = sorted(sizes)
        if op == "submit":
            name = f"job{len(sizes)}"
            array = f"0-{a - 1}" + (f"%{b}" if b else "")
            bindings = tuple(ArrayTaskBinding(index=i, shard=i, attempt=1) for i in range(a))
            chunk = SubmissionChunk(job_name=name, chunk=0, array_spec=array, index_offset=0, tasks=bindings)
            job = sched.submit(SubmissionUnit(script=SCRIPT, chunks=(chunk,)), since=fake.clock()).chunks[0].job_id
            sizes[job] = a
        elif op == "advance":
            fake.advance(a)
        elif op == "cancel" and ids:
            job = ids[a % len(ids)]
            sched.cancel([], array_indices={job: [b % sizes[job]]}, confirm_timeout_s=5)
        elif op == "requeue" and ids:
            fake.run(["scontrol", "requeue", ids[a % len(ids)]], timeout_s=5)
        elif op == "fail_node":
            fake.fail_node(f"node{a}")
            fake.down_nodes.clear()
    observation = sched.observe(sorted(sizes))
    assert (observation.squeue.status, observation.sacct.status) == (("ok", "ok") if sizes else ("not_run", "not_run"))
    for job, size in sizes.items():
        indices = sorted(t.array_index for t in observation.tasks if t.job_id == job and t.array_index is not None)
        assert indices == list(range(size)) or job in observation.missing_job_ids or observation.accounting_lag
    fake.advance(60)
    settled = sched.observe(sorted(sizes))
    assert all(t.state in TERMINAL_TASK_STATES for t in settled.tasks)
    assert len(settled.tasks) == sum(sizes.values())
