"""``data-designer slurm benchmark run`` and ``benchmark status`` on the real local Slurm cluster, each a fresh process.

A benchmark of 6 children (concurrency 1 and 2 of the test server, 3 repeats each, 4 records a child) with
``exclusive: true`` and ``max_concurrent_children: 2`` is submitted with the CLI: it returns within seconds, having
asked ``squeue``/``sacct`` at most twice and called ``sbatch`` once per child. While the children run, ``squeue`` is
polled every second: never more than 2 children RUNNING at once, never two on one node (the dependency lanes and
``--exclusive`` are Slurm's doing, no process of ours keeps running). Every child succeeds; running the command
again submits nothing and reports the same benchmark id; one changed value is a new benchmark (cancelled at once).

Two ``benchmark run`` processes started together on a fresh benchmark create each child's run once: one binding
per child, one job per child in Slurm, exit codes 0 or 4 (``benchmark_busy``) with at least one 0.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from data_designer.slurm.contracts import BenchmarkRunResult, BenchmarkStatus
from data_designer.slurm.contracts.records import CHILD_BINDING_SCHEMA
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, read_record
from data_designer.slurm.runtime.testing import writer_run

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

T = TypeVar("T", bound=BaseModel)
DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
CHILDREN = 6
CAP = 2
RETURNS_WITHIN_S = 10.0
"""An assertion bound on one ``benchmark run`` (not a measurement: timings live in benchmarks/)."""
WAIT_S = 150.0
CLI_TIMEOUT_S = 120
BUSY_EXIT = 4
ENDED = frozenset({"succeeded", "partial", "failed", "cancelled", "attention"})


def bench_document(name: str, *, concurrency: tuple[int, ...], repeats: int, records: int = 4) -> dict[str, Any]:
    """A benchmark over the test server (one replica, one fake GPU) with a concurrency axis and repeats."""
    return {
        "schema_version": 1,
        "name": name,
        "base": {"inline": writer_run("base", replicas=1, records=records)},
        "axes": [{"axis": "concurrency", "alias": "writer", "values": list(concurrency)}],
        "repeats": repeats,
        "records": {"policy": "fixed", "records": records},
        "exclusive": True,
        "max_concurrent_children": CAP,
    }


@dataclass
class Call:
    """One CLI process: its exit code and output."""

    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def parse(self, model: type[T]) -> T:
        assert self.stdout.strip(), self.describe()
        return model.model_validate_json(self.stdout)

    def describe(self) -> str:
        return f"{' '.join(self.argv)}: exit {self.code}\n{self.stdout}\n{self.stderr}"


@dataclass
class Workdir:
    """A profile for the local cluster, a HOME, and benchmark files; the CLI run as a user runs it."""

    directory: Path
    local_slurm: Mapping[str, str]
    e2e: ModuleType
    profile: Path = field(init=False)

    def __post_init__(self) -> None:
        (self.directory / "home").mkdir(parents=True, exist_ok=True)
        self.profile = self.e2e.write_profile(self.directory, self.local_slurm, sys.executable)

    @property
    def workspace(self) -> Path:
        return self.directory / "ws"

    def slurm_env(self) -> dict[str, str]:
        env: dict[str, str] = self.e2e.slurm_env(self.local_slurm)
        return env

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
        env.update({**self.slurm_env(), "HOME": str(self.directory / "home"), "COLUMNS": "200"})
        return env

    def write(self, file: str, document: dict[str, Any]) -> Path:
        path = self.directory / file
        path.write_text(json.dumps(document), encoding="utf-8")
        return path

    def command(self, *words: str) -> tuple[str, ...]:
        return (str(DATA_DESIGNER), "slurm", *words, "--profile", str(self.profile), "--json")

    def cli(self, *words: str) -> Call:
        argv = self.command(*words)
        done = subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)
        return Call(argv, done.returncode, done.stdout, done.stderr)

    def together(self, *commands: tuple[str, ...]) -> list[Call]:
        """Several CLI processes started at the same moment (all spawned before any is waited for)."""
        argvs = [self.command(*words) for words in commands]
        env = self.env()
        procs = [
            subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for argv in argvs
        ]
        calls = []
        for argv, proc in zip(argvs, procs, strict=True):
            stdout, stderr = proc.communicate(timeout=CLI_TIMEOUT_S)
            calls.append(Call(argv, proc.returncode, stdout, stderr))
        return calls

    def scheduler(self) -> SlurmScheduler:
        return SlurmScheduler(SubprocessRunner(overrides=self.slurm_env()))

    def queue(self, *flags: str) -> list[tuple[str, str, str, str]]:
        """``squeue`` rows of every job: (job id, of an array its array job id; name, state, node list)."""
        done = SubprocessRunner(overrides=self.slurm_env()).run(
            ["squeue", "--noheader", *flags, "-o", "%A|%j|%T|%N"], timeout_s=30
        )
        assert done.ok, done.describe()
        rows = [tuple(line.split("|", 3)) for line in done.stdout.splitlines() if line.strip()]
        return [(r[0], r[1], r[2], r[3]) for r in rows if len(r) == 4]


def job_names(result: BenchmarkRunResult) -> dict[str, int]:
    """The job name of each child's run (its one chunk: ``dd-<run id>-c0``) -> the child's index."""
    names = {}
    for child in result.children:
        assert child.run_id is not None, child
        names[f"dd-{child.run_id}-c0"] = child.index
    return names


def node_names(node_list: str, workdir: Workdir) -> set[str]:
    """The nodes of a ``squeue %N`` node list (``node1`` or ``node[1-2]``)."""
    if "[" not in node_list:
        return {node_list} if node_list else set()
    done = SubprocessRunner(overrides=workdir.slurm_env()).run(
        ["scontrol", "show", "hostnames", node_list], timeout_s=30
    )
    assert done.ok, done.describe()
    return set(done.stdout.split())


class QueueWatch(threading.Thread):
    """``squeue`` every second while the children run: each sample maps a RUNNING child to its node list."""

    def __init__(self, workdir: Workdir, names: Mapping[str, int]) -> None:
        super().__init__(daemon=True)
        self.workdir = workdir
        self.names = dict(names)
        self.samples: list[dict[int, str]] = []
        self.failures: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                rows = self.workdir.queue("--name", ",".join(self.names))
                running = {self.names[name]: nodes for _, name, state, nodes in rows if state == "RUNNING"}
                self.samples.append(running)
            except AssertionError as exc:  # squeue refused: recorded, the test fails on it
                self.failures.append(str(exc))
            self.halt.wait(1.0)

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=60)


def wait_for_children(workdir: Workdir, bench: str) -> BenchmarkStatus:
    """``benchmark status BENCH --json`` every few seconds until every child ended (bounded)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        call = workdir.cli("benchmark", "status", bench)
        assert call.code == 0, call.describe()
        status = call.parse(BenchmarkStatus)
        if all(child.state in ENDED for child in status.children):
            return status
        assert time.monotonic() < deadline, f"children not over after {WAIT_S}s: {status.counts}"
        time.sleep(3)


def test_six_exclusive_children_run_two_at_a_time_on_their_own_nodes(
    tmp_path: Path, local_slurm: dict[str, str], e2e: ModuleType
) -> None:
    workdir = Workdir(tmp_path, local_slurm, e2e)
    name = f"ddbench-{secrets.token_hex(3)}"
    bench = workdir.write("bench.json", bench_document(name, concurrency=(1, 2), repeats=3))

    started = time.monotonic()
    call = workdir.cli("benchmark", "run", str(bench))
    elapsed = time.monotonic() - started
    assert call.code == 0, call.describe()
    result = call.parse(BenchmarkRunResult)
    names = job_names(result)
    jobs = [job for child in result.children for job in child.jobs]
    watch = QueueWatch(workdir, names)
    watch.start()
    try:
        assert elapsed < RETURNS_WITHIN_S, f"benchmark run took {elapsed:.1f}s"
        assert result.created
        assert result.counts == {"submitted": CHILDREN}, result.counts
        assert (result.sbatch_calls, len(jobs)) == (CHILDREN, CHILDREN), result
        assert result.scheduler_lookups <= 2, result.scheduler_lookups
        assert (result.exclusive, result.max_concurrent_children) == (True, CAP)
        # The lanes: child i waits for child i - 2 (all submitted now, so every predecessor is still queued).
        by_index = {child.index: child for child in result.children}
        for child in result.children:
            expected = by_index[child.index - CAP].jobs if child.index >= CAP else ()
            assert child.after == expected, child
        # The repeats of each case are spread over both lanes.
        for case in {child.case for child in result.children}:
            assert {c.lane for c in result.children if c.case == case} == {0, 1}, case

        again = workdir.cli("benchmark", "run", str(bench))
        assert again.code == 0, again.describe()
        rerun = again.parse(BenchmarkRunResult)
        assert rerun.benchmark_id == result.benchmark_id
        assert not rerun.created
        assert rerun.sbatch_calls == 0
        assert rerun.counts == {"already_submitted": CHILDREN}, rerun.counts
        assert [c.run_id for c in rerun.children] == [c.run_id for c in result.children]

        status = wait_for_children(workdir, result.benchmark_id)
    finally:
        watch.stop()
        workdir.scheduler().cancel(jobs, confirm_timeout_s=60)  # nothing left behind, whatever happened

    assert status.complete, status.model_dump_json(indent=1)
    assert status.counts == {"succeeded": CHILDREN}, status.counts
    assert [c.run_id for c in status.children] == [c.run_id for c in result.children]

    assert not watch.failures, watch.failures
    assert watch.samples, "squeue was never polled"
    most = max(len(sample) for sample in watch.samples)
    assert most <= CAP, [s for s in watch.samples if len(s) > CAP]
    for sample in watch.samples:
        held = [node_names(nodes, workdir) for nodes in sample.values()]
        assert all(held), sample
        assert sum(len(nodes) for nodes in held) == len(set[str]().union(*held)), f"two children on one node: {sample}"
    seen = {index for sample in watch.samples for index in sample}
    assert seen == set(range(CHILDREN)), f"children never seen running: {set(range(CHILDREN)) - seen}"
    print(f"benchmark run returned in {elapsed:.1f}s; at most {most} children running in {len(watch.samples)} polls")

    # One changed value is a new benchmark: its children are cancelled at once.
    changed = workdir.write("changed.json", bench_document(name, concurrency=(1, 3), repeats=3))
    other = workdir.cli("benchmark", "run", str(changed))
    other_jobs = [job for child in other.parse(BenchmarkRunResult).children for job in child.jobs]
    workdir.scheduler().cancel(other_jobs, confirm_timeout_s=60)
    assert other.code == 0, other.describe()
    new = other.parse(BenchmarkRunResult)
    assert new.created
    assert new.benchmark_id != result.benchmark_id
    assert new.benchmark_id.startswith(f"{name}-")
    assert new.sbatch_calls == CHILDREN


def test_two_benchmark_runs_started_together_create_each_child_once(
    tmp_path: Path, local_slurm: dict[str, str], e2e: ModuleType
) -> None:
    workdir = Workdir(tmp_path, local_slurm, e2e)
    name = f"ddrace-{secrets.token_hex(3)}"
    children = 4
    bench = workdir.write("bench.json", bench_document(name, concurrency=(1, 2), repeats=2))

    calls = workdir.together(("benchmark", "run", str(bench)), ("benchmark", "run", str(bench)))
    results = [call.parse(BenchmarkRunResult) for call in calls]
    jobs = {job for result in results for child in result.children for job in child.jobs}
    try:
        assert sorted(call.code for call in calls) in ([0, 0], [0, BUSY_EXIT]), [c.describe() for c in calls]
        for call, result in zip(calls, results, strict=True):
            if call.code == BUSY_EXIT:
                assert result.error is not None, call.describe()
                assert result.error.code == "benchmark_busy", call.describe()
                assert result.counts.get("held", 0) >= 1, call.describe()
        assert len({result.benchmark_id for result in results}) == 1, results
        benchmark_dir = Path(results[0].benchmark_dir)

        bindings = sorted((benchmark_dir / "children").glob("*.json"))
        assert len(bindings) == children, bindings
        read = [read_record(path, CHILD_BINDING_SCHEMA) for path in bindings]
        bound = {found.payload.run_id for found in read if isinstance(found, RecordOk)}
        assert len(bound) == children, bound
        runs = sorted(path.name for path in (workdir.workspace / "runs").iterdir())
        assert sorted(bound) == runs, "one run directory per child, no other"

        # Slurm holds exactly one job per child (any run id of the child counts, so a second run would show).
        queued = workdir.queue("-t", "all")
        for index in range(children):
            ours = [row for row in queued if row[1].startswith(f"dd-{name}-c{index}-")]
            assert len(ours) == 1, (index, ours)
            jobs.add(ours[0][0])
        submitted = [child for result in results for child in result.children if child.outcome == "submitted"]
        assert sorted(child.index for child in submitted) == list(range(children)), submitted
        print(f"two benchmark runs together: exit codes {[c.code for c in calls]}, {[r.counts for r in results]}")
    finally:
        workdir.scheduler().cancel(sorted(jobs), confirm_timeout_s=60)
