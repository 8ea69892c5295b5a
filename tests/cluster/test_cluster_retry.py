"""``data-designer slurm retry`` and ``cancel`` on the real local Slurm cluster, each call a fresh process.

One 3-shard run (6 records a shard, one record per request, so progress is published record by record) lives
through three generations. The test server runs behind a wrapper steered by marker files per array task (the
array index is the shard in every generation: ``planner.bind_retry`` keeps the plan's indices), read when the
server starts:

- generation 0 (``execute``): shard 0 succeeds; shard 1 answers slowly and is cancelled with ``cancel --shard 1``
  once it published a record; shard 2's server refuses to start.
- the cause removed (shard 2 may start, slowly now), ``retry --dry-run`` shows the two shards and their ranges,
  then two ``retry`` processes started together take generation 1 (shards 1 and 2): exactly one submits.
- once shard 2's new attempt published a record, ``cancel --shard 2`` cancels shard 2 in both generations while
  shard 1, still running in generation 1, finishes untouched.
- ``retry`` (generation 2, shard 2 fast again) completes the run: ``status --check`` exits 0, and ``_dd_index``
  over the parts of every valid manifest of every attempt is ``0..N-1`` once each; every retried attempt was
  assigned exactly what the attempts before it had left missing.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from data_designer.slurm.contracts import (
    TERMINAL_TASK_STATES,
    CancelResult,
    ErrorInfo,
    ExecuteResult,
    RetryResult,
    RunStatus,
    ShardStatus,
    TaskEvidence,
    WaitResult,
)
from data_designer.slurm.contracts.records import (
    CANCELLATION_SCHEMA,
    INDEX_COLUMN,
    MANIFEST_SCHEMA,
    PROGRESS_SCHEMA,
    RUN_SCHEMA,
    STATUS_SCHEMA,
    SUBMISSION_SCHEMA,
    CancellationRecord,
    IndexRange,
    OutputManifest,
    RecordSchema,
    SubmissionRecord,
)
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, RunLayout, attempt_numbers, read_record, sequence_numbers
from data_designer.slurm.runtime.testing import run_logs, writer_run

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

T = TypeVar("T", RunStatus, RetryResult, CancelResult, WaitResult)
M = TypeVar("M", bound=BaseModel)
pq: Any = importlib.import_module("pyarrow.parquet")  # pyarrow.parquet has no type hints
DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
SHARDS = 3
SHARD_RECORDS = 6
RECORDS = SHARDS * SHARD_RECORDS
SLOW_LATENCY_S = 3.0
"""Seconds per request of a slowed server: a shard runs ~20 s and publishes a record every ~3 s."""
WAIT_S = 240
CLI_TIMEOUT_S = 120
SERVER_REFUSAL = "ddct-retry: the server refuses to start while its marker exists"
NOT_SUBMITTED_EXIT = 4
"""What the losing one of two concurrent retries may exit with (the shards are pending or running by then)."""

SERVER_WRAPPER = """#!/bin/bash
# The test server, steered per array task by marker files in {markers}: refuse-<task> exits at start with one clear
# line; slow-<task> answers every request after {latency} s.
task="${{SLURM_ARRAY_TASK_ID:-}}"
if [ -e "{markers}/refuse-$task" ]; then echo "{refusal}" >&2; exit 7; fi
if [ -e "{markers}/slow-$task" ]; then exec "$@" --latency-s {latency}; fi
exec "$@"
"""


@dataclass
class Call:
    """One CLI process: its exit code and output."""

    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def parse(self, model: type[T]) -> T:
        assert self.stdout.strip(), f"{' '.join(self.argv)}: exit {self.code}, no output: {self.stderr}"
        return model.model_validate_json(self.stdout)

    def describe(self) -> str:
        return f"{' '.join(self.argv)}: exit {self.code}\n{self.stdout}\n{self.stderr}"


@dataclass
class Run:
    """A run submitted with ``data-designer slurm execute``, fresh CLI processes that act on it, and its markers."""

    directory: Path
    layout: RunLayout
    result: ExecuteResult
    slurm_env: dict[str, str]
    markers: Path
    scheduler: SlurmScheduler = field(init=False)

    def __post_init__(self) -> None:
        self.scheduler = SlurmScheduler(SubprocessRunner(overrides=self.slurm_env))

    def mark(self, name: str, present: bool) -> None:
        marker = self.markers / name
        if present:
            marker.touch()
        else:
            marker.unlink(missing_ok=True)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
        env.update({**self.slurm_env, "HOME": str(self.directory / "home"), "COLUMNS": "200"})
        return env

    def command(self, verb: str, *flags: str) -> tuple[str, ...]:
        profile = str(self.directory / "profile.yaml")
        return (str(DATA_DESIGNER), "slurm", verb, self.result.run_id, "--profile", profile, *flags)

    def cli(self, verb: str, *flags: str) -> Call:
        argv = self.command(verb, *flags)
        done = subprocess.run(
            argv, env=self.env(), capture_output=True, text=True, timeout=CLI_TIMEOUT_S + WAIT_S, check=False
        )
        return Call(argv, done.returncode, done.stdout, done.stderr)

    def clis_together(self, *commands: tuple[str, ...]) -> list[Call]:
        """Several CLI processes started at the same moment (all spawned before any is waited for)."""
        argvs = [self.command(*argv) for argv in commands]
        env = self.env()
        procs = [
            subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for argv in argvs
        ]
        calls = []
        for argv, proc in zip(argvs, procs, strict=True):
            out, err = proc.communicate(timeout=CLI_TIMEOUT_S)
            calls.append(Call(argv, proc.returncode, out, err))
        return calls

    def status(self) -> RunStatus:
        call = self.cli("status", "--json")
        assert call.code == 0, call.describe()
        return call.parse(RunStatus)

    def wait(self) -> Call:
        return self.cli("wait", "--timeout", str(WAIT_S), "--interval", "1", "--json")

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert time.monotonic() < deadline, f"{what} not within {timeout_s:.0f}s\n{self.diagnosis()}"
            time.sleep(0.5)

    def generating(self, shard: int, attempt: int) -> bool:
        """Whether the attempt published a record and is still running (no status.json); fails once it ended."""
        ended = read_record(self.layout.status(shard, attempt), STATUS_SCHEMA)
        assert not isinstance(ended, RecordOk), f"shard {shard} attempt {attempt} ended: {ended.payload}"
        progress = read_record(self.layout.progress(shard, attempt), PROGRESS_SCHEMA)
        return isinstance(progress, RecordOk) and progress.payload.records_done >= 1

    def submissions(self) -> list[SubmissionRecord]:
        return appended(self.layout.submissions_dir, SUBMISSION_SCHEMA)

    def cancellations(self) -> list[CancellationRecord]:
        return appended(self.layout.cancellations_dir, CANCELLATION_SCHEMA)

    def job_ids(self) -> list[str]:
        return sorted({job.job_id for record in self.submissions() for job in record.jobs})

    def ended_tasks(self, job_id: str, indices: set[int]) -> dict[int, TaskEvidence]:
        """The job's tasks once Slurm shows each of ``indices`` ended (a task's end lags its ``status.json``)."""
        tasks: dict[int, TaskEvidence] = {}

        def ended() -> bool:
            tasks.update({task.array_index or 0: task for task in self.scheduler.observe([job_id]).tasks})
            return all(index in tasks and tasks[index].state in TERMINAL_TASK_STATES for index in indices)

        self.wait_for(f"the end of tasks {sorted(indices)} of job {job_id}", ended, timeout_s=60)
        return tasks

    def jobs_named(self, job_name: str) -> set[str]:
        """The job ids accounting knows under ``job_name`` since the run was created (arrays: their master id)."""
        created = read_record(self.layout.run_record, RUN_SCHEMA)
        assert isinstance(created, RecordOk), created
        since = created.payload.created_at.astimezone().strftime("%Y-%m-%dT%H:%M:%S")
        argv = ["sacct", "-X", "-n", "-P", "-o", "JobID", "-S", since, "--name", job_name]
        done = subprocess.run(
            argv, env={**os.environ, **self.slurm_env}, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, f"{argv}: {done.stderr}"
        return {line.split("_")[0] for line in done.stdout.split()}

    def diagnosis(self) -> str:
        return run_logs(self.layout, tail_chars=1500)

    def cancel_everything(self) -> None:
        job_ids = self.job_ids()
        if job_ids:
            self.scheduler.cancel(job_ids, confirm_timeout_s=60)


def appended(directory: Path, schema: RecordSchema[M]) -> list[M]:
    """Every appended record of ``directory`` (``NNNN.json``), in order; each must read whole."""
    records = []
    for number in sequence_numbers(directory):
        found = read_record(directory / f"{number:04d}.json", schema)
        assert isinstance(found, RecordOk), found
        records.append(found.payload)
    return records


def shards_of(status: RunStatus) -> dict[int, ShardStatus]:
    return {shard.shard: shard for shard in status.shards}


def states(status: RunStatus) -> dict[int, str]:
    return {shard.shard: shard.state for shard in status.shards}


def job_task(job_id: str, shard: int) -> str:
    return f"{job_id}_{shard}"


def three_shards(wrapper: Path) -> dict[str, Any]:
    client = {"cpus": 1, "memory_gb": 1, "batch_size": 1, "concurrency": {"writer": 1}}
    submission = {"time_limit": "00:10:00", "warning_lead_s": 60, "drain_grace_s": 10}
    run = writer_run(
        "retried",
        records=RECORDS,
        shards=SHARDS,
        replicas=1,
        gpus_per_replica=0,
        client=client,
        submission=submission,
    )
    deployment = run["deployments"]["writer"]
    deployment["argv"] = [str(wrapper), *deployment["argv"]]
    return run


@dataclass
class Story:
    """What the CLI said at each step of the run's three generations."""

    run: Run
    cancel_first: Call
    first_ended: Call
    dry_run: Call
    dry_run_submissions: int
    race: list[Call]
    race_submissions: list[SubmissionRecord]
    before_second_cancel: RunStatus
    cancel_second: Call
    second_ended: Call
    generation_tasks: dict[int, TaskEvidence]
    retry_last: Call
    last_ended: Call
    check: Call
    seconds: dict[str, float]


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory, local_slurm: dict[str, str], e2e: ModuleType) -> Iterator[Story]:
    root = tmp_path_factory.mktemp("retry")
    markers = root / "markers"
    markers.mkdir()
    wrapper = root / "server-wrapper"
    wrapper.write_text(
        SERVER_WRAPPER.format(markers=markers, latency=SLOW_LATENCY_S, refusal=SERVER_REFUSAL), encoding="utf-8"
    )
    wrapper.chmod(0o755)
    (markers / "slow-1").touch()
    (markers / "refuse-2").touch()
    started = time.monotonic()
    seconds: dict[str, float] = {}

    def lap(name: str) -> None:
        seconds[name] = round(time.monotonic() - started, 1)
        print(f"{name}: {seconds[name]}s")

    layout, result = e2e.execute(root / "run", local_slurm, three_shards(wrapper), sys.executable)
    run = Run(root / "run", layout, result, e2e.slurm_env(local_slurm), markers)
    try:
        # Generation 0: shard 1 is cancelled by the user after it published a record; shard 2 failed at start.
        run.wait_for("shard 1's first record", lambda: run.generating(1, 1))
        lap("shard 1 generating")
        cancel_first = run.cli("cancel", "--shard", "1", "--json")
        first_ended = run.wait()
        lap("generation 0 ended")

        # The cause of shard 2's failure removed; generation 1 slow enough to be caught running.
        run.mark("refuse-2", present=False)
        run.mark("slow-2", present=True)
        dry_run = run.cli("retry", "--dry-run", "--json")
        dry_run_submissions = len(run.submissions())
        race = run.clis_together(("retry", "--json"), ("retry", "--json"))
        race_submissions = run.submissions()
        lap("retried twice at once")
        assert any(call.code == 0 for call in race), "\n".join(call.describe() for call in race)

        # Generation 1: shard 2 is cancelled once its new attempt published a record; shard 1 runs on.
        run.wait_for("shard 2's first record in generation 1", lambda: run.generating(2, 2))
        before_second_cancel = run.status()
        cancel_second = run.cli("cancel", "--shard", "2", "--json")
        second_ended = run.wait()
        retry_jobs = sorted(
            {job.job_id for record in run.submissions() if record.generation == 1 for job in record.jobs}
        )
        generation_tasks = run.ended_tasks(retry_jobs[0], {1, 2}) if len(retry_jobs) == 1 else {}
        lap("generation 1 ended")

        # Generation 2: shard 2 once more, fast.
        run.mark("slow-2", present=False)
        retry_last = run.cli("retry", "--json")
        last_ended = run.wait()
        check = run.cli("status", "--check", "--json")
        lap("generation 2 ended")
        yield Story(
            run=run,
            cancel_first=cancel_first,
            first_ended=first_ended,
            dry_run=dry_run,
            dry_run_submissions=dry_run_submissions,
            race=race,
            race_submissions=race_submissions,
            before_second_cancel=before_second_cancel,
            cancel_second=cancel_second,
            second_ended=second_ended,
            generation_tasks=generation_tasks,
            retry_last=retry_last,
            last_ended=last_ended,
            check=check,
            seconds=seconds,
        )
    finally:
        run.cancel_everything()


def valid_manifests(layout: RunLayout, shard: int) -> dict[int, OutputManifest]:
    """Every attempt of ``shard`` with a valid result manifest, by attempt number."""
    manifests = {}
    for attempt in attempt_numbers(layout.attempts_dir(shard)):
        found = read_record(layout.output_manifest(shard, attempt), MANIFEST_SCHEMA)
        if isinstance(found, RecordOk):
            manifests[attempt] = found.payload
    return manifests


def indices_of(layout: RunLayout, manifest: OutputManifest) -> list[int]:
    output = layout.output_dir(manifest.shard, manifest.attempt)
    indices: list[int] = []
    for part in manifest.parts:
        indices += pq.read_table(output / part.path, columns=[INDEX_COLUMN]).column(INDEX_COLUMN).to_pylist()
    return indices


def expand(ranges: tuple[IndexRange, ...]) -> list[int]:
    return [index for start, stop in ranges for index in range(start, stop)]


def missing_after(shard_range: IndexRange, manifests: list[OutputManifest]) -> tuple[IndexRange, ...]:
    """The indices of ``shard_range`` that none of ``manifests`` produced, as ranges."""
    produced = {index for manifest in manifests for index in expand(manifest.ranges)}
    left = [index for index in range(*shard_range) if index not in produced]
    ranges: list[IndexRange] = []
    for index in left:
        if ranges and ranges[-1].stop == index:
            ranges[-1] = IndexRange(ranges[-1].start, index + 1)
        else:
            ranges.append(IndexRange(index, index + 1))
    return tuple(ranges)


def test_a_cancelled_and_a_failed_shard_are_retried_over_exactly_their_missing_indices(story: Story) -> None:
    run = story.run
    cancelled = story.cancel_first.parse(CancelResult)
    assert story.cancel_first.code == 0, story.cancel_first.describe()
    assert (cancelled.shards, cancelled.confirmed, cancelled.generations) == ((1,), True, (0,)), cancelled
    assert cancelled.targets == (job_task(run.result.jobs[0].job_id, 1),), "only shard 1's task"

    assert story.first_ended.code == 6, story.first_ended.describe()
    first = story.first_ended.parse(WaitResult).status
    detail = f"{first.model_dump_json(indent=1)}\n{run.diagnosis()}"
    assert states(first) == {0: "succeeded", 1: "cancelled", 2: "failed"}, detail
    shards = shards_of(first)
    assert shards[1].reason == "cancelled_by_user", detail
    assert 0 < shards[1].records_done < SHARD_RECORDS, "cancelled after it published, before it finished"
    assert shards[2].reason == "server_failed_to_start", detail
    assert shards[2].missing == (IndexRange(2 * SHARD_RECORDS, RECORDS),), detail

    assert story.dry_run.code == 0, story.dry_run.describe()
    dry = story.dry_run.parse(RetryResult)
    assert dry.dry_run
    assert (dry.generation, dry.jobs, dry.sbatch_calls) == (None, (), 0), dry
    assert [(s.shard, s.state) for s in dry.shards] == [(1, "cancelled"), (2, "failed")], dry
    assert {s.shard: s.ranges for s in dry.shards} == {1: shards[1].missing, 2: shards[2].missing}, dry
    assert {s.shard: s.records for s in dry.shards} == {1: SHARD_RECORDS - shards[1].records_done, 2: SHARD_RECORDS}
    assert story.dry_run_submissions == 1, "a dry run submits nothing"

    retry_last = story.retry_last.parse(RetryResult)
    assert story.retry_last.code == 0, story.retry_last.describe()
    assert (retry_last.generation, [s.shard for s in retry_last.shards]) == (2, [2]), retry_last
    assert story.last_ended.code == 0, f"{story.last_ended.describe()}\n{run.diagnosis()}"
    assert story.check.code == 0, story.check.describe()
    final = story.check.parse(RunStatus)
    assert final.state == "succeeded"
    assert final.records_done == RECORDS

    # Over the whole run: every index once, none missing.
    manifests = {shard: valid_manifests(run.layout, shard) for shard in range(SHARDS)}
    indices = [i for by_attempt in manifests.values() for m in by_attempt.values() for i in indices_of(run.layout, m)]
    assert sorted(indices) == list(range(RECORDS)), "no duplicate and no gap in _dd_index over the run"
    for by_attempt in manifests.values():
        for manifest in by_attempt.values():
            assert sorted(indices_of(run.layout, manifest)) == expand(manifest.ranges), manifest

    # Each retried attempt was assigned exactly what the attempts before it left missing.
    assert sorted(manifests[0]) == [1]
    assert sorted(manifests[1]) == [1, 2], "shard 1: the cancelled attempt's part, then the retry's"
    assert manifests[1][2].assigned == shards[1].missing == dry.shards[0].ranges
    assert manifests[1][2].complete
    assert sorted(manifests[2]) == [2, 3], "shard 2: attempt 1 failed at start, 2 was cancelled, 3 finished"
    assert manifests[2][2].assigned == (IndexRange(2 * SHARD_RECORDS, RECORDS),)
    assert manifests[2][3].assigned == missing_after(IndexRange(2 * SHARD_RECORDS, RECORDS), [manifests[2][2]])
    assert manifests[2][3].assigned == retry_last.shards[0].ranges
    print(f"cluster time per step: {story.seconds}")


def test_two_retries_started_together_submit_one_generation(story: Story) -> None:
    run = story.run
    detail = "\n".join(call.describe() for call in story.race)
    submitted = [call for call in story.race if call.code == 0 and call.parse(RetryResult).sbatch_calls > 0]
    assert len(submitted) == 1, detail
    (winner_call,) = submitted
    (loser_call,) = [call for call in story.race if call is not winner_call]
    winner = winner_call.parse(RetryResult)
    print(f"the other retry: exit {loser_call.code}: {loser_call.stdout.strip() or loser_call.stderr.strip()}")
    assert winner.generation == 1
    assert [s.shard for s in winner.shards] == [1, 2]
    assert len(winner.jobs) == 1, "two shards fit one array job"
    assert winner.jobs[0].generation == 1
    if loser_call.code == 0:  # it found the generation taken and its job submitted (or recovered it by name)
        loser = loser_call.parse(RetryResult)
        assert (loser.sbatch_calls, loser.generation in (None, 1)) == (0, True), detail
        if loser.generation is None:  # nothing left to take: both shards held by the winner's generation
            assert (loser.shards, sorted(loser.skipped)) == ((), ["1", "2"]), detail
    else:  # it found the shards pending or running: refused, naming them
        assert loser_call.code == NOT_SUBMITTED_EXIT, detail
        error = ErrorInfo.model_validate_json(loser_call.stderr)
        assert "shard" in error.message, error

    retried = [record for record in story.race_submissions if record.generation >= 1]
    assert {job.job_id for record in retried for job in record.jobs} == {winner.jobs[0].job_id}, retried
    assert sum(record.sbatch_calls for record in retried) == 1, retried
    assert run.jobs_named(winner.jobs[0].job_name) == {winner.jobs[0].job_id}, "Slurm knows one job by that name"


def test_cancel_of_one_shard_reaches_its_retry_generation_and_nothing_else(story: Story) -> None:
    run = story.run
    first_job = run.result.jobs[0].job_id
    (retry_job,) = {j.job_id for r in story.race_submissions if r.generation == 1 for j in r.jobs}
    before = shards_of(story.before_second_cancel)
    assert (before[0].state, before[1].state, before[2].state) == ("succeeded", "running", "running"), before

    assert story.cancel_second.code == 0, story.cancel_second.describe()
    cancelled = story.cancel_second.parse(CancelResult)
    assert cancelled.shards == (2,)
    assert cancelled.confirmed
    # Shard 2's task of generation 0 ended long ago; its live task is the retry's, and no other shard's is touched.
    assert job_task(first_job, 2) not in cancelled.targets, "an ended task is not cancelled again"
    assert (cancelled.targets, cancelled.generations) == ((job_task(retry_job, 2),), (1,)), cancelled

    assert story.second_ended.code == 6, story.second_ended.describe()
    after = story.second_ended.parse(WaitResult).status
    detail = f"{after.model_dump_json(indent=1)}\n{run.diagnosis()}"
    assert states(after) == {0: "succeeded", 1: "succeeded", 2: "cancelled"}, detail
    assert shards_of(after)[2].reason == "cancelled_by_user", detail
    tasks = story.generation_tasks
    assert (tasks[1].state, tasks[2].state) == ("completed", "cancelled"), tasks

    records = run.cancellations()
    assert [(r.shards, r.confirmed) for r in records] == [((1,), True), ((2,), True)], records
    assert set(records[1].targets) == set(cancelled.targets)
