"""``run_benchmark`` against the fake Slurm: one sbatch per child, dependency lanes, bindings, re-runs, failures."""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from typer.testing import CliRunner, Result

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import BenchmarkRunResult, ChildSubmission
from data_designer.slurm.contracts.records import (
    BENCHMARK_CHILD_SCHEMA,
    BENCHMARK_SCHEMA,
    CHILD_BINDING_SCHEMA,
    CHILD_RESUME_SCHEMA,
    INPUTS_SCHEMA,
    RUN_SCHEMA,
    BenchmarkLink,
    BenchmarkRecord,
    ChildBinding,
    InputsManifest,
    Requester,
    RunRecord,
)
from data_designer.slurm.runtime.scheduler import CommandResult
from data_designer.slurm.runtime.store import (
    BenchmarkLayout,
    RecordOk,
    RecordWritten,
    RunLayout,
    read_benchmark,
    read_record,
    sequence_numbers,
    write_record_once,
)
from data_designer.slurm.runtime.testing import CountingRunner, FailureMode, FakeSlurm
from data_designer.slurm.services import run_benchmark

PROFILE = """\
schema_version: 1
default_cluster: local
clusters:
  local:
    workspace_root: {workspace}
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: auto
    compute_python: {{interpreter: {python}}}
    default_time_limit: "00:30:00"
"""

CONFIG = """\
model_configs:
  - {alias: writer, model: test-model, provider: local}
columns:
  - {name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}
"""

RUN = """\
schema_version: 1
name: base
data_designer: {{config: {config}}}
records: 20
sharding: {{shards: 1}}
deployments:
  writer:
    engine: command
    argv: [{python}, -m, data_designer.slurm.runtime.testing.test_server, --host, "{{host}}", --port, "{{port}}",
           --model, "{{model}}", --replica-id, r]
    model: test-model
    gpus_per_replica: 1
client: {{cpus: 1, memory_gb: 1}}
"""

BENCH = """\
schema_version: 1
name: sweep
base: {{run: {run}}}
axes:
  - {{axis: concurrency, alias: writer, values: [1, 2]}}
repeats: 3
records: {{policy: fixed, records: {records}}}
max_concurrent_children: 2
"""

CAP = 2
CHILDREN = 6
OTHER_HOST = "login-elsewhere"
T = TypeVar("T")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


class Env:
    """A tmp workspace, a profile, a benchmark file (one axis x 3 repeats, cap 2) over a base run and its config."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fake = FakeSlurm()
        self.workspace = root / "workspace"
        self.profile = write(root / "profile.yaml", PROFILE.format(workspace=self.workspace, python=sys.executable))
        self.config = write(root / "in" / "config.yaml", CONFIG)
        self.run_file = write(root / "in" / "run.yaml", RUN.format(config=self.config, python=sys.executable))
        self.bench_file = write(root / "in" / "bench.yaml", BENCH.format(run=self.run_file, records=20))

    def run(self, runner: Any = None, **kwargs: Any) -> BenchmarkRunResult:
        """One ``benchmark run``; the fake's clock moves on a second first (a later call, as on a real login node)."""
        self.fake.advance(1)
        return run_benchmark(
            self.bench_file,
            profile=self.profile,
            runner=self.fake if runner is None else runner,
            clock=self.fake.clock,
            environ={},
            **kwargs,
        )

    def layout(self, result: BenchmarkRunResult) -> BenchmarkLayout:
        return BenchmarkLayout(self.workspace, result.benchmark_id)

    def record(self, result: BenchmarkRunResult) -> BenchmarkRecord:
        return read_benchmark(self.layout(result)).record

    def bindings(self, result: BenchmarkRunResult) -> dict[str, ChildBinding]:
        snapshot = read_benchmark(self.layout(result))
        return {cid: c.binding for cid, c in snapshot.children.items() if c.binding is not None}

    def run_dirs(self) -> list[str]:
        runs = self.workspace / "runs"
        return sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []

    def run_layout(self, run_id: str) -> RunLayout:
        return RunLayout.of(self.workspace, run_id)

    def jobs_of(self, row: ChildSubmission) -> list[int]:
        return [int(job) for job in row.jobs]


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def ok(read: object, kind: type[T]) -> T:
    assert isinstance(read, RecordOk), read
    payload = read.payload
    assert isinstance(payload, kind)
    return payload


class SbatchFailing(CountingRunner):
    """Lets ``accepted`` sbatch calls through, then makes the fake's next one fail as ``mode`` says (once)."""

    def __init__(self, fake: FakeSlurm, *, accepted: int, mode: FailureMode) -> None:
        super().__init__(fake)
        self.fake = fake
        self.accepted = accepted
        self.mode = mode

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        stdin: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> CommandResult:
        if argv and argv[0] == "sbatch" and self.count("sbatch") == self.accepted:
            self.fake.fail("sbatch", self.mode, times=1)
        return super().run(argv, timeout_s=timeout_s, stdin=stdin, environment=environment)


class LockedRunner:
    """The fake behind a lock, so threads share one consistent cluster (a real controller serialises too)."""

    def __init__(self, inner: FakeSlurm) -> None:
        self.inner = inner
        self.lock = threading.Lock()

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        stdin: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> CommandResult:
        with self.lock:
            return self.inner.run(argv, timeout_s=timeout_s, stdin=stdin, environment=environment)


# -- a first run ------------------------------------------------------------------------------------------------------


def test_six_children_one_sbatch_each_in_two_dependency_lanes(env: Env) -> None:
    calls = CountingRunner(env.fake)
    result = env.run(calls)
    assert result.error is None
    assert result.created is True
    assert result.counts == {"submitted": CHILDREN}
    assert result.sbatch_calls == CHILDREN == calls.count("sbatch")
    assert result.scheduler_lookups == 0 == calls.count("squeue") + calls.count("sacct")
    assert result.facts_asked is True
    assert [row.lane for row in result.children] == [i % CAP for i in range(CHILDREN)]
    # the repeats of one case fall into different lanes: case values [1, 2] x repeats 3, repeats innermost
    assert [(dict(row.case)["concurrency.writer"], row.repeat) for row in result.children] == [
        (1, 0),
        (1, 1),
        (1, 2),
        (2, 0),
        (2, 1),
        (2, 2),
    ]
    jobs = [env.jobs_of(row) for row in result.children]
    assert all(len(one) == 1 for one in jobs)
    assert sorted(env.fake.jobs) == sorted(j for one in jobs for j in one)
    for i, row in enumerate(result.children):
        job = env.fake.jobs[jobs[i][0]]
        expected = () if i < CAP else tuple(jobs[i - CAP])
        assert job.after == expected, (i, job.after)
        assert row.after == tuple(str(j) for j in expected)
    # Slurm's dependencies hold the lanes: never more than CAP children running
    for _ in range(30):
        env.fake.advance(1)
        running = [j for j in env.fake.jobs.values() if any(t.state == "RUNNING" for t in j.tasks.values())]
        assert len(running) <= CAP

    # a second benchmark (another value) finds the facts cached: sbatch only, no other call at all
    write(env.bench_file, BENCH.format(run=env.run_file, records=30))
    again = CountingRunner(env.fake)
    other = env.run(again)
    assert other.facts_asked is False
    assert {argv[0] for argv in again.calls} == {"sbatch"}
    assert other.sbatch_calls == CHILDREN == len(again.calls)


def test_records_bindings_and_child_run_directories(env: Env) -> None:
    result = env.run()
    layout = env.layout(result)
    assert layout.directory == Path(result.benchmark_dir)
    record = ok(read_record(layout.record, BENCHMARK_SCHEMA), BenchmarkRecord)
    assert record.benchmark_id == result.benchmark_id
    assert record.digest == result.digest
    assert (record.cases, record.repeats, record.max_concurrent_children) == (2, 3, CAP)
    assert [c.child_id for c in record.children] == [row.child_id for row in result.children]
    assert all(len(c.plan_digest) == 64 and c.records == 20 for c in record.children)
    assert len({c.plan_digest for c in record.children}) == 2  # repeats of one case share a plan
    assert {f.role for f in record.inputs} == {"benchmark", "run", "config"}
    for f in record.inputs:
        assert (layout.directory / f.path).read_bytes() == Path(f.source).read_bytes()

    bindings = env.bindings(result)
    assert {cid: b.run_id for cid, b in bindings.items()} == {row.child_id: row.run_id for row in result.children}
    assert sorted(b.run_id for b in bindings.values()) == env.run_dirs()
    for entry, row in zip(record.children, result.children, strict=True):
        assert row.run_id is not None
        run = env.run_layout(row.run_id)
        link = ok(read_record(run.benchmark_record, BENCHMARK_CHILD_SCHEMA), BenchmarkLink)
        assert (link.benchmark_id, link.digest, link.child_id, link.index) == (
            result.benchmark_id,
            result.digest,
            entry.child_id,
            entry.index,
        )
        assert (link.case, link.repeat) == (entry.case, entry.repeat)
        run_record = ok(read_record(run.run_record, RUN_SCHEMA), RunRecord)
        assert run_record.records == 20
        assert run_record.plan_digest == entry.plan_digest
        manifest = ok(read_record(run.inputs_manifest, INPUTS_SCHEMA), InputsManifest)
        assert {f.role for f in manifest.files} == {"benchmark", "run", "config"}
        assert (run.run_dir / next(f.path for f in manifest.files if f.role == "config")).read_text(
            encoding="utf-8"
        ) == CONFIG
        assert list(sequence_numbers(run.submissions_dir)) == [1]


# -- re-runs ----------------------------------------------------------------------------------------------------------


def test_rerun_submits_nothing_and_a_changed_value_is_a_new_benchmark(env: Env) -> None:
    first = env.run()
    before = env.run_dirs()
    calls = CountingRunner(env.fake)
    again = env.run(calls)
    assert again.benchmark_id == first.benchmark_id
    assert again.created is False
    assert again.counts == {"already_submitted": CHILDREN}
    assert again.sbatch_calls == 0 == calls.count("sbatch")
    assert [row.jobs for row in again.children] == [row.jobs for row in first.children]
    assert [row.run_id for row in again.children] == [row.run_id for row in first.children]
    assert env.run_dirs() == before

    write(env.bench_file, BENCH.format(run=env.run_file, records=30))
    changed = env.run()
    assert changed.benchmark_id != first.benchmark_id
    assert changed.created is True
    assert changed.counts == {"submitted": CHILDREN}
    assert sorted(p.name for p in (env.workspace / "benchmarks").iterdir()) == sorted(
        [first.benchmark_id, changed.benchmark_id]
    )
    assert len(env.run_dirs()) == 2 * CHILDREN

    write(env.bench_file, BENCH.format(run=env.run_file, records=20).replace("[1, 2]", "[1, 4]"))
    axis = env.run()
    assert axis.benchmark_id not in (first.benchmark_id, changed.benchmark_id)
    assert axis.counts == {"submitted": CHILDREN}


@pytest.mark.parametrize(("mode", "code"), [("rejected", 2), ("error", 5)])
def test_sbatch_failing_at_child_4_then_a_rerun_submits_exactly_4_and_5(env: Env, mode: FailureMode, code: int) -> None:
    failing = env.run(SbatchFailing(env.fake, accepted=4, mode=mode))
    assert failing.error is not None
    assert failing.error.exit_code == code
    assert [row.outcome for row in failing.children] == ["submitted"] * 4 + ["failed", "not_attempted"]
    assert failing.children[4].run_id is not None  # bound before it was submitted
    assert failing.children[4].detail
    assert failing.children[5].run_id is None
    assert failing.sbatch_calls == 5
    submitted = {row.child_id: row.jobs for row in failing.children[:4]}
    jobs_before = dict(env.fake.jobs)
    assert len(jobs_before) == 4

    calls = CountingRunner(env.fake)
    again = env.run(calls)
    assert again.error is None
    assert again.benchmark_id == failing.benchmark_id
    assert [row.outcome for row in again.children] == ["already_submitted"] * 4 + ["resumed", "submitted"]
    assert again.sbatch_calls == 2 == calls.count("sbatch")
    assert {row.child_id: row.jobs for row in again.children[:4]} == submitted
    assert again.children[4].run_id == failing.children[4].run_id  # the bound run, not a second one
    # predecessors 2 and 3 are still queued (one observation said so): the lanes continue through them
    assert again.scheduler_lookups == calls.count("squeue") + calls.count("sacct") >= 1
    assert again.children[4].after == failing.children[2].jobs
    assert again.children[5].after == failing.children[3].jobs
    assert len(env.fake.jobs) == CHILDREN
    assert all(env.fake.jobs[j] is job for j, job in jobs_before.items())
    assert len(env.run_dirs()) == CHILDREN
    assert len({job.name for job in env.fake.jobs.values()}) == CHILDREN
    layout = env.layout(again)
    assert sorted(p.name for p in layout.children_dir.iterdir()) == sorted(
        [f"{row.child_id}.json" for row in again.children] + [f"{again.children[4].child_id}.resume-1"]
    )


def test_a_predecessor_gone_from_the_scheduler_is_left_out_of_the_dependency(env: Env) -> None:
    failing = env.run(SbatchFailing(env.fake, accepted=4, mode="error"))
    assert failing.error is not None
    env.fake.advance(60)  # children 0-3 finish and pass MinJobAge: Slurm refuses a dependency on them now
    assert all(job.left_queue for job in env.fake.jobs.values())
    again = env.run()
    assert again.error is None, again.error
    assert [row.outcome for row in again.children[4:]] == ["resumed", "submitted"]
    assert [row.after for row in again.children[4:]] == [(), ()]
    assert [env.fake.jobs[int(row.jobs[0])].after for row in again.children[4:]] == [(), ()]


# -- the CLI ---------------------------------------------------------------------------------------------------------


def cli(env: Env, runner: Any, *args: str) -> Result:
    import data_designer.slurm.services as services

    def patched(bench_file: str | Path, **kwargs: Any) -> BenchmarkRunResult:
        kwargs.pop("cluster")
        env.fake.advance(1)
        return run_benchmark(bench_file, runner=runner, clock=env.fake.clock, environ={}, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(services, "run_benchmark", patched)
        return CliRunner().invoke(app, ["benchmark", "run", str(env.bench_file), "--profile", str(env.profile), *args])


@pytest.mark.parametrize(("mode", "code"), [("rejected", 2), ("error", 5)])
def test_cli_exits_with_the_failure_code_after_printing_the_table(env: Env, mode: FailureMode, code: int) -> None:
    result = cli(env, SbatchFailing(env.fake, accepted=4, mode=mode))
    assert result.exit_code == code, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Benchmark sweep-")
    assert lines[0].endswith("on cluster 'local' (new)")
    assert "6: 4 submitted, 1 failed, 1 not attempted" in lines[2]
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "child"])
    rows = [line.split() for line in lines[header + 1 : header + 1 + CHILDREN]]
    assert [row[0] for row in rows] == [str(i) for i in range(CHILDREN)]
    assert [row[4] for row in rows] == ["submitted"] * 4 + ["failed", "not"]
    assert any(line.startswith("stopped: ") for line in lines)
    assert any(line.startswith("  child 4: ") for line in lines)

    json_run = cli(env, env.fake, "--json")
    assert json_run.exit_code == 0, json_run.output
    parsed = BenchmarkRunResult.model_validate_json(json_run.stdout)
    assert [row.outcome for row in parsed.children] == ["already_submitted"] * 4 + ["resumed", "submitted"]


def test_cli_json_of_a_failure_is_the_result_and_exits_non_zero(env: Env) -> None:
    result = cli(env, SbatchFailing(env.fake, accepted=4, mode="rejected"), "--json")
    assert result.exit_code == 2
    parsed = BenchmarkRunResult.model_validate_json(result.stdout)
    assert result.stdout == parsed.model_dump_json() + "\n"
    assert parsed.error is not None
    assert (parsed.error.code, parsed.error.exit_code) == ("sbatch_rejected", 2)
    assert parsed.counts == {"submitted": 4, "failed": 1, "not_attempted": 1}


# -- held bindings and concurrent calls ----------------------------------------------------------------------------


def bind_elsewhere(env: Env, layout: BenchmarkLayout, child_id: str, index: int) -> ChildBinding:
    """A binding as another ``benchmark run`` on another login node took it (its run never written)."""
    binding = ChildBinding(
        child_id=child_id,
        index=index,
        run_id=f"sweep-c{index}-20260101T000000Z-0e4e70",
        claimed_by=Requester(user="other", host=OTHER_HOST, pid=4242, time=env.fake.clock()),
    )
    layout.children_dir.mkdir(parents=True, exist_ok=True)
    written = write_record_once(layout.binding(child_id), CHILD_BINDING_SCHEMA, binding, clock=env.fake.clock)
    assert isinstance(written, RecordWritten)
    return binding


def planned_layout(env: Env) -> tuple[BenchmarkLayout, list[str]]:
    """The benchmark's layout and child ids, from a run that submitted nothing (sbatch unreachable at child 0)."""
    probe = env.run(SbatchFailing(env.fake, accepted=0, mode="error"))
    assert [row.outcome for row in probe.children] == ["failed"] + ["not_attempted"] * (CHILDREN - 1)
    return env.layout(probe), [row.child_id for row in probe.children]


def test_a_child_held_by_another_live_process_stops_with_benchmark_busy(env: Env) -> None:
    layout, ids = planned_layout(env)
    theirs = bind_elsewhere(env, layout, ids[2], 2)
    calls = CountingRunner(env.fake)
    held = env.run(calls, alive=lambda who: who.host == OTHER_HOST)
    assert [row.outcome for row in held.children] == ["resumed", "submitted", "held"] + ["not_attempted"] * 3
    assert held.children[2].run_id == theirs.run_id
    assert held.error is not None
    assert (held.error.code, held.error.exit_code) == ("benchmark_busy", 4)
    assert calls.count("sbatch") == 2
    assert not env.run_layout(theirs.run_id).run_dir.exists()  # left to its holder
    assert not layout.resume_claim(ids[2], 1).exists()

    gone = env.run(alive=lambda who: False)
    assert gone.error is None
    assert [row.outcome for row in gone.children] == ["already_submitted"] * 2 + ["resumed"] + ["submitted"] * 3
    assert gone.children[2].run_id == theirs.run_id  # the bound run id is kept: never a second run for child 2
    claim = read_record(layout.resume_claim(ids[2], 1), CHILD_RESUME_SCHEMA)
    assert isinstance(claim, RecordOk)
    assert claim.payload.claimed_by.host != OTHER_HOST
    assert env.run_layout(theirs.run_id).run_record.is_file()
    assert len(env.run_dirs()) == CHILDREN


def test_cli_held_child_exits_4(env: Env) -> None:
    layout, ids = planned_layout(env)
    bind_elsewhere(env, layout, ids[1], 1)

    def busy(bench_file: str | Path, **kwargs: Any) -> BenchmarkRunResult:
        kwargs.pop("cluster")
        env.fake.advance(1)
        return run_benchmark(
            bench_file, runner=env.fake, clock=env.fake.clock, environ={}, alive=lambda who: True, **kwargs
        )

    import data_designer.slurm.services as services

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(services, "run_benchmark", busy)
        result = CliRunner().invoke(app, ["benchmark", "run", str(env.bench_file), "--profile", str(env.profile)])
    assert result.exit_code == 4, result.output
    assert "held" in result.stdout
    assert "child 1: child 1 is being submitted by other@login-elsewhere (pid 4242)" in result.stdout


@pytest.mark.parametrize("before", ["nothing", "a_failed_call"])
def test_two_concurrent_runs_create_each_child_once(env: Env, before: str) -> None:
    """Racing for the record and every binding (nothing before), or for child 0's resume claim (a call that bound
    child 0 and failed to submit it): each child's run is created and submitted exactly once."""
    if before == "a_failed_call":
        env.run(SbatchFailing(env.fake, accepted=0, mode="error"))
    env.fake.advance(1)
    shared = LockedRunner(env.fake)
    results: list[BenchmarkRunResult] = []
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def one() -> None:
        try:
            start.wait()
            results.append(
                run_benchmark(env.bench_file, profile=env.profile, runner=shared, clock=env.fake.clock, environ={})
            )
        except BaseException as exc:  # a thread's error must fail the test, not vanish
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert len(results) == 2
    assert results[0].benchmark_id == results[1].benchmark_id
    if before == "nothing":
        assert sorted(r.created for r in results) == [False, True]
    names = [job.name for job in env.fake.jobs.values()]
    assert len(names) == CHILDREN == len(set(names))
    assert len(env.run_dirs()) == CHILDREN
    bindings = env.bindings(results[0])
    assert len(bindings) == CHILDREN
    assert sorted(b.run_id for b in bindings.values()) == env.run_dirs()
    for index in range(CHILDREN):
        rows = [r.children[index] for r in results]
        doers = [row for row in rows if row.outcome in ("submitted", "resumed")]
        assert len(doers) == 1, (index, [row.outcome for row in rows])
        assert {row.run_id for row in rows if row.run_id is not None} == {bindings[rows[0].child_id].run_id}
        (job,) = doers[0].jobs
        assert env.fake.jobs[int(job)].name in names
    for result in results:
        if result.error is not None:
            assert result.error.code == "benchmark_busy"
    # whatever each call saw, nothing is lost: a third call finds every child submitted
    final = env.run()
    assert final.counts == {"already_submitted": CHILDREN}
