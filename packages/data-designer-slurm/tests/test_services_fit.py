"""``execute`` and ``execute --dry-run --cluster-check`` refuse a plan the cluster cannot hold, and the facts cache.

The fake Slurm has nodes like the local cluster's (4 CPUs, 4000 MB, gpu:2) and a ``short`` partition with
MaxTime 30:00. A refusal is exit 2 with one located problem per violation and writes nothing anywhere.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import InvalidInputError, KeyPath, RunDryRun
from data_designer.slurm.runtime.facts import FACTS_MAX_AGE, facts_path
from data_designer.slurm.runtime.store import run_id_factory
from data_designer.slurm.runtime.testing import FakeSlurm
from data_designer.slurm.services import execute_run, plan_run

CREATED = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)

PROFILE = """\
schema_version: 1
default_cluster: local
clusters:
  local:
    workspace_root: {workspace}
    account: ddtest
    partitions: {{gpu: gpu, cpu: cpu}}
    gpus_per_node: {gpus}
    compute_python: {{interpreter: {python}}}
    default_time_limit: "00:20:00"
"""

RUN = """\
schema_version: 1
name: fit
data_designer:
  inline:
    model_configs:
      - {{alias: writer, model: test-model, provider: local}}
    columns:
      - {{name: topic, column_type: sampler, sampler_type: category, params: {{values: [a, b]}}}}
      - {{name: text, column_type: llm-text, model_alias: writer, prompt: "Write about {{{{ topic }}}}."}}
records: 4
sharding: {{shards: 1}}
deployments:
  writer:
    engine: command
    argv: [{python}, -m, data_designer.slurm.runtime.testing.test_server, --port, "{{port}}"]
    model: test-model
    gpus_per_replica: {gpus_per_replica}
client:
{client}
submission:
  partition: {partition}
  time_limit: "{time_limit}"
"""


class Env:
    def __init__(self, root: Path, *, gpus: str = "auto") -> None:
        self.root = root
        self.workspace = root / "ws"
        self.fake = FakeSlurm(
            node_cpus=4, node_memory_mb=4000, partitions={"cpu": "infinite", "gpu": "infinite", "short": "30:00"}
        )
        self.profile = root / "profile.yaml"
        self.profile.write_text(PROFILE.format(workspace=self.workspace, python=sys.executable, gpus=gpus), "utf-8")
        self.run_file = root / "run.yaml"
        self.now = CREATED

    def write_run(
        self, *, partition: str = "gpu", time_limit: str = "00:20:00", gpus_per_replica: int = 1, **client: Any
    ) -> None:
        settings = {"cpus": 1, "memory_gb": 1, **client}
        lines = "\n".join(f"  {k}: {v}" for k, v in settings.items() if v is not None) or "  {}"
        text = RUN.format(
            python=sys.executable,
            client=lines,
            partition=partition,
            time_limit=time_limit,
            gpus_per_replica=gpus_per_replica,
        )
        self.run_file.write_text(text, encoding="utf-8")

    def execute(self) -> Any:
        return execute_run(
            self.run_file,
            profile=self.profile,
            runner=self.fake,
            clock=lambda: self.now,
            environ={},
            id_factory=run_id_factory(lambda: self.now),
        )

    def check(self) -> RunDryRun:
        return plan_run(
            self.run_file,
            profile=self.profile,
            runner=self.fake,
            clock=lambda: self.now,
            cluster_check=True,
            environ={},
        )


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def refused(env: Env) -> list[tuple[str, KeyPath | None, int | None]]:
    """The problems of execute's refusal, after checking it wrote nothing and the dry run's check says the same."""
    with pytest.raises(InvalidInputError) as executed:
        env.execute()
    assert executed.value.exit_code == 2
    assert not env.workspace.exists()
    assert env.fake.count_calls("sbatch") == 0
    with pytest.raises(InvalidInputError) as checked:
        env.check()
    assert checked.value.problems == executed.value.problems
    assert not env.workspace.exists()
    for problem in executed.value.problems:
        assert problem.file == str(env.run_file)
    return [(p.code, p.key_path, p.line) for p in executed.value.problems]


def test_the_default_client_cpus_with_a_co_located_replica_are_refused(env: Env) -> None:
    env.write_run(cpus=None)  # the default: 4, plus the replica's 1 on node 0
    line = env.run_file.read_text(encoding="utf-8").splitlines().index("client:") + 1  # the unwritten key's parent
    assert refused(env) == [("cluster_cpus", ("client", "cpus"), line)]


def test_a_client_memory_of_16_gb_is_refused_at_its_line(env: Env) -> None:
    env.write_run(memory_gb=16)
    line = env.run_file.read_text(encoding="utf-8").splitlines().index("  memory_gb: 16") + 1
    assert refused(env) == [("cluster_memory", ("client", "memory_gb"), line)]


def test_3_gpus_per_replica_on_2_gpu_nodes_are_refused_by_the_fit_check(tmp_path: Path) -> None:
    env = Env(tmp_path, gpus="4")  # the profile says 4 GPUs per node; the partition's nodes have 2
    env.write_run(gpus_per_replica=3)
    ((code, key, _),) = refused(env)
    assert (code, key) == ("cluster_gpus", ("deployments", "writer", "gpus_per_replica"))


def test_a_time_limit_above_max_time_is_refused(env: Env) -> None:
    env.write_run(partition="short", time_limit="01:00:00")
    ((code, key, _),) = refused(env)
    assert (code, key) == ("cluster_time_limit", ("submission", "time_limit"))


def test_a_plan_that_fits_is_submitted_and_its_facts_cached_for_the_next_hour(env: Env) -> None:
    env.write_run()
    assert env.check().facts.partitions  # the dry run's check asks, and writes nothing
    assert not env.workspace.exists()
    env.execute()
    assert facts_path(env.workspace).is_file()
    assert env.fake.count_calls("sinfo") == 2
    env.now = CREATED + FACTS_MAX_AGE
    env.execute()
    assert env.fake.count_calls("sinfo") == 2, "fresh facts are reused"
    env.now = CREATED + FACTS_MAX_AGE + timedelta(seconds=1)
    env.execute()
    assert env.fake.count_calls("sinfo") == 3, "stale facts are asked again"


def test_a_dry_run_without_the_check_stays_offline(env: Env) -> None:
    env.write_run(cpus=None, memory_gb=16)
    result = plan_run(env.run_file, profile=env.profile, environ={})  # no runner: it would fail if it asked
    assert result.plan.submittable is False  # gpus_per_node auto stays unresolved offline
    assert result.facts.partitions == ()


def test_the_cli_takes_cluster_check_only_with_dry_run(env: Env) -> None:
    env.write_run()
    runner = CliRunner()
    result = runner.invoke(app, ["execute", str(env.run_file), "--profile", str(env.profile), "--cluster-check"])
    assert result.exit_code == 2
    assert "--cluster-check applies to --dry-run only" in result.output
    args = ["execute", str(env.run_file), "--profile", str(env.profile), "--dry-run", "--cluster-check"]
    result = runner.invoke(app, [*args, "--max-array-size", "5"])
    assert result.exit_code == 2
    assert "--max-array-size does not combine with --cluster-check" in result.output
