"""``data-designer slurm status`` and ``wait`` on the real local Slurm cluster, each call a fresh process.

One 4-shard run ends four different ways: shard 0 succeeds; shard 1 (its server slowed) is ``scancel``ed after it
published progress; shard 2's server exits at start (a wrapper around the test server refuses task 2); shard 3's
compute Python cannot import the runtime (the profile's interpreter is a wrapper that runs Python without
site-packages for task 3), so the batch script's preflight ends it with exit 6 before any attempt exists. While shard 1
still runs, the scheduler is taken away: first both sources (``squeue``/``sacct`` shims that fail, so the last
recorded observation is shown), then accounting alone (slurmdbd really stopped, restarted by ``local-slurm up``).
After the run ended the status is read while the last task is still in ``squeue``, and again once ``MinJobAge``
has purged every task (``sacct`` alone answers). A second, one-shard run is requeued by ``scontrol requeue`` mid-way
and ``wait`` follows it to success. Both runs are submitted together, so their allocations overlap in time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from data_designer.slurm.contracts import TERMINAL_TASK_STATES, ExecuteResult, RunStatus, ShardStatus, WaitResult
from data_designer.slurm.contracts.records import PROGRESS_SCHEMA, STATUS_SCHEMA, RecordSchema
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record, sequence_numbers
from data_designer.slurm.runtime.testing import run_logs, wait_for_record, writer_run

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

M = TypeVar("M", bound=BaseModel)

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCAL_SLURM = REPO_ROOT / "scripts" / "local-slurm"
DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
SHARDS = 4
SHARD_RECORDS = 6
SLOW_LATENCY_S = 5.0
"""Shard 1's seconds per request: one record at a time, so it runs ~30 s and publishes progress every 5 s."""
REQUEUE_LATENCY_S = 1.5
WAIT_S = 240.0
CLI_TIMEOUT_S = 120
SERVER_REFUSAL = "ddct-status: the server of task 2 refuses to start"
MISSING_MODULE = "No module named 'data_designer'"

SERVER_WRAPPER = f"""#!/bin/bash
# The test server, except: task 2 exits at start with one clear line; task 1 answers slowly.
case "${{SLURM_ARRAY_TASK_ID:-}}" in
    2) echo "{SERVER_REFUSAL}" >&2; exit 7 ;;
    1) exec "$@" --latency-s {SLOW_LATENCY_S} ;;
esac
exec "$@"
"""

PYTHON_WRAPPER = f"""#!/bin/bash
# The compute Python: the test venv's interpreter (named as this file, so that it is the plan's interpreter),
# except that task 3 gets the same interpreter isolated and without site-packages: no runtime to import.
if [ "${{SLURM_ARRAY_TASK_ID:-}}" = 3 ]; then exec {os.path.realpath(sys.executable)} -I -S "$@"; fi
exec -a "$0" {os.path.realpath(sys.executable)} "$@"
"""


def wrapped_venv(directory: Path) -> Path:
    """A venv whose ``bin/python`` is :data:`PYTHON_WRAPPER`: this venv's configuration and packages, so the
    supervisor's interpreter check (the plan's interpreter is the one running) holds for tasks 0-2."""
    (directory / "bin").mkdir(parents=True)
    (directory / "pyvenv.cfg").write_bytes((Path(sys.prefix) / "pyvenv.cfg").read_bytes())
    (directory / "lib").symlink_to(Path(sys.prefix) / "lib")
    return executable(directory / "bin" / "python", PYTHON_WRAPPER)


FAILING_TOOL = """#!/bin/bash
echo "{tool}: error: slurm_persist_conn_open_without_init: failed to open persistent connection (test outage)" >&2
exit 1
"""


def executable(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path


@dataclass
class Call:
    """One CLI process: its exit code and output."""

    code: int
    stdout: str
    stderr: str

    def status(self) -> RunStatus:
        assert self.stdout.strip(), f"exit {self.code}, no output: {self.stderr}"
        return RunStatus.model_validate_json(self.stdout)


@dataclass
class Run:
    """A run submitted with ``data-designer slurm execute``, and fresh CLI processes that look at it."""

    directory: Path
    layout: RunLayout
    result: ExecuteResult
    slurm_env: dict[str, str]
    scheduler: SlurmScheduler = field(init=False)

    def __post_init__(self) -> None:
        self.scheduler = SlurmScheduler(SubprocessRunner(overrides=self.slurm_env))

    @property
    def job_id(self) -> str:
        assert len(self.result.jobs) == 1, "a few shards fit one array job: array index = shard"
        return self.result.jobs[0].job_id

    def env(self, path_first: Path | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
        env.update({**self.slurm_env, "HOME": str(self.directory / "home"), "COLUMNS": "200"})
        if path_first is not None:
            env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', os.defpath)}"
        return env

    def command(self, verb: str, *flags: str) -> list[str]:
        profile = str(self.directory / "profile.yaml")
        return [str(DATA_DESIGNER), "slurm", verb, self.result.run_id, "--profile", profile, *flags]

    def cli(self, verb: str, *flags: str, path_first: Path | None = None) -> Call:
        done = subprocess.run(
            self.command(verb, *flags),
            env=self.env(path_first),
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
            check=False,
        )
        return Call(done.returncode, done.stdout, done.stderr)

    def clis(self, *commands: tuple[str, ...]) -> list[Call]:
        """Several CLI processes at once (each appends its own observation)."""
        procs = [
            subprocess.Popen(
                self.command(*argv), env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for argv in commands
        ]
        calls = []
        for proc in procs:
            out, err = proc.communicate(timeout=CLI_TIMEOUT_S)
            calls.append(Call(proc.returncode, out, err))
        return calls

    def status(self, *flags: str, path_first: Path | None = None) -> tuple[int, RunStatus]:
        call = self.cli("status", *flags, "--json", path_first=path_first)
        return call.code, call.status()

    def slurm(self, *argv: str) -> str:
        done = subprocess.run(
            list(argv), env={**os.environ, **self.slurm_env}, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, f"{argv}: {done.stderr}"
        return done.stdout

    def in_squeue(self) -> set[int]:
        """The array tasks of the run's job that ``squeue -t all`` still lists."""
        argv = ["squeue", "--noheader", "-t", "all", "-j", self.job_id, "-o", "%i"]
        env = {**os.environ, **self.slurm_env}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode == 1 and "Invalid job id" in done.stderr:
            return set()  # every task of the job was purged
        assert done.returncode == 0, f"{argv}: {done.stderr}"
        tasks = set()
        for line in done.stdout.split():
            _, _, index = line.partition("_")
            if index.isdigit():
                tasks.add(int(index))
        return tasks

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert time.monotonic() < deadline, f"{what} not within {timeout_s:.0f}s\n{self.diagnosis()}"
            time.sleep(0.5)

    def wait_record(self, path: Path, schema: RecordSchema[M]) -> M:
        return wait_for_record(path, schema, timeout_s=WAIT_S, poll_s=0.2, describe=self.diagnosis)

    def generating(self, shard: int) -> bool:
        """Whether the shard published a record and is still running (no status.json); fails once it ended."""
        ended = read_record(self.layout.status(shard, 1), STATUS_SCHEMA)
        assert not isinstance(ended, RecordOk), f"shard {shard} ended: {ended.payload}\n{self.diagnosis()}"
        progress = read_record(self.layout.progress(shard, 1), PROGRESS_SCHEMA)
        return isinstance(progress, RecordOk) and progress.payload.records_done >= 1

    def ended_in_sacct(self) -> set[int]:
        """The array tasks whose end (state and exit code) accounting already shows."""
        tasks = self.scheduler.observe([self.job_id]).tasks
        return {t.array_index or 0 for t in tasks if t.state in TERMINAL_TASK_STATES and t.source == "sacct"}

    def observations(self) -> int:
        return len(sequence_numbers(self.layout.observations_dir))

    def diagnosis(self) -> str:
        return run_logs(self.layout, tail_chars=1500)

    def cancel(self) -> None:
        self.scheduler.cancel([self.job_id], confirm_timeout_s=60)


def shards_of(status: RunStatus) -> dict[int, ShardStatus]:
    return {shard.shard: shard for shard in status.shards}


def states(status: RunStatus) -> dict[int, str]:
    return {shard.shard: shard.state for shard in status.shards}


def submit(e2e: ModuleType, directory: Path, local_slurm: Mapping[str, str], run: dict[str, Any], python: str) -> Run:
    layout, result = e2e.execute(directory, local_slurm, run, python)
    return Run(directory, layout, result, e2e.slurm_env(local_slurm))


def four_endings(wrapper: Path) -> dict[str, Any]:
    client = {"cpus": 1, "memory_gb": 1, "batch_size": 1, "concurrency": {"writer": 1}}
    submission = {"time_limit": "00:10:00", "warning_lead_s": 60, "drain_grace_s": 10}
    run = writer_run(
        "endings",
        records=SHARDS * SHARD_RECORDS,
        shards=SHARDS,
        replicas=1,
        gpus_per_replica=0,
        client=client,
        submission=submission,
    )
    deployment = run["deployments"]["writer"]
    deployment["argv"] = [str(wrapper), *deployment["argv"]]
    return run


def requeued_once() -> dict[str, Any]:
    client = {"cpus": 1, "memory_gb": 1, "batch_size": 1, "concurrency": {"writer": 1}}
    submission = {"time_limit": "00:10:00", "warning_lead_s": 60, "drain_grace_s": 10, "requeue": True}
    return writer_run(
        "requeued",
        server_flags=("--latency-s", str(REQUEUE_LATENCY_S)),
        records=SHARD_RECORDS,
        replicas=1,
        gpus_per_replica=0,
        client=client,
        submission=submission,
    )


@dataclass
class Runs:
    endings: Run
    requeued: Run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, local_slurm: dict[str, str], e2e: ModuleType) -> Iterator[Runs]:
    """Both runs submitted; the one-shard run requeued as soon as it published its first record."""
    root = tmp_path_factory.mktemp("status")
    server = executable(root / "server-wrapper", SERVER_WRAPPER)
    python = wrapped_venv(root / "wrapped-venv")
    started = time.monotonic()
    endings = submit(e2e, root / "endings", local_slurm, four_endings(server), str(python))
    submitted = [endings]
    try:
        requeued = submit(e2e, root / "requeued", local_slurm, requeued_once(), sys.executable)
        submitted.append(requeued)
        requeued.wait_for("the first record of the run to requeue", lambda: requeued.generating(0))
        requeued.slurm("scontrol", "requeue", f"{requeued.job_id}_0")
        print(f"submitted both runs and requeued the second {time.monotonic() - started:.1f}s in")
        yield Runs(endings, requeued)
    finally:
        for run in submitted:
            run.cancel()


@dataclass
class Story:
    """What fresh ``status`` processes said at each point of the 4-shard run's life."""

    running: tuple[int, RunStatus]
    outage: tuple[int, RunStatus]
    outage_observations: tuple[int, int]
    sacct_down: tuple[int, RunStatus]
    sacct_down_squeue: set[int]
    ended_in_squeue: tuple[int, RunStatus]
    ended_squeue_before: set[int]
    ended_sacct_only: tuple[int, RunStatus]
    table: Call
    check: Call
    wait: Call


def stop_slurmdbd(local_slurm: Mapping[str, str]) -> None:
    pid = int((Path(local_slurm["DDSLURM_STATE_DIR"]) / "pids" / "slurmdbd").read_text(encoding="utf-8").strip())
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and "zombie" not in _proc_state(pid):
        assert time.monotonic() < deadline, f"slurmdbd (pid {pid}) did not stop"
        time.sleep(0.1)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text(encoding="utf-8").split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "gone"


def start_slurmdbd() -> None:
    """``local-slurm up`` starts only the daemons that are missing and waits until ``sacct`` answers."""
    done = subprocess.run([str(LOCAL_SLURM), "up"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def story(runs: Runs, local_slurm: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Story:
    run = runs.endings
    layout = run.layout
    started = time.monotonic()
    # Shard 1 is mid-way (one record published, far from done) once the other three have ended.
    first = run.wait_record(layout.status(0, 1), STATUS_SCHEMA)
    assert first.status == "succeeded", f"{first}\n{run.diagnosis()}"
    run.wait_record(layout.status(2, 1), STATUS_SCHEMA)
    run.wait_for("shard 1's first record", lambda: run.generating(1))
    run.wait_for("the ends of tasks 0, 2 and 3 in sacct", lambda: {0, 2, 3} <= run.ended_in_sacct())
    print(f"shards 0, 2, 3 ended and shard 1 is generating {time.monotonic() - started:.1f}s in")
    running = run.status()

    shims = tmp_path_factory.mktemp("outage")
    for tool in ("squeue", "sacct"):
        executable(shims / tool, FAILING_TOOL.format(tool=tool))
    before = run.observations()
    outage = run.status(path_first=shims)
    after = run.observations()

    try:
        stop_slurmdbd(local_slurm)
        sacct_down = run.status()
        squeue = run.in_squeue()
    finally:
        start_slurmdbd()
    assert read_record(layout.status(1, 1), STATUS_SCHEMA).status == "missing", "shard 1 ended before it was cancelled"
    print(f"outages looked at {time.monotonic() - started:.1f}s in")

    run.slurm("scancel", f"{run.job_id}_1")
    run.wait_record(layout.status(1, 1), STATUS_SCHEMA)
    run.wait_for("the end of task 1 in sacct", lambda: 1 in run.ended_in_sacct())
    in_squeue = run.in_squeue()
    ended_in_squeue = run.status()
    print(f"shard 1 cancelled and looked at {time.monotonic() - started:.1f}s in (in squeue: {sorted(in_squeue)})")

    run.wait_for("every task purged from squeue (MinJobAge)", lambda: not run.in_squeue(), timeout_s=120)
    ended_sacct_only = run.status()
    table, check, wait = run.clis(
        ("status",), ("status", "--check", "--json"), ("wait", "--timeout", "0", "--interval", "1", "--json")
    )
    print(f"looked at after MinJobAge {time.monotonic() - started:.1f}s in")
    return Story(
        running=running,
        outage=outage,
        outage_observations=(before, after),
        sacct_down=sacct_down,
        sacct_down_squeue=squeue,
        ended_in_squeue=ended_in_squeue,
        ended_squeue_before=in_squeue,
        ended_sacct_only=ended_sacct_only,
        table=table,
        check=check,
        wait=wait,
    )


def assert_four_endings(status: RunStatus, run: Run) -> None:
    shards = shards_of(status)
    detail = f"{status.model_dump_json(indent=1)}\n{run.diagnosis()}"
    assert states(status) == {0: "succeeded", 1: "cancelled", 2: "failed", 3: "failed"}, detail
    assert status.state == "failed", detail
    assert shards[0].records_done == SHARD_RECORDS
    assert shards[1].reason == "cancelled", detail
    assert 0 < shards[1].records_done < SHARD_RECORDS, detail
    assert shards[2].reason == "server_failed_to_start", detail
    assert SERVER_REFUSAL in f"{shards[2].last_log_line} {shards[2].message}", detail
    assert shards[3].reason == "environment_mismatch", detail
    assert MISSING_MODULE in (shards[3].message or ""), detail
    assert len(shards[3].attempts) == 0, "the preflight ends the job before any attempt is claimed"


def test_a_running_shard_is_running_and_ended_shards_are_classified(runs: Runs, story: Story) -> None:
    code, status = story.running
    assert code == 0
    shards = shards_of(status)
    detail = status.model_dump_json(indent=1)
    assert states(status) == {0: "succeeded", 1: "running", 2: "failed", 3: "failed"}, detail
    assert status.state == "running"
    assert 0 < shards[1].records_done < SHARD_RECORDS
    assert shards[2].reason == "server_failed_to_start"
    assert shards[3].reason == "environment_mismatch"


def test_without_squeue_and_sacct_the_last_known_state_is_printed_with_exit_5(story: Story) -> None:
    code, status = story.outage
    _, last = story.running
    detail = status.model_dump_json(indent=1)
    assert code == 5, detail
    assert status.evidence == "cached"
    assert status.observed_at == last.observed_at, "the observation the status before the outage recorded"
    assert status.evidence_age_s is not None
    assert status.evidence_age_s > 0
    assert story.outage_observations[1] == story.outage_observations[0], "nothing new was observed, none recorded"
    shards = shards_of(status)
    assert states(status) == {0: "succeeded", 1: "unknown", 2: "failed", 3: "failed"}, detail
    assert shards[1].reason == "scheduler_unavailable"
    assert "last known: running" in (shards[1].message or ""), detail
    assert status.state == "unknown"


def test_without_sacct_squeue_and_the_records_still_classify(story: Story) -> None:
    code, status = story.sacct_down
    detail = status.model_dump_json(indent=1)
    assert code == 0, detail
    assert status.evidence == "live"
    assert status.squeue is not None
    assert status.sacct is not None
    assert status.squeue.status == "ok"
    assert status.sacct.status == "failed", detail
    shards = shards_of(status)
    assert status.state == "running", detail
    assert shards[0].state == "succeeded"
    assert shards[1].state == "running", detail
    assert (shards[2].state, shards[2].reason) == ("failed", "server_failed_to_start"), detail
    # Shard 3 (exit 6 before any attempt) is told by sacct's exit code alone; squeue prints none.
    assert shards[3].state != "succeeded", detail
    print(f"without sacct, shard 3 (in squeue: {3 in story.sacct_down_squeue}): {shards[3]}")


def test_each_ending_is_classified_while_the_last_task_is_in_squeue(runs: Runs, story: Story) -> None:
    code, status = story.ended_in_squeue
    assert 1 in story.ended_squeue_before, "the cancelled task was still in squeue"
    assert code == 0
    assert status.evidence == "live"
    assert status.scheduler_calls == 2
    assert status.squeue is not None
    assert status.sacct is not None
    assert (status.squeue.status, status.sacct.status) == ("ok", "ok")
    assert_four_endings(status, runs.endings)


def test_each_ending_is_classified_from_sacct_alone_after_min_job_age(runs: Runs, story: Story) -> None:
    code, status = story.ended_sacct_only
    assert code == 0
    assert status.evidence == "live"
    assert status.squeue is not None
    assert status.sacct is not None
    assert (status.squeue.status, status.sacct.status) == ("ok", "ok")
    assert_four_endings(status, runs.endings)


def test_the_table_names_each_shard_not_succeeded_and_check_and_wait_exit_6(story: Story) -> None:
    assert story.table.code == 0, story.table.stderr
    rows = {line.split()[0]: line for line in story.table.stdout.splitlines()[1:] if line.split()[:1] != ["SHARD"]}
    print(story.table.stdout)
    assert set(rows) == {"1", "2", "3"}, story.table.stdout
    assert "cancelled" in rows["1"]
    assert "server_failed_to_start" in rows["2"]
    assert SERVER_REFUSAL in rows["2"], "the last line the server itself wrote"
    assert "environment_mismatch" in rows["3"]
    assert MISSING_MODULE in rows["3"]
    assert story.check.code == 6, story.check.stderr
    assert story.check.status().state == "failed"
    assert story.wait.code == 6, story.wait.stderr
    waited = WaitResult.model_validate_json(story.wait.stdout)
    assert waited.outcome == "ended"
    assert waited.status.state == "failed"


def test_a_corrupt_or_missing_manifest_makes_a_succeeded_shard_not_succeeded(runs: Runs, story: Story) -> None:
    run = runs.endings
    manifest = run.layout.output_manifest(0, 1)
    original = manifest.read_bytes()
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0x01
    try:
        manifest.write_bytes(bytes(flipped))
        _, corrupt = run.status()
        manifest.unlink()
        _, missing = run.status()
    finally:
        manifest.write_bytes(original)
    for status in (corrupt, missing):
        shard = shards_of(status)[0]
        detail = shard.model_dump_json(indent=1)
        assert shard.state != "succeeded", detail
        assert shard.reason == "manifest_invalid", detail
        assert shard.records_done == 0, detail
    assert any("manifest.json is corrupt" in note for note in shards_of(corrupt)[0].anomalies), corrupt


def test_a_requeued_task_is_one_shard_with_two_attempts_that_wait_follows_to_success(runs: Runs) -> None:
    run = runs.requeued
    waited = run.cli("wait", "--timeout", str(WAIT_S), "--interval", "1", "--json")
    assert waited.code == 0, f"{waited.stdout}\n{waited.stderr}\n{run.diagnosis()}"
    result = WaitResult.model_validate_json(waited.stdout)
    assert result.outcome == "succeeded"
    code, status = run.status()
    detail = status.model_dump_json(indent=1)
    assert code == 0
    assert status.state == "succeeded"
    assert status.shards_total == len(status.shards) == 1
    (shard,) = status.shards
    assert shard.state == "succeeded"
    assert shard.records_done == SHARD_RECORDS
    assert [a.attempt for a in shard.attempts] == [1, 2], detail
    first, second = shard.attempts
    assert (first.job_id, first.array_task) == (run.job_id, 0), "the requeued task's first incarnation"
    assert first.state != "succeeded", detail
    assert second.state == "succeeded", detail
