"""Engine args are checked against the ``vllm serve`` of one release: what plans cleanly is what that release parses.

The defects this guards against were found by feeding our argvs to the real ``vllm serve`` parser: a flag only the
newer release has planned cleanly for the older one; ``true``/``null`` on an option that takes a value, a number on
a switch and a value outside argparse's ``choices`` planned cleanly and stopped vLLM at start; a JSON flag given
whole and in dotted form rendered both, and vLLM dropped the whole one. The last tests hold the checks to an oracle:
a stand-in argparse parser built from the same data, which parses the rendered argv exactly when the check passes.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from data_designer.slurm.contracts import EngineArgValue, InvalidInputError
from data_designer.slurm.planner._vllm import (
    CONTROLLED_FLAGS,
    REQUIRED_WITH,
    check_engine_arg_name,
    check_engine_args,
    known_serve_flags,
    render_engine_args,
    serve_flag_versions,
    serve_flags_version_for,
)

PATH = ("deployments", "llm", "engine_args")
OLD, NEW = serve_flag_versions()
VERSION_HINT = "set 'vllm_version' on the deployment, or use a registered image whose vLLM has it"


def _actions(version: str) -> list[dict[str, Any]]:
    text = resources.files("data_designer.slurm.planner").joinpath("data", "vllm_serve_flags.json").read_text("utf-8")
    actions: list[dict[str, Any]] = json.loads(text)["versions"][version]
    return actions


def _one(args: dict[str, EngineArgValue], version: str | None) -> tuple[str, tuple[str | int, ...], str, str]:
    [problem] = check_engine_args(args, path=PATH, version=version)
    assert problem.key_path is not None
    assert problem.hint is not None
    return problem.code, problem.key_path, problem.message, problem.hint


# -- defect 1: a flag of the newer release only ---------------------------------------------------------------------

NEWER_ONLY = sorted(known_serve_flags(NEW) - known_serve_flags(OLD))


def test_the_newer_release_has_flags_the_older_lacks() -> None:
    assert "--disable-prefix-caching" in NEWER_ONLY
    assert len(NEWER_ONLY) == 55


def test_a_newer_only_flag_is_refused_for_the_older_release_naming_both() -> None:
    code, at, message, hint = _one({"disable-prefix-caching": True}, OLD)
    assert code == "engine_arg_version"
    assert at == (*PATH, "disable-prefix-caching")
    assert f"vllm {OLD} has no option --disable-prefix-caching" in message
    assert f"vllm {NEW} has it" in message
    assert VERSION_HINT in hint


def test_a_newer_only_flag_is_refused_without_a_version() -> None:
    code, at, message, hint = _one({"disable-prefix-caching": True}, None)
    assert code == "engine_arg_version"
    assert at == (*PATH, "disable-prefix-caching")
    assert f"vllm {OLD}" in message
    assert hint == VERSION_HINT


def test_a_newer_only_flag_is_accepted_for_the_newer_release() -> None:
    assert check_engine_args({"disable-prefix-caching": True}, path=PATH, version=NEW) == []
    assert render_engine_args({"disable-prefix-caching": True}, version=NEW) == ("--disable-prefix-caching",)


def test_rendering_checks_the_release_it_is_given() -> None:
    with pytest.raises(InvalidInputError) as caught:
        render_engine_args({"watchdog-config": "{}"})
    assert caught.value.info.code == "engine_arg_version"
    assert render_engine_args({"watchdog-config": "{}"}, version=NEW) == ("--watchdog-config", "{}")


def _valid_value(action: dict[str, Any]) -> EngineArgValue:
    """A value the action takes, as the data describes it."""
    if action["kind"] == "switch":
        return True
    choices = [c for c in action.get("choices", []) if c is not None]
    if choices:
        value: EngineArgValue = choices[0]
        return value
    samples: dict[str, EngineArgValue] = {
        "int": 2,
        "int_with_suffix": "32k",
        "int_with_suffix_or_auto": "auto",
        "float": 0.5,
        "json": '{"a": 1}',
        "json_config": "{}",
    }
    return samples.get(action.get("type", "str"), "x")


def _keys(version: str) -> list[tuple[str, EngineArgValue]]:
    """Every long option of ``version`` the runtime does not control, with a value it takes."""
    out = []
    for action in _actions(version):
        for flag in action["options"]:
            bare = flag[2:]
            controlled = any(f in CONTROLLED_FLAGS for f in (flag, f"--{bare.removeprefix('no-')}"))
            if flag.startswith("--") and not controlled and not set(action["options"]) & set(CONTROLLED_FLAGS):
                out.append((bare, _valid_value(action)))
    return out


@pytest.mark.parametrize("version", [OLD, NEW])
def test_every_option_of_a_release_is_accepted_with_a_value_it_takes(version: str) -> None:
    keys = _keys(version)
    assert len(keys) > 350
    for key, value in keys:
        found = check_engine_args({key: value}, version=version)
        if key in REQUIRED_WITH and value is not False:  # vLLM refuses it alone (validate_parsed_serve_args)
            assert [p.code for p in found] == ["engine_arg_requires"], (key, value)
            continue
        assert found == [], (key, value)


def test_without_a_version_exactly_the_options_of_every_release_pass() -> None:
    for key, value in _keys(NEW):
        codes = [p.code for p in check_engine_args({key: value})]
        if f"--{key}" in known_serve_flags(OLD):
            assert not {"engine_arg_version", "engine_arg_unknown"} & set(codes), key  # a value may not fit 0.32
        else:
            assert codes == ["engine_arg_version"], key


# -- defect 2: a value of the wrong kind ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [OLD, NEW, None])
@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("max-num-seqs", True, ["is true", "--max-num-seqs", "takes an integer", "bare flag"]),
        ("max-model-len", None, ["is null", "--max-model-len", "or 'auto'"]),
        ("enforce-eager", 3, ["is 3", "--enforce-eager", "is a switch and takes no value"]),
        ("enforce-eager", "yes", ["is 'yes'", "switch"]),
        ("max-num-seqs", "lots", ["is 'lots'", "takes an integer"]),
        ("max-num-seqs", 2.5, ["is 2.5", "takes an integer"]),
        ("max-num-seqs", False, ["is false", "no --no-max-num-seqs form"]),
        ("gpu-memory-utilization", "most", ["takes a number"]),
        ("max-num-batched-tokens", "1.5K", ["takes an integer"]),
        ("compilation-config", "[1, 2]", ["takes a JSON object"]),
        ("compilation-config", 3, ["takes a JSON object"]),
        ("override-generation-config", "{temperature: 0}", ["takes JSON"]),
        ("hf-overrides", "{not json}", ["takes text, or a JSON object"]),
        ("cudagraph-capture-sizes", None, ["one or more values, each an integer"]),
        ("cudagraph-capture-sizes", "1,2", ["each an integer"]),
        ("max-num-seqs.x", 1, ["takes no dotted keys"]),
        ("enforce-eager.x", 1, ["takes no dotted keys"]),
    ],
)
def test_a_value_of_the_wrong_kind_is_refused(
    key: str, value: EngineArgValue, words: list[str], version: str | None
) -> None:
    code, at, message, hint = _one({key: value}, version)
    assert code == "engine_arg_kind"
    assert at == (*PATH, key)
    assert f"vllm {version or OLD}" in message
    for word in words:
        assert word in message
    assert hint


def test_the_hint_for_a_switch_says_how_to_turn_it_on_and_off() -> None:
    *_, hint = _one({"enforce-eager": 3}, OLD)
    assert hint == "write 'enforce-eager: true' to turn it on, 'enforce-eager: false' to turn it off"
    *_, hint = _one({"disable-log-stats": 1}, OLD)
    assert hint == "write 'disable-log-stats: true' to turn it on, or remove the key to leave it off"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("enforce-eager", True),
        ("enforce-eager", None),
        ("enforce-eager", False),
        ("disable-log-stats", None),
        ("max-num-seqs", 256),
        ("max-num-seqs", "256"),
        ("max-num-seqs", " 1_000 "),  # Python's int() takes both
        ("max-model-len", "32k"),
        ("max-model-len", "32K"),
        ("max-model-len", "auto"),
        ("max-model-len", -1),
        ("max-num-batched-tokens", "2.5k"),
        ("max-num-active-seqs", ""),  # optional_type: "" and "None" are None
        ("max-num-active-seqs", "None"),
        ("gpu-memory-utilization", 1),
        ("gpu-memory-utilization", "0.9"),
        ("chat-template", 3),  # a number on a text option is rendered as text
        ("chat-template", 2.5),
        ("tokenizer", "-weird"),
        ("seed", -1),
        ("compilation-config", '{"mode": 3, "max_cudagraph_capture_size": 8k}'),
        ("hf-overrides", "plain text"),
        ("hf-overrides", '{"rope_theta": 1e6}'),
        ("allowed-origins", '["https://a"]'),
        ("cudagraph-capture-sizes", 8),
        ("collect-detailed-traces", "all"),
        ("moe-backend", "Anything-Goes"),  # a lambda vLLM's source does not let us mirror: any value
        ("compilation-config.mode", 3),
        ("compilation-config.cudagraph_capture_sizes+", "1,2,4"),
        ("hf-overrides.rope_scaling", None),
        ("kv-transfer-config.kv_connector", "x"),
    ],
)
def test_values_the_release_takes_pass(key: str, value: EngineArgValue) -> None:
    assert check_engine_args({key: value}, version=OLD) == []
    assert check_engine_args({key: value}, version=NEW) == []


def test_a_value_outside_argparse_choices_is_refused_with_the_close_one() -> None:
    code, at, message, hint = _one({"kv-cache-dtype": "fp9"}, OLD)
    assert code == "engine_arg_choice"
    assert at == (*PATH, "kv-cache-dtype")
    assert f"--kv-cache-dtype (vllm {OLD}) takes one of 'auto', 'bfloat16'" in message
    assert "'fp8'" in message
    assert hint == "did you mean 'fp8'?"


def test_the_choices_follow_the_release() -> None:
    # 0.33 allows any string for --kv-cache-dtype (CacheDType | str): argparse takes fp9 and vLLM checks it later.
    assert check_engine_args({"kv-cache-dtype": "fp9"}, version=NEW) == []
    code, _, message, _ = _one({"kv-cache-dtype": "fp9"}, None)
    assert code == "engine_arg_choice"
    assert f"vllm {OLD}" in message


def test_integer_choices_compare_the_converted_value() -> None:
    assert check_engine_args({"max-lora-rank": "16"}, version=OLD) == []
    code, _, message, hint = _one({"max-lora-rank": 7}, OLD)
    assert code == "engine_arg_choice"
    assert "takes one of 1, 8, 16" in message
    assert hint == "write one of the values listed"


def test_a_nullable_choice_says_an_empty_value_means_none() -> None:
    assert check_engine_args({"collect-detailed-traces": ""}, version=OLD) == []
    _, _, message, _ = _one({"collect-detailed-traces": "everything"}, OLD)
    assert "(or an empty value for none)" in message


def test_false_needs_a_negation_and_the_0_33_inverse_has_none() -> None:
    assert check_engine_args({"enable-prefix-caching": False}, version=NEW) == []
    code, _, message, hint = _one({"disable-prefix-caching": False}, NEW)
    assert code == "engine_arg_no_negation"
    assert "--no-disable-prefix-caching" in message
    assert hint == "remove the key to leave the switch off"


# -- defect 3: a JSON flag whole and dotted -------------------------------------------------------------------------


@pytest.mark.parametrize("version", [OLD, NEW, None])
def test_a_json_flag_given_whole_and_dotted_is_refused(version: str | None) -> None:
    args: dict[str, EngineArgValue] = {"compilation-config": '{"mode": 3}', "compilation-config.cudagraph_mode": "FULL"}
    code, at, message, hint = _one(args, version)
    assert code == "engine_arg_json_conflict"
    assert at == (*PATH, "compilation-config")
    assert "'compilation-config.cudagraph_mode'" in message
    assert "dropped" in message
    assert hint == (
        "write it once: the whole JSON in 'compilation-config', or only dotted keys (without 'compilation-config')"
    )


def test_only_dotted_keys_or_only_the_whole_json_pass() -> None:
    assert check_engine_args({"compilation-config.mode": 3, "compilation-config.backend": "inductor"}) == []
    assert check_engine_args({"compilation-config": '{"mode": 3}', "attention-config.backend": "x"}) == []


def test_dotted_keys_of_an_option_without_fields_are_refused_once() -> None:
    found = check_engine_args({"max-num-seqs": 1, "max-num-seqs.x": 2}, version=OLD)
    assert [(p.code, p.key_path) for p in found] == [("engine_arg_kind", ("engine_args", "max-num-seqs.x"))]


# -- the fields of a JSON config ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [OLD, NEW, None])
@pytest.mark.parametrize(
    ("key", "value", "field", "hint"),
    [
        ("compilation-config.cudagraph_mod", "FULL", "cudagraph_mod", "did you mean 'cudagraph_mode'?"),
        (
            "compilation-config",
            '{"mode": 3, "cudagraph-mode": "FULL"}',
            "cudagraph-mode",
            "did you mean 'cudagraph_mode'?",
        ),
        ("kv-transfer-config.kv-connector", "x", "kv-connector", "did you mean 'kv_connector'?"),
        ("compilation-config.zzz+", "1", "zzz", "its fields are "),
    ],
)
def test_a_config_key_that_is_no_field_is_refused(
    key: str, value: EngineArgValue, field: str, hint: str, version: str | None
) -> None:
    code, at, message, found_hint = _one({key: value}, version)
    assert code == "engine_arg_field"
    assert at == (*PATH, key)
    assert f"has no field {field!r}" in message
    assert f"vllm {version or OLD}" in message
    assert found_hint.startswith(hint)


def test_fields_deeper_than_the_first_and_configs_without_a_field_list_are_not_checked() -> None:
    assert check_engine_args({"compilation-config.pass_config.anything": 1}) == []
    assert check_engine_args({"compilation-config.cudagraph_capture_sizes+": "1,2"}) == []
    assert check_engine_args({"pooler-config.anything": 1}) == []  # a before-validator may rename keys


# -- one option under two names -------------------------------------------------------------------------------------


def test_the_0_33_enable_and_disable_forms_are_one_switch() -> None:
    [problem] = check_engine_args({"enable-prefix-caching": True, "disable-prefix-caching": True}, version=NEW)
    assert problem.code == "engine_arg_conflict"
    assert problem.key_path == ("engine_args", "disable-prefix-caching")
    assert problem.hint == "keep one: 'enable-prefix-caching: true' or 'enable-prefix-caching: false'"


def test_two_aliases_of_one_option_conflict() -> None:
    [problem] = check_engine_args({"gpu-memory-utilization": 0.9, "device-memory-utilization": 0.8})
    assert problem.code == "engine_arg_conflict"
    assert problem.key_path == ("engine_args", "device-memory-utilization")
    assert problem.hint == "keep one: 'gpu-memory-utilization'"


# -- names and versions ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "code"),
    [
        ("max-num-seqs", None),
        ("enforce-eager", None),
        ("port", "engine_arg_controlled"),
        ("max-num-seqz", "engine_arg_unknown"),
    ],
)
def test_a_name_alone_is_checked_whatever_its_value(key: str, code: str | None) -> None:
    problem = check_engine_arg_name(key, path=("axes", 0, "arg"))
    assert (problem.code if problem else None) == code
    if problem is not None:
        assert problem.key_path == ("axes", 0, "arg")


def test_a_name_alone_is_checked_against_a_release() -> None:
    assert check_engine_arg_name("disable-prefix-caching", version=NEW) is None
    problem = check_engine_arg_name("disable-prefix-caching", version=OLD)
    assert problem is not None
    assert problem.code == "engine_arg_version"


def test_the_O_shorthand_points_to_optimization_level() -> None:
    *_, hint = _one({"O": 3}, None)
    assert hint == "write 'optimization-level: N' (-O is vLLM's shorthand for it)"
    assert check_engine_args({"optimization-level": 3}) == []


@pytest.mark.parametrize(
    ("installed", "key"),
    [
        ("0.32.0", "0.32.0"),
        ("0.32.4", "0.32.0"),
        ("0.33.0", "0.33.0"),
        ("0.33.1+cu129", "0.33.0"),
        ("0.33.2.post1", "0.33.0"),
        ("0.34.0", None),
        ("0.31.9", None),
        ("0.33.0rc1", None),
        ("0.33.1.dev3", None),
        ("1!0.33.0", None),
        ("vllm", None),
        ("", None),
    ],
)
def test_an_installed_version_maps_to_the_data_of_its_minor_line(installed: str, key: str | None) -> None:
    assert serve_flags_version_for(installed) == key


def test_an_unknown_data_key_is_an_error() -> None:
    with pytest.raises(InvalidInputError) as caught:
        check_engine_args({}, version="0.33.1")
    assert caught.value.info.code == "unknown_vllm_version"


# -- the oracle: argparse built from the same data parses exactly what passes --------------------------------------


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's exit, as an exception
        raise _Refused(message)


class _Switch(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, True)


def _human_int(value: str) -> int:
    # vllm/utils/argparse_utils.py human_readable_int, as the oracle's own copy
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        decimal = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
    return int(value)


def _json_object(value: str, fields: list[str] | None) -> dict[str, Any]:
    parts = re.split(r'("(?:[^"\\]|\\.)*")', value)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b", lambda m: str(_human_int(m.group())), parts[i])
    loaded = json.loads("".join(parts))
    if not isinstance(loaded, dict):
        raise ValueError("not an object")
    if fields is not None and not set(loaded) <= set(fields):
        raise ValueError("extra fields")  # pydantic: extra="forbid"
    return loaded


def _or_json(value: str) -> Any:
    return json.loads(value) if re.match(r"(?s)^\s*{.*}\s*$", value) else value


_CONVERTERS: dict[str, Any] = {
    "int": int,
    "int_with_suffix": _human_int,
    "int_with_suffix_or_auto": lambda v: -1 if v.strip() == "-1" or v.strip().lower() == "auto" else _human_int(v),
    "float": float,
    "str": str,
    "any": str,
    "json": json.loads,
    "json_config": None,  # per option: its fields
    "str_or_json": _or_json,
}


def _oracle(version: str) -> _Parser:
    parser = _Parser(add_help=False, allow_abbrev=False)
    for action in _actions(version):
        options = action["options"]
        if action["kind"] == "switch":
            parser.add_argument(*options, action=_Switch)
            continue
        convert = _CONVERTERS[action.get("type", "str")]
        if action.get("type") == "json_config":
            convert = (lambda fields: lambda v: _json_object(v, fields))(action.get("fields"))
        if action.get("nullable"):
            convert = (lambda f: lambda v: None if v in {"", "None"} else f(v))(convert)
        nargs = {"optional_value": "?", "multi_value": action.get("nargs")}.get(action["kind"])
        choices = action.get("choices")
        parser.add_argument(*options, type=convert, nargs=nargs, choices=choices, const=True if nargs == "?" else None)
    return parser


_ORACLES = {version: _oracle(version) for version in (OLD, NEW)}
_SINGLE_KEYS = sorted({key for version in (OLD, NEW) for key, _ in _keys(version)})
_TEXT = st.text(alphabet='0123456789.kKM-+ {}[]":,auto_None', max_size=12)
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**20), 2**20),
    st.floats(allow_nan=False, allow_infinity=False),
    _TEXT,
    st.sampled_from(["", "None", "auto", "fp8", "fp9", "32k", "1.5K", "{}", '{"a": 1}', "[1]", "all"]),
)


@settings(max_examples=400)
@given(st.sampled_from(_SINGLE_KEYS), _VALUES, st.sampled_from([OLD, NEW]))
def test_an_arg_passes_exactly_when_argparse_parses_what_it_renders(key: str, value: Any, version: str) -> None:
    # argparse drops a value that is exactly "--" (and then stores no value at all): not a value to compare on
    assume(value != "--")
    args = {key: value}
    # The oracle is vLLM's parser alone: a switch it parses but validate_parsed_serve_args refuses alone is not its.
    problems = [p for p in check_engine_args(args, version=version) if p.code != "engine_arg_requires"]
    if any(p.code == "engine_arg_version" or p.code == "engine_arg_unknown" for p in problems):
        assert f"--{key}" not in known_serve_flags(version)
        return
    argv = list(_render_unchecked(args))
    try:
        _ORACLES[version].parse_args(argv)
        parsed = True
    except (_Refused, ValueError, TypeError):
        parsed = False
    assert parsed == (problems == []), (argv, problems)


def _render_unchecked(args: dict[str, EngineArgValue]) -> tuple[str, ...]:
    """What render_engine_args writes, for args it would refuse as well (the oracle decides)."""
    [(key, value)] = args.items()
    if value is None or value is True:
        return (f"--{key}",)
    if value is False:
        return (f"--no-{key}",)
    text = repr(value) if isinstance(value, float) else str(value)
    return (f"--{key}={text}",) if text.startswith("-") else (f"--{key}", text)


def test_the_oracle_renders_as_the_planner_does() -> None:
    args: dict[str, EngineArgValue] = {"max-num-seqs": 8, "seed": -1, "gpu-memory-utilization": 0.1 + 0.2}
    assert render_engine_args(args) == tuple(w for k in sorted(args) for w in _render_unchecked({k: args[k]}))


@given(st.dictionaries(st.sampled_from([*_SINGLE_KEYS[:60], "port", "x.y", "compilation-config.mode"]), _VALUES))
def test_checking_never_raises_and_ignores_the_authored_order(args: dict[str, Any]) -> None:
    found = check_engine_args(args)
    items = list(args.items())
    random.Random(len(items)).shuffle(items)
    assert check_engine_args(dict(items)) == found
    keys = [p.key_path[-1] for p in found if p.key_path]
    assert set(keys) <= set(args)
