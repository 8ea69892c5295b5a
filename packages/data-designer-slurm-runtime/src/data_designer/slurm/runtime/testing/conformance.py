"""One scheduler conformance suite, run unchanged against the fake and a real Slurm cluster.

Subclass :class:`SchedulerConformance` in a test module and provide a ``harness`` fixture
returning a :class:`ClusterHarness`; pytest collects every ``test_*`` method below. Batch
scripts carry ``# fake-slurm:`` directives (comments to a real Slurm) so the fake knows what the
real script would do. Needs pytest (a test-only dependency).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import pytest

from data_designer.slurm.contracts import (
    ArrayTaskBinding,
    ExitCode,
    Observation,
    SubmissionChunk,
    SubmissionUnit,
    TaskEvidence,
    UnavailableError,
)
from data_designer.slurm.runtime.facts import read_facts
from data_designer.slurm.runtime.polling import poll
from data_designer.slurm.runtime.scheduler import SQUEUE_FORMAT, SlurmScheduler, parse_squeue
from data_designer.slurm.runtime.testing._harness import ClusterHarness
from data_designer.slurm.runtime.testing._runners import CountingRunner, OutageRunner, ReplyLosingRunner


def batch_script(body: str, *, directives: str = "") -> str:
    """A bash batch script; ``directives`` tell the fake what ``body`` does."""
    return f"#!/bin/bash\n# fake-slurm: {directives}\n{body}\n"


def unit_of(
    names: Sequence[str], script: str, *, array: str = "0", extra_args: Sequence[str] = (), harness: ClusterHarness
) -> SubmissionUnit:
    last = int(array.split("%")[0].split("-")[-1])
    chunks = tuple(
        SubmissionChunk(
            job_name=name,
            chunk=k,
            array_spec=array,
            index_offset=k * (last + 1),
            tasks=tuple(ArrayTaskBinding(index=i, shard=k * (last + 1) + i, attempt=1) for i in range(last + 1)),
        )
        for k, name in enumerate(names)
    )
    return SubmissionUnit(script=script, sbatch_args=(*harness.sbatch_args, *extra_args), chunks=chunks)


def wait_for(
    harness: ClusterHarness,
    scheduler: SlurmScheduler,
    job_ids: Sequence[str],
    condition: Callable[[Observation], bool],
    *,
    timeout_s: float,
    poll_s: float = 1.0,
    seen: list[Observation] | None = None,
) -> Observation:
    """Observe every ``poll_s`` until ``condition`` holds; fail the test with the last evidence otherwise."""
    for _ in poll(timeout_s, poll_s, clock=None, sleep=harness.wait):  # the seconds waited count
        observation = scheduler.observe(job_ids)
        if seen is not None:
            seen.append(observation)
        if condition(observation):
            return observation
    states = [(t.job_id, t.array_index, t.raw_state, t.source) for t in observation.tasks]
    pytest.fail(f"condition not met after {timeout_s}s; last evidence: {states}")


def states(observation: Observation) -> dict[int | None, str]:
    return {t.array_index: t.state for t in observation.tasks}


def all_in(observation: Observation, wanted: set[str], count: int) -> bool:
    return len(observation.tasks) == count and all(t.state in wanted for t in observation.tasks)


def only(observation: Observation) -> TaskEvidence:
    assert len(observation.tasks) == 1, observation.tasks
    return observation.tasks[0]


class SchedulerConformance:
    """The behaviours every scheduler (fake or real) must show through :class:`SlurmScheduler`."""

    @pytest.fixture
    def harness(self) -> ClusterHarness:
        raise NotImplementedError("a subclass provides the harness fixture")

    def _since(self, harness: ClusterHarness) -> datetime:
        return harness.now() - timedelta(minutes=5)

    def _submit_one(
        self, harness: ClusterHarness, label: str, script: str, *, array: str = "0", extra: Sequence[str] = ()
    ) -> tuple[SlurmScheduler, str]:
        scheduler = harness.scheduler()
        unit = unit_of([harness.unique_name(label)], script, array=array, extra_args=extra, harness=harness)
        result = scheduler.submit(unit, since=self._since(harness))
        assert (result.submitted, result.recovered, result.sbatch_calls) == (1, 0, 1)
        return scheduler, result.chunks[0].job_id

    def test_array_is_observed_pending_running_and_completed(self, harness: ClusterHarness) -> None:
        script = batch_script("sleep 4", directives="run=4")
        scheduler, job = self._submit_one(harness, "lifecycle", script, array="0-3%2")
        seen: list[Observation] = []
        final = wait_for(
            harness, scheduler, [job], lambda o: all_in(o, {"completed"}, 4), timeout_s=60, poll_s=0.5, seen=seen
        )
        observed = {t.state for o in seen for t in o.tasks}
        assert {"pending", "running", "completed"} <= observed
        assert [t.array_index for t in final.tasks] == [0, 1, 2, 3]
        assert all(t.job_id == job and t.nodes and t.job_name for t in final.tasks)
        # squeue may report COMPLETED before sacct does; only sacct knows exit codes.
        assert all(t.exit_code == (0 if t.source == "sacct" else None) for t in final.tasks)
        recorded = wait_for(
            harness, scheduler, [job], lambda o: all(t.source == "sacct" for t in o.tasks), timeout_s=30
        )
        assert [(t.state, t.exit_code) for t in recorded.tasks] == [("completed", 0)] * 4
        assert all(o.calls == 2 for o in seen)

    def test_accounting_lag_right_after_submit_is_explicit(self, harness: ClusterHarness) -> None:
        scheduler, job = self._submit_one(harness, "lag", batch_script("sleep 2", directives="run=2"), array="0-1")
        lagging = wait_for(harness, scheduler, [job], lambda o: o.accounting_lag, timeout_s=3, poll_s=0.2)
        assert lagging.squeue.status == "ok"
        assert all(t.source == "squeue" for t in lagging.tasks)  # a placeholder row is never read as a state
        wait_for(
            harness, scheduler, [job], lambda o: all_in(o, {"completed"}, 2) and not o.accounting_lag, timeout_s=40
        )

    def test_task_exiting_3_is_failed_with_exit_code_3(self, harness: ClusterHarness) -> None:
        scheduler, job = self._submit_one(harness, "exit3", batch_script("exit 3", directives="run=1 exit=3"))
        final = wait_for(
            harness, scheduler, [job], lambda o: all_in(o, {"failed"}, 1) and o.tasks[0].source == "sacct", timeout_s=40
        )
        task = only(final)
        assert (task.exit_code, task.signal, task.raw_state) == (3, 0, "FAILED")

    def test_cancel_selected_task_then_whole_job(self, harness: ClusterHarness) -> None:
        scheduler, job = self._submit_one(
            harness, "cancel", batch_script("sleep 120", directives="run=120"), array="0-2"
        )
        wait_for(harness, scheduler, [job], lambda o: all_in(o, {"running"}, 3), timeout_s=40)
        confirmed = scheduler.cancel([], array_indices={job: [1]}, confirm_timeout_s=30)
        assert states(confirmed) == {0: "running", 1: "cancelled", 2: "running"}
        confirmed = scheduler.cancel([job], confirm_timeout_s=30)
        assert set(states(confirmed).values()) == {"cancelled"}
        final = wait_for(harness, scheduler, [job], lambda o: all(t.source == "sacct" for t in o.tasks), timeout_s=30)
        assert all(t.raw_state == "CANCELLED by 0" for t in final.tasks)

    def test_requeue_is_observed_as_a_restart(self, harness: ClusterHarness) -> None:
        scheduler, job = self._submit_one(harness, "requeue", batch_script("sleep 60", directives="run=60"))
        wait_for(harness, scheduler, [job], lambda o: all_in(o, {"running"}, 1), timeout_s=40)
        assert harness.runner.run(["scontrol", "requeue", job], timeout_s=30).ok
        requeued = wait_for(harness, scheduler, [job], lambda o: only(o).restarts >= 1, timeout_s=40)
        assert only(requeued).state in ("requeued", "pending", "running")
        scheduler.cancel([job], confirm_timeout_s=30)

    def test_out_of_memory(self, harness: ClusterHarness) -> None:
        body = "python3 -c 'x = bytearray(400 * 1024 * 1024); import time; time.sleep(2)'"
        script = batch_script(body, directives="run=1 state=OUT_OF_MEMORY")
        scheduler, job = self._submit_one(harness, "oom", script, extra=("--mem=50M",))
        final = wait_for(
            harness,
            scheduler,
            [job],
            lambda o: all_in(o, {harness.out_of_memory_state}, 1) and o.tasks[0].source == "sacct",
            timeout_s=40,
        )
        assert only(final).state == harness.out_of_memory_state

    @pytest.mark.slow
    def test_job_gone_from_squeue_is_read_from_sacct(self, harness: ClusterHarness) -> None:
        scheduler, job = self._submit_one(harness, "gone", batch_script("true", directives="run=1"))
        wait_for(harness, scheduler, [job], lambda o: all_in(o, {"completed"}, 1), timeout_s=40)
        # slurmctld purges jobs older than MinJobAge on its own schedule (up to a minute later).
        argv = ["squeue", "--noheader", "-t", "all", "-j", job, "-o", SQUEUE_FORMAT]
        waited = 0.0
        while parse_squeue(harness.runner.run(argv, timeout_s=30).stdout):
            assert waited <= harness.min_job_age_s + 90, "the job never left squeue"
            harness.wait(2)
            waited += 2
        gone = scheduler.observe([job])
        assert gone.squeue.status == "ok"
        assert gone.sacct.status == "ok"
        assert (only(gone).state, only(gone).source, only(gone).exit_code) == ("completed", "sacct", 0)
        assert gone.missing_job_ids == ()

    def test_lost_sbatch_replies_are_recovered_by_a_fresh_process(self, harness: ClusterHarness) -> None:
        names = [harness.unique_name(f"lost{k}") for k in range(10)]
        unit = unit_of(names, batch_script("sleep 1", directives="run=1"), harness=harness)
        since = self._since(harness)
        losing = ReplyLosingRunner(harness.runner, count=3)
        for _ in range(3):
            with pytest.raises(UnavailableError) as caught:
                harness.scheduler(losing).submit(unit, since=since)
            assert caught.value.info.code == "sbatch_reply_lost"
        assert losing.count("sbatch") == 3
        fresh = CountingRunner(harness.runner)
        result = harness.scheduler(fresh).submit(unit, since=since)
        assert (result.recovered, result.submitted, result.sbatch_calls) == (3, 7, 7)
        assert [c.job_name for c in result.chunks] == names
        assert (fresh.count("squeue"), fresh.count("sacct"), fresh.count("sbatch")) == (1, 1, 7)
        listed = harness.runner.run(
            ["squeue", "--noheader", "-t", "all", f"--name={','.join(names)}", "-o", SQUEUE_FORMAT], timeout_s=30
        )
        jobs_per_name = {n: {r.job_id for r in parse_squeue(listed.stdout) if r.job_name == n} for n in names}
        assert all(len(ids) == 1 for ids in jobs_per_name.values()), jobs_per_name
        again = harness.scheduler().submit(unit, since=since)
        assert (again.recovered, again.submitted, again.sbatch_calls) == (10, 0, 0)
        observed = harness.scheduler(fresh).observe([c.job_id for c in result.chunks])
        assert observed.calls == 2
        assert fresh.count("squeue") == 2
        assert fresh.count("sacct") == 2

    def test_squeue_and_sacct_down_is_unavailable_and_submits_nothing(self, harness: ClusterHarness) -> None:
        name = harness.unique_name("outage")
        unit = unit_of([name], batch_script("true", directives="run=1"), harness=harness)
        outage = OutageRunner(harness.runner, down={"squeue", "sacct"})
        down = harness.scheduler(outage)
        with pytest.raises(UnavailableError) as caught:
            down.submit(unit, since=self._since(harness))
        assert caught.value.exit_code == ExitCode.UNAVAILABLE
        assert outage.count("sbatch") == 0
        with pytest.raises(UnavailableError) as observed:
            down.observe(["1"])
        assert observed.value.exit_code == ExitCode.UNAVAILABLE
        assert harness.scheduler().find_submitted([name], since=self._since(harness)) == {}

    @pytest.mark.slow
    def test_node_failure_is_node_fail(self, harness: ClusterHarness) -> None:
        script = batch_script("sleep 120", directives="run=120")
        scheduler, job = self._submit_one(harness, "nodefail", script, extra=("--no-requeue",))
        running = wait_for(harness, scheduler, [job], lambda o: all_in(o, {"running"}, 1), timeout_s=40)
        node = only(running).nodes
        assert node is not None
        try:
            harness.fail_node(node)
            final = wait_for(harness, scheduler, [job], lambda o: all_in(o, {"node_fail"}, 1), timeout_s=90, poll_s=2)
        finally:
            harness.restore_nodes()
        assert only(final).raw_state == "NODE_FAIL"

    @pytest.mark.slow
    def test_time_limit_is_timeout(self, harness: ClusterHarness) -> None:
        script = batch_script("sleep 300", directives="run=300")
        scheduler, job = self._submit_one(harness, "timeout", script, extra=("--time=1",))
        final = wait_for(harness, scheduler, [job], lambda o: all_in(o, {"timeout"}, 1), timeout_s=150, poll_s=3)
        assert only(final).raw_state == "TIMEOUT"

    def test_cluster_facts_take_two_calls_and_describe_every_partition(self, harness: ClusterHarness) -> None:
        runner = CountingRunner(harness.runner)
        facts = read_facts(harness.scheduler(runner), harness.now)
        assert [argv[0] for argv in runner.calls] == ["sinfo", "scontrol"]
        assert facts.max_array_size is not None
        assert facts.partitions
        assert sum(p.default for p in facts.partitions) == 1
        for partition in facts.partitions:
            assert partition.nodes > 0
            assert partition.shapes
            assert sum(s.nodes for s in partition.shapes) == partition.nodes
            assert all(s.cpus >= 1 and s.memory_mb >= 1 and s.gpus is not None for s in partition.shapes)
            assert (partition.max_time_s is None) == (partition.max_time == "infinite")
