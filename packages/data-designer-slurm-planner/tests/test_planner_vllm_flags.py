"""vLLM flags: what the planner renders or reserves exists in every supported vLLM; engine args are checked and
rendered deterministically.

The flag lists were extracted from the released wheels by ``scripts/extract-vllm-flags`` (vLLM cannot run here).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from importlib import resources
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from data_designer.slurm.contracts import EngineArgValue, InvalidInputError
from data_designer.slurm.planner._vllm import (
    CONTROLLED_FLAGS,
    MULTI_NODE_FLAGS,
    RENDERED_FLAGS,
    SUPPORTED_VLLM,
    check_engine_args,
    is_supported_vllm_version,
    known_serve_flags,
    render_engine_args,
    serve_flag_versions,
)


def _data() -> dict[str, Any]:
    text = resources.files("data_designer.slurm.planner").joinpath("data", "vllm_serve_flags.json").read_text("utf-8")
    data = json.loads(text)
    assert isinstance(data, dict)
    return data


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


VERSIONS = serve_flag_versions()


# -- the required check: every flag we render or reserve exists in every supported vLLM --------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("flag", sorted({*CONTROLLED_FLAGS, *RENDERED_FLAGS, *MULTI_NODE_FLAGS}))
def test_flag_exists_in_every_supported_vllm(flag: str, version: str) -> None:
    assert flag in known_serve_flags(version), f"vllm {version} 'vllm serve' has no {flag}"


def test_rendered_and_multi_node_flags_are_controlled() -> None:
    assert set(RENDERED_FLAGS) <= set(CONTROLLED_FLAGS)
    assert set(MULTI_NODE_FLAGS) <= set(CONTROLLED_FLAGS)


def test_every_controlled_flag_says_why() -> None:
    assert all(reason.strip() for reason in CONTROLLED_FLAGS.values())


def test_data_covers_each_supported_minor_line_once() -> None:
    bounds = re.fullmatch(r">=([\d.]+),<([\d.]+)", SUPPORTED_VLLM)
    assert bounds is not None
    low, high = (_release(v) for v in bounds.groups())
    assert len(low) == len(high) == 2, "the range is written as >=X.A,<X.B"
    assert low[0] == high[0], "the range is written as >=X.A,<X.B"
    lines = [(low[0], minor) for minor in range(low[1], high[1])]
    assert sorted(_release(v)[:2] for v in VERSIONS) == lines
    assert all(is_supported_vllm_version(v) for v in VERSIONS)


def test_data_file_records_its_origin() -> None:
    data = _data()
    origins = data["origin"]
    assert [o["version"] for o in origins] == list(VERSIONS) == list(data["versions"])
    for origin in origins:
        assert origin["package"] == "vllm"
        assert origin["extracted_by"] == "scripts/extract-vllm-flags"
        assert origin["wheel"].startswith(f"vllm-{origin['version']}-")
        assert origin["wheel"].endswith(".whl")
        assert re.fullmatch(r"[0-9a-f]{64}", origin["sha256"])
        assert "vllm/engine/arg_utils.py" in origin["files"]
        assert "vllm/entrypoints/cli/serve.py" in origin["files"]


INVENTORY = {
    # Option strings per version (count, sha256 of the sorted strings joined by newlines), as extracted when the
    # data only listed strings: a new extraction must not gain or lose one.
    "0.32.0": (430, "dff5724939839c77a13531b96b1ad46ed19f5ac2fea025d5727e04869eeb8b74"),
    "0.33.0": (485, "cb008ba85a5cfbb3734f22a65c7440ba7a8509ce1483a2dbcd5545da4edde748"),
}


def _strings(version: str) -> list[str]:
    return [flag for action in _data()["versions"][version] for flag in action["options"]]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_inventory_of_option_strings_is_exact(version: str) -> None:
    strings = _strings(version)
    count, digest = INVENTORY[version]
    assert len(strings) == len(set(strings)) == count, "every option string is in exactly one action"
    assert hashlib.sha256("\n".join(sorted(strings)).encode()).hexdigest() == digest
    assert known_serve_flags(version) == frozenset(strings)


def test_the_newer_release_only_adds_options() -> None:
    older, newer = (set(_strings(v)) for v in VERSIONS)
    assert older < newer
    assert len(newer - older) == 55
    assert {"--disable-prefix-caching", "--watchdog-config", "--reasoning-effort-map"} <= newer - older


def test_actions_are_sorted_and_their_fields_fit_their_kind() -> None:
    data = _data()
    assert data["schema_version"] == 2
    for version, actions in data["versions"].items():
        firsts = [a["options"][0] for a in actions]
        assert firsts == sorted(firsts), version
        for action in actions:
            assert all(re.fullmatch(r"--?[a-z0-9][a-z0-9-]*", f) for f in action["options"]), action
            if action["kind"] == "switch":
                assert not {"type", "nargs", "choices", "nullable", "dotted"} & set(action), action
                assert set(action.get("negative", [])) <= set(action["options"][1:]), action
            elif action["kind"] == "unknown":
                assert action["why"], action
            else:
                assert "type" in action, action
                assert "negative" not in action, action
                assert ("nargs" in action) == (action["kind"] == "multi_value"), action
            if action.get("dotted"):
                assert action["type"] in {"json", "json_config", "str_or_json"}, action
            if "fields" in action:
                assert action["type"] == "json_config", action
                assert action["fields"] == sorted(set(action["fields"])), action
            if "choices" in action:
                assert action.get("type") != "any", action
                assert "choices_unchecked" not in action, action
                assert (None in action["choices"]) == action.get("nullable", False), action


def _action(version: str, flag: str) -> dict[str, Any]:
    return next(a for a in _data()["versions"][version] if flag in a["options"])


@pytest.mark.parametrize("version", VERSIONS)
def test_landmark_options_take_what_the_vllm_source_says(version: str) -> None:
    # Read off vllm/engine/arg_utils.py (_compute_kwargs) and the config dataclasses of both releases.
    assert _action(version, "--max-num-seqs") == {"options": ["--max-num-seqs"], "kind": "value", "type": "int"}
    assert _action(version, "--enforce-eager") == {
        "options": ["--enforce-eager", "--no-enforce-eager"],
        "kind": "switch",
        "negative": ["--no-enforce-eager"],
    }
    assert _action(version, "--disable-log-stats") == {"options": ["--disable-log-stats"], "kind": "switch"}
    assert _action(version, "-tp")["options"] == ["--tensor-parallel-size", "-tp"]
    assert _action(version, "--max-model-len")["type"] == "int_with_suffix_or_auto"
    assert _action(version, "--max-num-batched-tokens")["type"] == "int_with_suffix"
    assert _action(version, "--gpu-memory-utilization")["options"] == [
        "--gpu-memory-utilization",
        "--device-memory-utilization",
    ]
    assert _action(version, "--gpu-memory-utilization")["type"] == "float"
    compilation = _action(version, "--compilation-config")
    assert compilation["options"] == ["--compilation-config", "-cc"]
    assert (compilation["type"], compilation["dotted"]) == ("json_config", True)
    assert {"mode", "cudagraph_mode", "pass_config", "backend"} <= set(compilation["fields"])
    assert "compilation_time" not in compilation["fields"]  # field(init=False): the constructor refuses it
    assert "fields" not in _action(version, "--pooler-config")  # a before-validator rewrites its keys
    assert _action(version, "--hf-overrides")["type"] == "str_or_json"
    assert _action(version, "--hf-token")["kind"] == "optional_value"
    assert _action(version, "--cudagraph-capture-sizes") == {
        "options": ["--cudagraph-capture-sizes"],
        "kind": "multi_value",
        "nargs": "+",
        "type": "int",
    }
    assert _action(version, "--max-num-active-seqs")["nullable"] is True
    assert _action(version, "--max-lora-rank")["choices"] == [1, 8, 16, 32, 64, 128, 256, 320, 512]
    assert _action(version, "--dtype")["choices"] == ["auto", "bfloat16", "float", "float16", "float32", "half"]
    assert _action(version, "--log-level")["choices"] == ["CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG", "NOTSET"]
    assert "pplx" in _action(version, "--all2all-backend")["choices"]
    assert _action(version, "-h") == {"options": ["-h", "--help"], "kind": "switch"}


def test_kv_cache_dtype_has_choices_in_0_32_only() -> None:
    # 0.32: cache_dtype: CacheDType (a Literal: choices); 0.33: CacheDType | str (a metavar, any text).
    assert "fp8" in _action("0.32.0", "--kv-cache-dtype")["choices"]
    assert _action("0.33.0", "--kv-cache-dtype") == {"options": ["--kv-cache-dtype"], "kind": "value", "type": "str"}


def test_0_33_pairs_enable_with_disable() -> None:
    # FlexibleArgumentParser registers EnableDisableAction for BooleanOptionalAction in 0.33.
    assert _action("0.32.0", "--enable-prefix-caching")["negative"] == ["--no-enable-prefix-caching"]
    assert _action("0.33.0", "--enable-prefix-caching") == {
        "options": ["--enable-prefix-caching", "--no-enable-prefix-caching", "--disable-prefix-caching"],
        "kind": "switch",
        "negative": ["--no-enable-prefix-caching", "--disable-prefix-caching"],
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_no_kind_is_unknown_and_the_unmirrored_converters_are_the_expected_ones(version: str) -> None:
    actions = _data()["versions"][version]
    assert [a for a in actions if a["kind"] == "unknown"] == []
    opaque = {a["options"][0] for a in actions if a.get("type") == "any"}
    expected = {
        "--device-ids",  # a lambda splitting on commas
        "--linear-backend",  # lambda s: s.lower().replace("-", "_"), then choices
        "--moe-backend",
        "--sparse-indexer-topk-backend",
        "--log-config-file",  # DeprecatedLogConfigFileAction
        "--lora-modules",  # LoRAParserAction parses name=path or JSON
    }
    assert opaque == expected | ({"--reasoning-parser"} if version == "0.33.0" else set())
    unchecked = {a["options"][0] for a in actions if a.get("choices_unchecked")}
    assert unchecked == {"--linear-backend", "--moe-backend", "--sparse-indexer-topk-backend", "--mm-processor-device"}


def test_unknown_version_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(InvalidInputError) as caught:
        known_serve_flags("0.1.0")
    assert caught.value.info.hint is not None
    assert VERSIONS[-1] in caught.value.info.hint


def test_no_version_means_every_supported_version() -> None:
    assert known_serve_flags() == frozenset.intersection(*(known_serve_flags(v) for v in VERSIONS))
    assert known_serve_flags() == known_serve_flags(VERSIONS[0])


@pytest.mark.parametrize(
    ("version", "supported"),
    [
        ("0.32.0", True),
        ("0.33.0", True),
        ("0.33.7+cu129", True),
        ("0.32.1.post1", True),
        ("0.31.9", False),
        ("0.34.0", False),
        ("0.33.0rc1", False),
        ("0.34.0.dev0", False),
        ("1.0.0", False),
        ("vllm", False),
    ],
)
def test_supported_version(version: str, supported: bool) -> None:
    assert is_supported_vllm_version(version) is supported


# -- checking engine args -------------------------------------------------------------------------------------------


def test_valid_engine_args_have_no_problems() -> None:
    args: dict[str, EngineArgValue] = {
        "max-num-seqs": 256,
        "gpu-memory-utilization": 0.9,
        "enforce-eager": True,
        "enable-prefix-caching": False,
        "kv-cache-dtype": "fp8",
        "compilation-config.mode": 3,
        "compilation-config.cudagraph_mode": "FULL",
        "hf-overrides": '{"rope_theta": 1e6}',
    }
    assert check_engine_args(args) == []


@pytest.mark.parametrize(
    ("key", "flag", "hint_word"),
    [
        ("tensor-parallel-size", "--tensor-parallel-size", "tensor_parallel"),
        ("tp", "-tp", "tensor_parallel"),
        ("pipeline-parallel-size", "--pipeline-parallel-size", "pipeline_parallel"),
        ("pp", "-pp", "pipeline_parallel"),
        ("data-parallel-size", "--data-parallel-size", "replicas"),
        ("port", "--port", "port"),
        ("host", "--host", "binds"),
        ("api-key", "--api-key", "key"),
        ("served-model-name", "--served-model-name", "alias"),
        ("model", "--model", "'model'"),
        ("hf-token", "--hf-token", "HF_TOKEN"),
        ("no-data-parallel-hybrid-lb", "--data-parallel-hybrid-lb", "replicas"),
        ("--port", "--port", "port"),
        ("tensor_parallel_size", "--tensor-parallel-size", "tensor_parallel"),
    ],
)
def test_controlled_flags_are_rejected_with_the_key_to_use(key: str, flag: str, hint_word: str) -> None:
    [problem] = check_engine_args({key: "1"}, path=("deployments", "llm", "engine_args"))
    assert problem.code == "engine_arg_controlled"
    assert flag in problem.message
    assert problem.key_path == ("deployments", "llm", "engine_args", key)
    assert problem.hint is not None
    assert hint_word in problem.hint


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("max-num-seq", "max-num-seqs"),
        ("gpu-memory-utilisation", "gpu-memory-utilization"),
        ("enforce-eagre", "enforce-eager"),
        ("max_num_seqs", "max-num-seqs"),
        ("--max-num-seqs", "max-num-seqs"),
    ],
)
def test_unknown_flags_are_rejected_with_a_suggestion(key: str, suggestion: str) -> None:
    [problem] = check_engine_args({key: 1})
    assert problem.code == "engine_arg_unknown"
    assert problem.key_path == ("engine_args", key)
    assert problem.hint is not None
    assert repr(suggestion) in problem.hint


def test_unknown_flag_without_a_close_match_gets_a_general_hint() -> None:
    [problem] = check_engine_args({"frobnicate-everything": True})
    assert problem.code == "engine_arg_unknown"
    assert problem.hint is not None
    assert "long option" in problem.hint


def test_a_dotted_key_needs_a_known_flag_before_the_dot() -> None:
    [problem] = check_engine_args({"compilaton-config.mode": 3})
    assert problem.code == "engine_arg_unknown"
    assert problem.hint is not None
    assert "'compilation-config'" in problem.hint


def test_false_needs_a_negation() -> None:
    [problem] = check_engine_args({"disable-log-stats": False})
    assert problem.code == "engine_arg_no_negation"
    assert check_engine_args({"disable-log-stats": True}) == []


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_rejected(value: float) -> None:
    [problem] = check_engine_args({"gpu-memory-utilization": value})
    assert problem.code == "engine_arg_not_finite"


@pytest.mark.parametrize(("first", "second"), [("enforce-eager", "no-enforce-eager")])
def test_a_switch_and_its_negation_conflict(first: str, second: str) -> None:
    [problem] = check_engine_args({first: True, second: True})
    assert problem.code == "engine_arg_conflict"
    assert problem.key_path == ("engine_args", second)


def test_every_problem_is_reported_at_once_in_key_order() -> None:
    problems = check_engine_args({"port": 1, "max-num-seq": 2, "tp": 2, "enforce-eager": True})
    assert [(p.key_path, p.code) for p in problems] == [
        (("engine_args", "max-num-seq"), "engine_arg_unknown"),
        (("engine_args", "port"), "engine_arg_controlled"),
        (("engine_args", "tp"), "engine_arg_controlled"),
    ]


# -- rendering ------------------------------------------------------------------------------------------------------


def test_rendering_follows_the_value_types() -> None:
    args: dict[str, EngineArgValue] = {
        "max-num-seqs": 256,
        "gpu-memory-utilization": 0.9,
        "enforce-eager": True,
        "enable-prefix-caching": False,
        "trust-remote-code": None,
        "kv-cache-dtype": "fp8",
        "seed": -1,
        "chat-template": "",
    }
    assert render_engine_args(args) == (
        "--chat-template",
        "",
        "--no-enable-prefix-caching",
        "--enforce-eager",
        "--gpu-memory-utilization",
        "0.9",
        "--kv-cache-dtype",
        "fp8",
        "--max-num-seqs",
        "256",
        "--seed=-1",
        "--trust-remote-code",
    )


def test_json_values_stay_one_argv_element() -> None:
    config = '{"mode": 3, "cudagraph_capture_sizes": [1, 2, 4], "backend": "a b --port 1"}'
    argv = render_engine_args({"compilation-config": config, "hf-overrides": '{"rope_scaling": null}'})
    assert argv == ("--compilation-config", config, "--hf-overrides", '{"rope_scaling": null}')


def test_dotted_keys_render_as_one_element_with_json_words() -> None:
    args: dict[str, EngineArgValue] = {
        "compilation-config.mode": 3,
        "compilation-config.cudagraph_copy_inputs": False,
        "compilation-config.backend": None,
        "compilation-config.cudagraph_capture_sizes+": "1,2,4",
        "hf-overrides.rope_theta": -1.5,
    }
    assert check_engine_args(args) == []
    assert render_engine_args(args) == (
        "--compilation-config.backend=null",
        "--compilation-config.cudagraph_capture_sizes+=1,2,4",
        "--compilation-config.cudagraph_copy_inputs=false",
        "--compilation-config.mode=3",
        "--hf-overrides.rope_theta=-1.5",
    )


def test_floats_render_in_shortest_round_trip_form() -> None:
    argv = render_engine_args({"gpu-memory-utilization": 0.1 + 0.2, "mm-processor-cache-gb": 1e-05})
    assert argv == ("--gpu-memory-utilization", "0.30000000000000004", "--mm-processor-cache-gb", "1e-05")
    assert float(argv[1]) == 0.1 + 0.2


def test_rendering_raises_one_error_with_every_problem() -> None:
    with pytest.raises(InvalidInputError) as caught:
        render_engine_args({"port": 1, "max-num-seq": 2})
    assert [p.code for p in caught.value.problems] == ["engine_arg_unknown", "engine_arg_controlled"]


_JSON_OBJECTS = st.dictionaries(
    st.sampled_from(["mode", "backend", "cache_dir"]), st.integers() | st.text(max_size=5), max_size=3
).map(json.dumps)
_FINITE = st.floats(allow_nan=False, allow_infinity=False)
_VALUED = st.fixed_dictionaries(
    {},
    optional={
        "max-num-seqs": st.integers(-(2**40), 2**40),
        "gpu-memory-utilization": _FINITE | st.integers(-(2**40), 2**40),
        "kv-cache-dtype": st.sampled_from(["auto", "fp8", "bfloat16"]),
        "seed": st.integers(-(2**40), 2**40) | st.integers(-(2**40), 2**40).map(str),
        "compilation-config": _JSON_OBJECTS,
        "chat-template": st.text(max_size=20) | st.integers() | _FINITE,
    },
)
_SWITCHES = st.dictionaries(
    st.sampled_from(["enforce-eager", "trust-remote-code", "enable-prefix-caching"]),
    st.one_of(st.booleans(), st.none()),
    max_size=3,
)


@given(_VALUED, _SWITCHES, st.randoms(use_true_random=False))
def test_rendering_is_deterministic_under_reordering(
    valued: dict[str, Any], switches: dict[str, EngineArgValue], rng: random.Random
) -> None:
    args = {**valued, **switches}
    items = list(args.items())
    rng.shuffle(items)
    argv = render_engine_args(args)
    assert render_engine_args(dict(items)) == argv
    # Values that start with '-' are attached with '=', so every element starting with '--' names a key.
    names = [a[2:].split("=", 1)[0] for a in argv if a.startswith("--")]
    assert [n if n in args else n.removeprefix("no-") for n in names] == sorted(args)
    assert len(argv) == len(switches) + sum(1 if str(v).startswith("-") else 2 for v in valued.values())
