"""vLLM replicas that span nodes get one argv per node rank, and engine args are checked against the vLLM release that
will run: the registered image's, the deployment's ``vllm_version``, or (neither) every supported release."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from data_designer.slurm.contracts import (
    ClusterProfile,
    ExecutionPlan,
    ImageRecord,
    InvalidInputError,
    ReplicaPlan,
    format_key_path,
)
from data_designer.slurm.planner import MULTI_NODE_FLAGS, compile, load_run, resolve_config

CONFIG: dict[str, Any] = {
    "model_configs": [{"alias": "big", "model": "big", "provider": "local"}],
    "columns": [{"name": "a", "column_type": "llm-text", "model_alias": "big", "prompt": "x"}],
}


def _plan(
    deployment: dict[str, Any], *, gpus_per_node: int = 2, images: list[ImageRecord] | None = None
) -> ExecutionPlan:
    run = {
        "schema_version": 1,
        "name": "r",
        "data_designer": {"inline": copy.deepcopy(CONFIG)},
        "records": 8,
        "sharding": {"shards": 1},
        "deployments": {"big": {"engine": "vllm", "model": "/m/big", **deployment}},
    }
    profile = ClusterProfile.model_validate(
        {
            "workspace_root": "/ws",
            "partitions": {"gpu": "gpu", "cpu": "cpu"},
            "gpus_per_node": gpus_per_node,
            "compute_python": {"interpreter": "/venv/bin/python"},
            "container_runtime": "pyxis",
        }
    )
    spec = load_run(json.dumps(run), file="run.json")
    return compile(spec, profile, cluster="c", config=resolve_config(spec), images=images)


def _problems(deployment: dict[str, Any], **kwargs: Any) -> dict[str, str]:
    with pytest.raises(InvalidInputError) as caught:
        _plan(deployment, **kwargs)
    return {f"{p.code}@{format_key_path(p.key_path or ())}": f"{p.message} | {p.hint}" for p in caught.value.problems}


def _value(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize(
    ("tp", "pp", "gpus_per_node", "ranks"),
    [(2, 2, 2, 2), (8, 1, 4, 2), (4, 4, 4, 4), (1, 3, 1, 3)],
)
def test_a_replica_over_n_nodes_gets_one_argv_per_rank(tp: int, pp: int, gpus_per_node: int, ranks: int) -> None:
    (replica,) = _plan(
        {"tensor_parallel": tp, "pipeline_parallel": pp}, gpus_per_node=gpus_per_node
    ).allocation.replicas
    assert replica.node_indices == tuple(range(ranks))
    assert replica.ranks == len(replica.rank_argv) == ranks
    assert replica.rank_argv[0] == replica.argv
    assert replica.bind == "all"
    for rank, argv in enumerate(replica.rank_argv):
        assert (_value(argv, "--tensor-parallel-size"), _value(argv, "--pipeline-parallel-size")) == (str(tp), str(pp))
        assert (_value(argv, "--nnodes"), _value(argv, "--node-rank")) == (str(ranks), str(rank))
        assert (_value(argv, "--master-addr"), _value(argv, "--master-port")) == ("{master_addr}", "{master_port}")
        assert _value(argv, "--distributed-executor-backend") == "mp"
        assert ("--headless" in argv) == (rank > 0), "rank 0 serves the API, the others run headless"
        assert {word for word in argv if word.startswith("-") and word in MULTI_NODE_FLAGS} == set(MULTI_NODE_FLAGS) - (
            set() if rank else {"--headless"}
        )
    # Apart from the rank and --headless, every rank runs the same server.
    stripped = [[w for w in words if w != "--headless"] for words in replica.rank_argv]
    for words in stripped:
        words[words.index("--node-rank") + 1] = "R"
    assert all(words == stripped[0] for words in stripped)


def test_a_replica_on_one_node_has_no_rank_argv() -> None:
    (replica,) = _plan({"tensor_parallel": 2}).allocation.replicas
    assert replica.rank_argv == ()
    assert replica.ranks == 1
    assert not set(replica.argv) & set(MULTI_NODE_FLAGS)


def test_rank_argv_must_agree_with_argv_and_the_nodes() -> None:
    (replica,) = _plan({"tensor_parallel": 2, "pipeline_parallel": 2}).allocation.replicas
    data = replica.model_dump()
    with pytest.raises(ValidationError, match="rank_argv\\[0\\] must be argv"):
        ReplicaPlan.model_validate({**data, "argv": ("vllm", "serve", "other")})
    with pytest.raises(ValidationError, match="1 ranks for 2 nodes"):
        ReplicaPlan.model_validate({**data, "rank_argv": data["rank_argv"][:1]})


# -- the release the engine args are checked against ----------------------------------------------------------

ONLY_0_33 = "disable-prefix-caching"  # an option string 0.33 has and 0.32 lacks


def _image(vllm: str | None) -> ImageRecord:
    return ImageRecord(
        name="serve",
        path="/img/serve.sqsh",
        kind="squashfs",
        digest="d" * 64,
        role="serving",
        python="3.12",
        versions={"vllm": vllm},
    )


def test_a_flag_of_one_release_only_is_refused_when_the_release_is_unknown() -> None:
    found = _problems({"engine_args": {ONLY_0_33: True}})
    (key,) = found
    assert key.endswith("@deployments.big.engine_args.disable-prefix-caching"), found
    assert "0.33.0" in found[key], found
    assert "vllm_version" in found[key], "the fix says how to state the release"


def test_a_stated_release_checks_the_flags_of_that_release() -> None:
    (replica,) = _plan({"vllm_version": "0.33.0", "engine_args": {ONLY_0_33: True}}).allocation.replicas
    assert f"--{ONLY_0_33}" in replica.argv
    found = _problems({"vllm_version": "0.32.0", "engine_args": {ONLY_0_33: True}})
    (message,) = found.values()
    assert "0.32.0" in message, found


@pytest.mark.parametrize(("inspected", "accepted"), [("0.33.0+cu129", True), ("0.33.2", True), ("0.32.1", False)])
def test_a_registered_image_s_vllm_is_the_release(inspected: str, accepted: bool) -> None:
    deployment = {"image": "serve", "engine_args": {ONLY_0_33: True}}
    if accepted:
        (replica,) = _plan(deployment, images=[_image(inspected)]).allocation.replicas
        assert f"--{ONLY_0_33}" in replica.argv
    else:
        (message,) = _problems(deployment, images=[_image(inspected)]).values()
        assert "0.32.0" in message


def test_an_unsupported_or_disagreeing_vllm_version_is_refused() -> None:
    assert list(_problems({"vllm_version": "0.31.0"})) == ["vllm_version_unsupported@deployments.big.vllm_version"]
    found = _problems({"vllm_version": "0.32.0", "image": "serve"}, images=[_image("0.33.0")])
    assert list(found) == ["vllm_version_mismatch@deployments.big.vllm_version"], found
    assert "0.33.0" in found["vllm_version_mismatch@deployments.big.vllm_version"]


def test_vllm_version_is_a_release_number() -> None:
    with pytest.raises(InvalidInputError):
        _plan({"vllm_version": "latest"})


@pytest.mark.parametrize(
    ("switch", "needed"),
    [("enable-auto-tool-choice", "tool-call-parser"), ("enable-log-outputs", "enable-log-requests")],
)
def test_a_switch_vllm_refuses_alone_needs_its_partner(switch: str, needed: str) -> None:
    found = _problems({"engine_args": {switch: True}})
    assert list(found) == [f"engine_arg_requires@deployments.big.engine_args.{switch}"], found
    assert needed in found[f"engine_arg_requires@deployments.big.engine_args.{switch}"]
    partner: str | bool = "hermes" if needed == "tool-call-parser" else True
    (replica,) = _plan({"engine_args": {switch: True, needed: partner}}).allocation.replicas
    assert f"--{switch}" in replica.argv
    (replica,) = _plan({"engine_args": {switch: False}}).allocation.replicas
    assert f"--no-{switch}" in replica.argv
