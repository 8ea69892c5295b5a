"""``data-designer slurm execute RUN`` on the real local Slurm cluster: the submission side only.

The run is submitted through the host CLI, its jobs are observed through the scheduler adapter,
the run directory is checked, a resubmission with ``--run-id`` is shown to add no job, and the
jobs are cancelled. What the allocations do once they start (the supervisor) is not asserted
here, so this passes whatever state the allocation runtime is in.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from data_designer.slurm.contracts import ExecuteResult, ExecutionPlan
from data_designer.slurm.contracts.records import (
    INPUTS_SCHEMA,
    RUN_SCHEMA,
    SUBMISSION_SCHEMA,
    InputsManifest,
    RunRecord,
    SubmissionRecord,
)
from data_designer.slurm.planner import ProfileTemplate, plan_digest, render_profile
from data_designer.slurm.runtime.scheduler import SlurmScheduler, SubprocessRunner
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record

pytestmark = pytest.mark.cluster

DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
SHARDS = 12  # MaxArraySize 11 on the local cluster: two array jobs (indices 0-10 and 0)

CONFIG = """\
model_configs:
  - {alias: writer, model: test-model, provider: local}
columns:
  - {name: topic, column_type: sampler, sampler_type: category, params: {values: [a, b]}}
  - {name: text, column_type: llm-text, model_alias: writer, prompt: "Write about {{ topic }}."}
"""

RUN = """\
schema_version: 1
name: cluster-execute
data_designer: {{config: {config}}}
records: {shards}
sharding: {{shards: {shards}}}
deployments:
  writer:
    engine: command
    argv: [{python}, -m, data_designer.slurm.runtime.testing.test_server, --host, "{{host}}", --port, "{{port}}",
           --model, "{{model}}", --replica-id, r]
    model: test-model
    gpus_per_replica: 1
    startup_timeout_s: 60
client: {{cpus: 1, memory_gb: 1}}
submission: {{time_limit: "00:10:00", warning_lead_s: 60, drain_grace_s: 30}}
"""


def slurm_env(local_slurm: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in local_slurm.items() if k in ("SLURM_CONF", "PATH")}


def execute(tmp_path: Path, local_slurm: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    assert DATA_DESIGNER.is_file(), f"the host console script {DATA_DESIGNER} is missing: run 'uv sync'"
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
    env.update({**slurm_env(local_slurm), "HOME": str(home), "COLUMNS": "200"})
    return subprocess.run(
        [str(DATA_DESIGNER), "slurm", "execute", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def payload(result: object) -> object:
    assert isinstance(result, RecordOk), result
    return result.payload


def test_execute_submits_every_chunk_once_and_returns(tmp_path: Path, local_slurm: dict[str, str]) -> None:
    workspace = tmp_path / "ws"
    profile = tmp_path / "profile.yaml"
    template = ProfileTemplate(
        cluster="local",
        workspace_root=str(workspace),
        account=local_slurm["DDSLURM_ACCOUNT"],
        gpu_partition=local_slurm["DDSLURM_GPU_PARTITION"],
        cpu_partition=local_slurm["DDSLURM_CPU_PARTITION"],
        python=sys.executable,
    )  # gpus_per_node 'auto': resolved from the GPU partition's GRES
    profile.write_text(render_profile(template), encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    run_file = tmp_path / "run.yaml"
    run_file.write_text(RUN.format(config=config, python=sys.executable, shards=SHARDS), encoding="utf-8")
    scheduler = SlurmScheduler(SubprocessRunner(overrides=slurm_env(local_slurm)))

    done = execute(tmp_path, local_slurm, str(run_file), "--profile", str(profile), "--json")
    assert done.returncode == 0, done.stderr
    result = ExecuteResult.model_validate_json(done.stdout)
    job_ids = [job.job_id for job in result.jobs]
    try:
        assert (result.shards, result.submitted, result.recovered) == (SHARDS, 2, 0)
        assert [(job.chunk, job.array_spec) for job in result.jobs] == [(0, "0-10"), (1, "0-0")]
        assert [job.job_name for job in result.jobs] == [f"dd-{result.run_id}-c0", f"dd-{result.run_id}-c1"]

        observation = scheduler.observe(job_ids)
        seen = {(task.job_id, task.array_index) for task in observation.tasks}
        assert seen == {(job_ids[0], i) for i in range(11)} | {(job_ids[1], 0)}
        assert {task.job_name for task in observation.tasks} == {job.job_name for job in result.jobs}

        layout = RunLayout.of(workspace, result.run_id)
        assert result.run_dir == str(layout.run_dir)
        plan = ExecutionPlan.model_validate_json(layout.plan_record.read_bytes())
        assert plan.digest == plan_digest(plan) == result.plan_digest
        assert plan.allocation.gpus_per_node == int(local_slurm["DDSLURM_GPUS_PER_NODE"])
        record = payload(read_record(layout.run_record, RUN_SCHEMA))
        assert isinstance(record, RunRecord)
        assert record.facts.max_array_size == int(local_slurm["DDSLURM_MAX_ARRAY_SIZE"])
        manifest = payload(read_record(layout.inputs_manifest, INPUTS_SCHEMA))
        assert isinstance(manifest, InputsManifest)
        assert [(f.role, f.path) for f in manifest.files] == [
            ("run", "inputs/run/run.yaml"),
            ("config", "inputs/config/config.yaml"),
        ]
        assert (layout.run_dir / "inputs/run/run.yaml").read_bytes() == run_file.read_bytes()
        submission = payload(read_record(layout.submission_record(1), SUBMISSION_SCHEMA))
        assert isinstance(submission, SubmissionRecord)
        assert submission.jobs == result.jobs

        again = execute(tmp_path, local_slurm, str(run_file), "--profile", str(profile), "--run-id", result.run_id)
        assert again.returncode == 0, again.stderr
        assert f"  run id       {result.run_id}" in again.stdout
        assert "0 submitted now, 2 submitted earlier" in again.stdout
        assert sorted({t.job_id for t in scheduler.observe(job_ids).tasks}) == sorted(job_ids)
        assert layout.submission_record(2).is_file()
    finally:
        scheduler.cancel(job_ids, confirm_timeout_s=60)
