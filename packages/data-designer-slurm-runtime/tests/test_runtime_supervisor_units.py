"""The supervisor's pure parts: step command lines, memory shares, node addresses, task identity, environment checks."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts import ClusterFacts, ClusterProfile, ExecutionPlan, ReplicaPlan, __version__
from data_designer.slurm.planner import compile, load_run, resolve_config
from data_designer.slurm.runtime.scheduler._command import CommandResult
from data_designer.slurm.runtime.supervisor._containers import step_limits
from data_designer.slurm.runtime.supervisor._environment import (
    SetupError,
    check_environment,
    expected_interpreter,
    identify_task,
    run_layout,
)
from data_designer.slurm.runtime.supervisor._replicas import log_tail, srun_argv, step_environment
from data_designer.slurm.runtime.supervisor._slurm_nodes import allocation_nodes, parse_node_addresses

PYTHON = "/venv/bin/python"


def replica(**changes: Any) -> ReplicaPlan:
    base = ReplicaPlan(
        alias="big",
        replica=1,
        engine="command",
        served_name="big",
        node_indices=(2, 3),
        gpus_per_node=4,
        gpu_indices=(0, 1, 2, 3),
        gpus=8,
        cpus=6,
        memory_mb=24_000,
        argv=("serve", "--port", "{port}"),
        environment={"HF_HOME": "/hf"},
        pass_environment=(),
        bind="all",
        requires_api_key=True,
        health_path="/health",
        startup_timeout_s=600,
    )
    return base.model_copy(update=changes)


def test_a_multi_node_replica_is_one_task_per_node_from_its_first_node() -> None:
    argv = srun_argv(replica(), python=PYTHON, port_dir=Path("/a/ports"), environ={"SLURM_JOB_GPUS": "0,1,2,3"})

    assert argv == [
        "srun",
        "--exact",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--cpus-per-task=6",
        "--relative=2",
        "--export=ALL",
        "--job-name=big-r1",
        "--kill-on-bad-exit=1",
        "--gres=gpu:4",
        "--mem=24000M",
        PYTHON,
        "-m",
        "data_designer.slurm.runtime._launch",
        "--port-dir",
        "/a/ports",
        "--alias",
        "big",
        "--replica",
        "1",
        "--bind-host",
        "0.0.0.0",
        "--",
        "serve",
        "--port",
        "{port}",
    ]


def test_a_replica_without_gpus_asks_for_none_and_a_loopback_one_binds_loopback() -> None:
    plan = replica(node_indices=(0,), gpus_per_node=0, gpu_indices=(), gpus=0, bind="loopback")
    argv = srun_argv(plan, python=PYTHON, port_dir=Path("/p"), environ={"SLURM_JOB_GPUS": "0"})

    assert "--gres=none" in argv
    assert argv[argv.index("--bind-host") + 1] == "127.0.0.1"


def test_a_job_without_gres_gets_no_gres_flag_and_the_planned_gpu_positions() -> None:
    plan = replica(node_indices=(0,), gpus_per_node=2, gpu_indices=(2, 3), gpus=2)
    argv = srun_argv(plan, python=PYTHON, port_dir=Path("/p"), environ={})

    assert not [word for word in argv if word.startswith("--gres")]
    assert step_environment(plan, {"PATH": "/bin"}) == {"PATH": "/bin", "HF_HOME": "/hf", "CUDA_VISIBLE_DEVICES": "2,3"}
    assert "CUDA_VISIBLE_DEVICES" not in step_environment(plan, {"SLURM_JOB_GPUS": "0,1"})


@pytest.mark.parametrize(
    "environ",
    [
        {"SLURM_MEM_PER_NODE": "64000", "SLURM_CPUS_ON_NODE": "32"},
        {"SLURM_MEM_PER_CPU": "1000", "SLURM_CPUS_ON_NODE": "32"},
        {},
    ],
)
def test_a_step_takes_the_memory_the_plan_gives_it_whatever_the_job_holds(environ: dict[str, str]) -> None:
    # srun's default would be all of the job's memory on the node (SLURM_MEM_PER_NODE), blocking every later step.
    assert step_limits(gpus_per_node=0, memory_mb=1_500, environ=environ) == ["--mem=1500M"]
    argv = srun_argv(replica(memory_mb=7_000), python=PYTHON, port_dir=Path("/p"), environ=environ)
    assert [word for word in argv if word.startswith("--mem")] == ["--mem=7000M"]


def test_node_addresses_are_parsed_from_one_line_per_node() -> None:
    text = "NodeName=n1 Arch=x86_64 NodeAddr=10.0.0.1 NodeHostName=n1\nNodeName=n2 NodeAddr=10.0.0.2\n\ngarbage\n"
    assert parse_node_addresses(text) == {"n1": "10.0.0.1", "n2": "10.0.0.2"}


class ScriptedRunner:
    def __init__(self, replies: dict[str, CommandResult]) -> None:
        self.replies = replies
        self.calls: list[tuple[str, ...]] = []

    def run(
        self, argv: Any, *, timeout_s: float, stdin: str | None = None, environment: object = None
    ) -> CommandResult:
        self.calls.append(tuple(argv))
        return self.replies[argv[2] if argv[1] == "show" else argv[3]]


def _ok(argv: tuple[str, ...], stdout: str, code: int = 0) -> CommandResult:
    return CommandResult(argv, code, stdout, "", 0.01)


def test_allocation_nodes_fall_back_to_names_when_slurm_gives_no_address() -> None:
    runner = ScriptedRunner(
        {
            "hostnames": _ok(("scontrol",), "gpu-a\ngpu-b\n"),
            "node": _ok(("scontrol",), "NodeName=gpu-a NodeAddr=10.1.1.1\n"),
        }
    )
    assert allocation_nodes({"SLURM_JOB_NODELIST": "gpu-[a-b]"}, runner) == (("gpu-a", "gpu-b"), ("10.1.1.1", "gpu-b"))
    assert runner.calls == [
        ("scontrol", "show", "hostnames", "gpu-[a-b]"),
        ("scontrol", "-o", "show", "node", "gpu-a,gpu-b"),
    ]


def test_allocation_nodes_need_a_node_list() -> None:
    with pytest.raises(SetupError, match="SLURM_JOB_NODELIST is not set"):
        allocation_nodes({}, ScriptedRunner({}))
    failing = ScriptedRunner({"hostnames": _ok(("scontrol",), "", code=1)})
    with pytest.raises(SetupError, match="cannot expand the node list 'x'"):
        allocation_nodes({"SLURM_JOB_NODELIST": "x"}, failing)


def test_log_tail_is_the_last_lines_and_empty_for_a_missing_log(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert log_tail(log, 3) == ("line 97", "line 98", "line 99")
    assert log_tail(tmp_path / "missing.log") == ()


def plan_with_chunks(client_argv: tuple[str, ...] = (PYTHON, "-m", "w")) -> ExecutionPlan:
    """Three shards in chunks of at most two array tasks: chunk 0 runs shards 0-1, chunk 1 runs shard 2."""
    run = {
        "schema_version": 1,
        "name": "u",
        "data_designer": {"inline": {"columns": [{"name": "n", "column_type": "sampler", "sampler_type": "uuid"}]}},
        "records": 3,
        "sharding": {"shards": 3},
    }
    profile = ClusterProfile.model_validate(
        {
            "workspace_root": "/ws",
            "account": "a",
            "partitions": {"gpu": "gpu", "cpu": "cpu"},
            "gpus_per_node": 2,
            "compute_python": {"interpreter": PYTHON},
            "default_time_limit": "01:00:00",
        }
    )
    spec = load_run(json.dumps(run), file="run.json")
    plan = compile(spec, profile, cluster="c", config=resolve_config(spec), facts=ClusterFacts(max_array_size=2))
    client = plan.allocation.client.model_copy(update={"argv": client_argv})
    return plan.model_copy(update={"allocation": plan.allocation.model_copy(update={"client": client})})


def test_the_task_is_found_from_the_job_name_suffix_and_the_array_index() -> None:
    environ = {"SLURM_JOB_NAME": "run-x-c1", "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_JOB_ID": "77"}
    task = identify_task(plan_with_chunks(), {**environ, "SLURM_RESTART_COUNT": "2"})
    assert (task.chunk, task.array_task, task.shard, task.attempt, task.job_id, task.restart_count) == (
        1,
        0,
        2,
        1,
        "77",
        2,
    )


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"SLURM_JOB_NAME": "run-x-c01", "SLURM_ARRAY_TASK_ID": "0"}, "does not end in '-c<chunk>'"),
        ({"SLURM_JOB_NAME": "run-x-c5", "SLURM_ARRAY_TASK_ID": "0"}, "the plan has no chunk 5"),
        ({"SLURM_JOB_NAME": "run-x-c0"}, "SLURM_ARRAY_TASK_ID '' is not an array index"),
        ({"SLURM_JOB_NAME": "run-x-c1", "SLURM_ARRAY_TASK_ID": "1"}, "chunk 1 of the plan has no array index 1"),
    ],
)
def test_a_task_the_plan_does_not_bind_is_invalid(environ: dict[str, str], message: str) -> None:
    with pytest.raises(SetupError, match=message) as caught:
        identify_task(plan_with_chunks(), environ)
    assert caught.value.status == "invalid_config"


def test_the_run_directory_must_be_a_run_directory(tmp_path: Path) -> None:
    layout = run_layout(tmp_path / "runs" / "r-20260101T000000Z-abcdef")
    assert layout.root == tmp_path
    with pytest.raises(SetupError, match="is not a run directory"):
        run_layout(tmp_path / "elsewhere" / "r-20260101T000000Z-abcdef")
    with pytest.raises(SetupError, match="is not a run directory"):
        run_layout(tmp_path / "runs" / "not-a-run-id")


def versions(**overrides: str | None) -> Any:
    table: dict[str, str | None] = {
        "data-designer-slurm-contracts": __version__,
        "data-designer-slurm-planner": __version__,
        "data-designer-slurm-runtime": __version__,
        "data-designer": "1.0.0rc1",
    }
    table.update({k.replace("_", "-"): v for k, v in overrides.items()})
    return table.get


def test_the_environment_that_matches_passes() -> None:
    check_environment(plan_with_chunks(), executable=PYTHON, version_of=versions())
    check_environment(plan_with_chunks(("python3", "-m", "w")), executable="/any/python", version_of=versions())


@pytest.mark.parametrize(
    ("executable", "overrides", "message"),
    [
        ("/other/python", {}, f"interpreter: the plan runs {PYTHON!r}, the supervisor runs '/other/python'"),
        (PYTHON, {"data_designer_slurm_runtime": "0.9"}, "data-designer-slurm-runtime: version 0.9 is installed"),
        (PYTHON, {"data_designer_slurm_planner": None}, "data-designer-slurm-planner: version (not installed)"),
        (PYTHON, {"data_designer": "2.0.0"}, "data-designer: version 2.0.0 is installed, the runtime needs"),
        (PYTHON, {"data_designer": "0.5"}, "data-designer: version 0.5 is installed"),
        (PYTHON, {"data_designer": None}, "data-designer: not installed"),
    ],
)
def test_a_differing_environment_is_a_mismatch_naming_what_differs(
    executable: str, overrides: dict[str, str | None], message: str
) -> None:
    with pytest.raises(SetupError) as caught:
        check_environment(plan_with_chunks(), executable=executable, version_of=versions(**overrides))
    assert caught.value.status == "environment_mismatch"
    assert str(caught.value).startswith(message)


def test_the_expected_interpreter_is_the_client_s_absolute_python() -> None:
    assert expected_interpreter(plan_with_chunks(("/p/{{x}}/python", "-m", "w"))) == "/p/{x}/python"
    assert expected_interpreter(plan_with_chunks(("python3", "-m", "w"))) is None
    assert sys.executable  # the supervisor compares against sys.executable by default
