"""Serving hygiene in plans: no argv carries a server's API key; a remote vLLM replica reads it from ``VLLM_API_KEY``.

An argv is readable by every user of a node (``/proc/<pid>/cmdline``), so the per-attempt key of a
replica that listens beyond loopback travels in the environment only. These tests pin that for
every golden plan, for vLLM argv built directly, and for ``command`` templates that ask for the key.
"""

from __future__ import annotations

import importlib.util
import string
import sys
from pathlib import Path
from types import ModuleType

import pytest

from data_designer.slurm.contracts import CommandDeployment, ExecutionPlan, Problem, VllmDeployment
from data_designer.slurm.planner._argv import (
    SERVER_API_KEY_ENV,
    SERVER_BOUND_NAMES,
    VLLM_API_KEY_ENV,
    bind_argv,
    command_argv,
    vllm_argv,
)

GOLDEN = Path(__file__).resolve().parent / "golden"


def _load_cases() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ddslurm_golden_cases_hygiene", GOLDEN / "compile_cases.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


cases = _load_cases()
CASE_NAMES: list[str] = cases.case_names()


def _fields(argv: tuple[str, ...]) -> set[str]:
    return {field for element in argv for _, field, _, _ in string.Formatter().parse(element) if field is not None}


@pytest.mark.parametrize("name", CASE_NAMES)
def test_no_golden_plan_puts_a_key_on_a_server_argv(name: str) -> None:
    plan: ExecutionPlan = cases.compile_case(name)
    values = {"host": "10.0.0.7", "port": "8123", "master_addr": "10.0.0.7", "master_port": "29500"}
    for replica in plan.allocation.replicas:
        for argv in (replica.argv, *replica.rank_argv):
            assert _fields(argv) <= SERVER_BOUND_NAMES, argv
            assert "--api-key" not in argv
            bound = bind_argv(argv, values)
            assert not any("api-key" in element or "api_key" in element for element in bound), bound


def test_the_goldens_include_replicas_that_need_a_key() -> None:
    """The test above is not vacuous: golden replicas need the per-attempt key, on loopback and beyond it."""
    remote = [
        (name, replica.alias, replica.bind)
        for name in CASE_NAMES
        for replica in cases.compile_case(name).allocation.replicas
        if replica.requires_api_key
    ]
    assert {name for name, _, _ in remote} >= {"multi_node", "dry_run_unresolved"}
    assert {bind for _, _, bind in remote} == {"all", "loopback"}
    every = [r for name in CASE_NAMES for r in cases.compile_case(name).allocation.replicas]
    assert all(r.requires_api_key for r in every)


def test_no_vllm_argv_carries_a_key_on_one_node_or_several() -> None:
    deployment = VllmDeployment.model_validate(
        {"engine": "vllm", "model": "/m/llama", "tensor_parallel": 8, "engine_args": {"max-num-seqs": 4}}
    )
    problems: list[Problem] = []
    one, no_ranks = vllm_argv("writer", deployment, nodes=1, version=None, problems=problems)
    head, ranks = vllm_argv("writer", deployment, nodes=2, version=None, problems=problems)
    assert problems == []
    assert no_ranks == ()
    assert ranks[0] == head
    assert len(ranks) == 2
    for argv in (one, *ranks):
        assert not any("api-key" in element or "api_key" in element for element in argv), argv
    assert _fields(one) == {"host", "port"}
    assert all(_fields(rank) == {"host", "port", "master_addr", "master_port"} for rank in ranks)
    assert (VLLM_API_KEY_ENV, SERVER_API_KEY_ENV) == ("VLLM_API_KEY", "DDSLURM_SERVER_API_KEY")


def test_a_command_template_gets_the_key_s_variable_name_never_its_value() -> None:
    deployment = CommandDeployment.model_validate(
        {"engine": "command", "argv": ["srv", "--key-env={api_key_env}", "--doc={{api_key}}"], "model": "m"}
    )
    problems: list[Problem] = []
    argv = command_argv("writer", deployment, gpus=1, problems=problems)
    assert problems == []
    assert argv == ("srv", f"--key-env={SERVER_API_KEY_ENV}", "--doc={{api_key}}")
    assert bind_argv(argv, {"host": "h", "port": "1"})[2] == "--doc={api_key}"


def test_a_command_template_asking_for_the_key_is_an_error_pointing_at_api_key_env() -> None:
    deployment = CommandDeployment.model_validate(
        {"engine": "command", "argv": ["srv", "--port", "{port}", "--api-key={api_key}"], "model": "m"}
    )
    problems: list[Problem] = []
    command_argv("writer", deployment, gpus=1, problems=problems)
    [problem] = problems
    assert (problem.code, problem.key_path) == ("api_key_on_argv", ("deployments", "writer", "argv", 3))
    assert "'--api-key={api_key}'" in problem.message
    assert "{api_key_env}" in (problem.hint or "")


def test_a_formatted_key_placeholder_is_still_an_unknown_placeholder() -> None:
    deployment = CommandDeployment.model_validate({"engine": "command", "argv": ["srv", "{api_key!r}"], "model": "m"})
    problems: list[Problem] = []
    command_argv("writer", deployment, gpus=1, problems=problems)
    assert [(p.code, p.key_path) for p in problems] == [("unknown_placeholder", ("deployments", "writer", "argv", 1))]
