"""``benchmark_status``, ``find_benchmark`` and ``list_benchmarks`` over benchmarks submitted to the fake Slurm.

The benchmark here has its base run inline (the run-file form is covered by test_services_benchmark_run.py).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import (
    BenchmarkList,
    BenchmarkRunResult,
    BenchmarkStatus,
    ErrorInfo,
    NotFoundError,
)
from data_designer.slurm.runtime.scheduler import CommandResult
from data_designer.slurm.runtime.store import BenchmarkLayout, RunLayout, sequence_numbers
from data_designer.slurm.runtime.testing import CountingRunner, FakeSlurm
from data_designer.slurm.services import benchmark_status, find_benchmark, list_benchmarks, run_benchmark, run_status

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

BENCH = """\
schema_version: 1
name: {name}
base:
  inline:
    schema_version: 1
    name: base
    data_designer:
      inline:
        model_configs: [{{alias: writer, model: test-model, provider: local}}]
        columns: [{{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}}]
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
axes:
  - {{axis: replicas, alias: writer, values: [1, 2]}}
  - {{axis: concurrency, alias: writer, values: [4, 8, 16]}}
records: {{policy: fixed, records: {records}}}
max_concurrent_children: 2
"""

CHILDREN = 6


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


class Env:
    """A tmp workspace and profile, a two-axis benchmark (2 x 3 cases, no repeats), the fake Slurm as the clock."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fake = FakeSlurm()
        self.workspace = root / "workspace"
        self.profile = write(root / "profile.yaml", PROFILE.format(workspace=self.workspace, python=sys.executable))
        self.bench_file = self.bench("bench.yaml")

    def bench(self, file: str, *, name: str = "sweep", records: int = 20) -> Path:
        return write(self.root / file, BENCH.format(name=name, records=records, python=sys.executable))

    def run(self, bench_file: Path | None = None, runner: Any = None) -> BenchmarkRunResult:
        self.fake.advance(1)
        return run_benchmark(
            bench_file or self.bench_file,
            profile=self.profile,
            runner=self.fake if runner is None else runner,
            clock=self.fake.clock,
            environ={},
        )

    def status(self, bench: str | Path, *, runner: Any = None, refresh: bool = True) -> BenchmarkStatus:
        return benchmark_status(
            bench,
            refresh=refresh,
            profile=self.profile,
            runner=self.fake if runner is None else runner,
            clock=self.fake.clock,
            environ={},
        )


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


class SbatchFailingAt(CountingRunner):
    """The fake, with sbatch unreachable from the ``accepted``-th call on (once)."""

    def __init__(self, fake: FakeSlurm, *, accepted: int) -> None:
        super().__init__(fake)
        self.fake = fake
        self.accepted = accepted

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        stdin: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> CommandResult:
        if argv and argv[0] == "sbatch" and self.count("sbatch") == self.accepted:
            self.fake.fail("sbatch", "error", times=1)
        return super().run(argv, timeout_s=timeout_s, stdin=stdin, environment=environment)


def test_status_classifies_every_child_from_one_observation(env: Env) -> None:
    submitted = env.run()
    assert submitted.counts == {"submitted": CHILDREN}
    env.fake.advance(2)  # the first lane's heads start; the rest wait on their dependencies
    calls = CountingRunner(env.fake)
    status = env.status(submitted.benchmark_id, runner=calls)
    assert [argv[0] for argv in calls.calls] == ["squeue", "sacct"]
    assert status.scheduler_calls == 2
    assert status.evidence == "live"
    assert status.benchmark_id == submitted.benchmark_id
    assert [c.child_id for c in status.children] == [c.child_id for c in submitted.children]
    assert [c.run_id for c in status.children] == [c.run_id for c in submitted.children]
    assert [c.case for c in status.children] == [c.case for c in submitted.children]
    # each child's state is exactly what 'status' says of its run
    for child in status.children:
        assert child.run_id is not None
        assert child.run is not None
        alone = run_status(child.run_id, profile=env.profile, runner=env.fake, clock=env.fake.clock, environ={})
        assert child.state == alone.state, child.index
        assert child.run.run_id == child.run_id
    heads = {status.children[0].state, status.children[1].state}
    assert heads == {"running"}
    assert {c.state for c in status.children[2:]} == {"pending"}
    assert status.counts == {"running": 2, "pending": 4}
    assert status.complete is False
    # every run's part of the one observation is appended to its own observations/
    for child in status.children:
        assert child.run_id is not None
        assert sequence_numbers(RunLayout.of(env.workspace, child.run_id).observations_dir)


def test_no_refresh_makes_no_call_and_a_not_bound_child_is_not_bound(env: Env) -> None:
    failed = env.run(runner=SbatchFailingAt(env.fake, accepted=4))
    assert [c.outcome for c in failed.children] == ["submitted"] * 4 + ["failed", "not_attempted"]
    live = env.status(failed.benchmark_id)
    assert [c.state for c in live.children[4:]] == ["not_submitted", "not_bound"]
    assert live.children[5].run_id is None
    assert live.children[5].run is None
    assert live.children[4].run_id == failed.children[4].run_id
    assert live.counts["not_bound"] == 1

    calls = CountingRunner(env.fake)
    cached = env.status(failed.benchmark_id, runner=calls, refresh=False)
    assert calls.calls == []
    assert cached.scheduler_calls == 0
    assert cached.evidence == "cached"
    assert [c.state for c in cached.children] == [c.state for c in live.children]


def test_find_benchmark_by_id_prefix_name_and_file(env: Env) -> None:
    first = env.run()
    other_file = env.bench("other.yaml", records=30)
    second = env.run(other_file)
    assert first.benchmark_id != second.benchmark_id
    root = env.workspace
    assert find_benchmark(root, first.benchmark_id) == BenchmarkLayout(root, first.benchmark_id)
    unique = next(
        n
        for n in range(len("sweep-") + 1, len(first.benchmark_id))
        if first.benchmark_id[:n] != second.benchmark_id[:n]
    )
    assert find_benchmark(root, first.benchmark_id[:unique]).benchmark_id == first.benchmark_id
    assert find_benchmark(root, "sweep").benchmark_id == second.benchmark_id  # the newest of that name
    assert find_benchmark(root, env.bench_file).benchmark_id == first.benchmark_id
    assert find_benchmark(root, str(other_file)).benchmark_id == second.benchmark_id
    for wrong in ("nothing", "sweep-", "sweep-ffffffffffff", str(env.root / "profile.yaml")):
        with pytest.raises(NotFoundError) as caught:
            find_benchmark(root, wrong)
        assert caught.value.info.exit_code == 3
        assert caught.value.info.code == "benchmark_not_found"
    with pytest.raises(NotFoundError, match="names 2 benchmarks"):
        find_benchmark(root, "sweep-")


def test_list_benchmarks_newest_first(env: Env) -> None:
    assert list_benchmarks(profile=env.profile, environ={}).benchmarks == ()
    first = env.run()
    second = env.run(env.bench("partial.yaml", name="partial"), runner=SbatchFailingAt(env.fake, accepted=4))
    listed = list_benchmarks(profile=env.profile, environ={})
    assert listed.cluster == "local"
    assert [b.benchmark_id for b in listed.benchmarks] == [second.benchmark_id, first.benchmark_id]
    assert [(b.name, b.children, b.bound) for b in listed.benchmarks] == [("partial", 6, 5), ("sweep", 6, 6)]
    assert listed.benchmarks[1].benchmark_file == str(env.bench_file)


# -- the CLI ---------------------------------------------------------------------------------------------------------


def cli(env: Env, *args: str) -> Result:
    import data_designer.slurm.services as services

    def patched(bench: str | Path, **kwargs: Any) -> BenchmarkStatus:
        kwargs.pop("cluster")
        return benchmark_status(bench, runner=env.fake, clock=env.fake.clock, environ={}, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(services, "benchmark_status", patched)
        return CliRunner().invoke(app, ["benchmark", *args, "--profile", str(env.profile)])


def test_cli_status_and_ls_json_parse_as_the_service_models(env: Env) -> None:
    submitted = env.run()
    status = cli(env, "status", submitted.benchmark_id, "--json")
    assert status.exit_code == 0, status.output
    parsed = BenchmarkStatus.model_validate_json(status.stdout)
    assert status.stdout == parsed.model_dump_json() + "\n"
    assert [c.run_id for c in parsed.children] == [c.run_id for c in submitted.children]
    assert parsed.evidence == "live"

    human = cli(env, "status", "sweep", "--no-refresh")
    assert human.exit_code == 0, human.output
    lines = human.stdout.splitlines()
    assert lines[0] == f"Benchmark {submitted.benchmark_id} (sweep) on cluster 'local'"
    assert "last recorded observations" in lines[2]
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "child"])
    rows = [line.split() for line in lines[header + 1 : header + 1 + CHILDREN]]
    assert [row[-1] for row in rows] == [c.run_id for c in submitted.children]

    listed = cli(env, "ls", "--json")
    assert listed.exit_code == 0, listed.output
    assert [b.benchmark_id for b in BenchmarkList.model_validate_json(listed.stdout).benchmarks] == [
        submitted.benchmark_id
    ]
    table = cli(env, "ls")
    assert table.exit_code == 0, table.output
    assert submitted.benchmark_id in table.stdout


def test_cli_status_of_an_unknown_benchmark_exits_3(env: Env) -> None:
    env.run()
    result = cli(env, "status", "nothing", "--json")
    assert result.exit_code == 3
    assert result.stdout == ""
    info = ErrorInfo.model_validate_json(result.stderr)
    assert (info.code, info.key_path) == ("benchmark_not_found", ("BENCH",))
