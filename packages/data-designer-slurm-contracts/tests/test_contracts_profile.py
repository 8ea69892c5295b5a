"""Profile contracts: strict validation of every field, hostile values, frozen models, round-trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from data_designer.slurm.contracts import (
    AbsolutePath,
    ClusterProfile,
    EnvVarName,
    Name,
    PrintableText,
    Profile,
    SbatchOption,
    find_control_character,
    format_time_limit,
    hint_of,
)

CONTROL_CHARACTERS = ["\x00", "\n", "\r", "\t", "\x1b", "\x7f"]
HOSTILE_PRINTABLE = [
    "a100&ib",
    "$(touch x)",
    "`id`",
    "'single'",
    '"double"',
    "a;b",
    "a|b",
    "a b",
    "ünïcødé",
    "*?[]",
    "\\",
]


def cluster_data(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "workspace_root": "/shared/ws",
        "partitions": {"gpu": "gpu", "cpu": "cpu"},
        "compute_python": {"interpreter": "/usr/bin/python3"},
    }
    data.update(overrides)
    return data


def profile_data(**cluster_overrides: Any) -> dict[str, Any]:
    return {"schema_version": 1, "clusters": {"a": cluster_data(**cluster_overrides)}}


def errors_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    with pytest.raises(ValidationError) as caught:
        Profile.model_validate(data)
    return [dict(e) for e in caught.value.errors()]


def error_types(data: dict[str, Any]) -> list[str]:
    return [str(e["type"]) for e in errors_of(data)]


def test_a_minimal_profile_gets_documented_defaults() -> None:
    profile = Profile.model_validate(profile_data())
    cluster = profile.clusters["a"]
    assert profile.default_cluster is None
    assert cluster.account is None
    assert cluster.gpus_per_node == "auto"
    assert cluster.gpu_request == "gres"
    assert cluster.container_runtime == "none"
    assert cluster.default_time_limit == "04:00:00"
    assert cluster.sbatch_options == ()
    assert cluster.environment == ()
    assert cluster.huggingface.hf_home is None
    assert cluster.huggingface.offline is True


def test_lists_become_tuples() -> None:
    profile = Profile.model_validate(profile_data(sbatch_options=["--exclusive"], environment=["HF_TOKEN"]))
    assert profile.clusters["a"].sbatch_options == ("--exclusive",)
    assert profile.clusters["a"].environment == ("HF_TOKEN",)


@pytest.mark.parametrize("path", ["relative/ws", "ws", "./ws", "~/ws", ""])
def test_workspace_root_must_be_absolute(path: str) -> None:
    errors = errors_of(profile_data(workspace_root=path))
    assert [e["type"] for e in errors] == ["relative_path"]
    assert errors[0]["loc"] == ("clusters", "a", "workspace_root")
    assert hint_of(errors[0])


@pytest.mark.parametrize("char", CONTROL_CHARACTERS)
def test_paths_reject_control_characters(char: str) -> None:
    assert error_types(profile_data(workspace_root=f"/shared/w{char}s")) == ["control_character"]
    assert error_types(profile_data(compute_python={"interpreter": f"/bin/py{char}"})) == ["control_character"]


@pytest.mark.parametrize("value", HOSTILE_PRINTABLE)
def test_paths_and_text_accept_any_printable_character(value: str) -> None:
    profile = Profile.model_validate(
        profile_data(
            workspace_root=f"/shared/{value}",
            account=value,
            partitions={"gpu": value, "cpu": value},
            compute_python={"image": value},
        )
    )
    cluster = profile.clusters["a"]
    assert cluster.workspace_root == f"/shared/{value}"
    assert cluster.account == value
    assert cluster.partitions.gpu == value
    assert cluster.compute_python.image == value


@pytest.mark.parametrize("char", CONTROL_CHARACTERS)
@pytest.mark.parametrize("field", ["account", "partitions"])
def test_printable_text_rejects_control_characters(char: str, field: str) -> None:
    value: Any = f"acc{char}ount"
    if field == "partitions":
        value = {"gpu": value, "cpu": "cpu"}
    errors = errors_of(profile_data(**{field: value}))
    assert [e["type"] for e in errors] == ["control_character"]
    assert hint_of(errors[0])


def test_printable_text_rejects_empty_strings() -> None:
    assert error_types(profile_data(account="")) == ["string_too_short"]
    assert error_types(profile_data(partitions={"gpu": "", "cpu": "cpu"})) == ["string_too_short"]


@pytest.mark.parametrize("char", [*CONTROL_CHARACTERS, "\x01", "\x1f"])
def test_find_control_character_finds_nul_newline_tab_and_del(char: str) -> None:
    assert find_control_character(f"ab{char}cd{char}") == char


@pytest.mark.parametrize("value", ["", "plain", *HOSTILE_PRINTABLE])
def test_find_control_character_ignores_printable_text(value: str) -> None:
    assert find_control_character(value) is None


@pytest.mark.parametrize("name", ["HF_TOKEN", "_X", "A1", "NVIDIA_API_KEY", "A"])
def test_environment_accepts_variable_names(name: str) -> None:
    assert TypeAdapter(EnvVarName).validate_python(name) == name
    assert Profile.model_validate(profile_data(environment=[name])).clusters["a"].environment == (name,)


@pytest.mark.parametrize(
    "name", ["hf_token", "1A", "A-B", "", "A B", "sk-abcdef0123456789abcdef", "$HF_TOKEN", "HF_TOKEN\n", "A\x00"]
)
def test_environment_rejects_anything_but_variable_names(name: str) -> None:
    errors = errors_of(profile_data(environment=[name]))
    assert [e["type"] for e in errors] == ["env_var_name"]
    assert errors[0]["loc"] == ("clusters", "a", "environment", 0)
    assert hint_of(errors[0])


def test_environment_items_stay_strict() -> None:
    assert error_types(profile_data(environment=[1])) == ["string_type"]


@pytest.mark.parametrize("char", CONTROL_CHARACTERS)
def test_sbatch_options_reject_control_characters(char: str) -> None:
    errors = errors_of(profile_data(sbatch_options=[f"--constraint=a100{char}--wrap=evil"]))
    assert [e["type"] for e in errors] == ["control_character"]
    assert hint_of(errors[0])


@pytest.mark.parametrize("option", ["-N", "2", "constraint=a100", "--", "--=x", "-", "", " --exclusive", "--time=1"])
def test_sbatch_options_are_any_printable_argv_element(option: str) -> None:
    # What sbatch makes of a list (values in the next item, abbreviations, reserved options) is the planner's.
    assert Profile.model_validate(profile_data(sbatch_options=[option])).clusters["a"].sbatch_options == (option,)


@pytest.mark.parametrize(
    "option",
    [
        "--constraint=a100&ib",
        "--comment=$(touch x)",
        "--comment=`id`",
        "--comment='single' \"double\"",
        "--comment=a;rm -rf /",
        "--exclusive",
        "--gres=gpu:8",
        "--comment=ünïcødé",
        "--timeout=5",
        "--partitioned=x",
    ],
)
def test_sbatch_options_accept_hostile_printable_values_unchanged(option: str) -> None:
    profile = Profile.model_validate(profile_data(sbatch_options=[option]))
    assert profile.clusters["a"].sbatch_options == (option,)
    assert TypeAdapter(SbatchOption).validate_python(option) == option


@pytest.mark.parametrize("gpus", [1, 8, "auto"])
def test_gpus_per_node_is_a_positive_int_or_auto(gpus: int | str) -> None:
    assert Profile.model_validate(profile_data(gpus_per_node=gpus)).clusters["a"].gpus_per_node == gpus


@pytest.mark.parametrize("gpus", [0, -1, "8", "AUTO", "all", True, 1.5, None])
def test_gpus_per_node_rejects_everything_else(gpus: object) -> None:
    errors = errors_of(profile_data(gpus_per_node=gpus))
    assert errors
    assert {e["loc"][:3] for e in errors} == {("clusters", "a", "gpus_per_node")}


@pytest.mark.parametrize(("field", "value"), [("gpu_request", "exclusive"), ("container_runtime", "docker")])
def test_enumerated_fields_reject_unknown_values(field: str, value: str) -> None:
    assert error_types(profile_data(**{field: value})) == ["literal_error"]


def test_compute_python_takes_an_image_instead_of_an_interpreter() -> None:
    profile = Profile.model_validate(profile_data(compute_python={"image": "nvcr.io/nvidia/dd:1.0"}))
    assert profile.clusters["a"].compute_python.image == "nvcr.io/nvidia/dd:1.0"
    assert profile.clusters["a"].compute_python.interpreter is None


@pytest.mark.parametrize("compute_python", [{}, {"interpreter": "/usr/bin/python3", "image": "dd"}])
def test_compute_python_needs_exactly_one_of_interpreter_and_image(compute_python: dict[str, str]) -> None:
    errors = errors_of(profile_data(compute_python=compute_python))
    assert [e["type"] for e in errors] == ["compute_python"]
    assert hint_of(errors[0])


def test_compute_python_interpreter_must_be_absolute() -> None:
    assert error_types(profile_data(compute_python={"interpreter": "python3"})) == ["relative_path"]


def test_huggingface_settings_are_strict() -> None:
    profile = Profile.model_validate(profile_data(huggingface={"hf_home": "/shared/hf", "offline": False}))
    assert profile.clusters["a"].huggingface.hf_home == "/shared/hf"
    assert profile.clusters["a"].huggingface.offline is False
    assert error_types(profile_data(huggingface={"hf_home": "hf"})) == ["relative_path"]
    assert error_types(profile_data(huggingface={"offline": "yes"})) == ["bool_type"]
    assert error_types(profile_data(huggingface={"offline": 1})) == ["bool_type"]


def test_default_cluster_must_name_one_of_the_clusters() -> None:
    data = {"schema_version": 1, "default_cluster": "b", "clusters": {"a": cluster_data(), "c": cluster_data()}}
    errors = errors_of(data)
    assert [e["type"] for e in errors] == ["unknown_cluster"]
    assert "'b'" in errors[0]["msg"]
    assert hint_of(errors[0]) == "use one of: a, c"


def test_clusters_must_not_be_empty() -> None:
    assert error_types({"schema_version": 1, "clusters": {}}) == ["too_short"]


@pytest.mark.parametrize("name", ["a", "gpu-1", "eos.b_2", "0", "a" * 64])
def test_cluster_names_accept_short_identifiers(name: str) -> None:
    assert TypeAdapter(Name).validate_python(name) == name
    profile = Profile.model_validate({"schema_version": 1, "default_cluster": name, "clusters": {name: cluster_data()}})
    assert profile.cluster_names() == (name,)


@pytest.mark.parametrize("name", ["", "A", "-a", "a-", "a b", "a/b", "a" * 65, "a\n", "a\x00b"])
def test_cluster_names_reject_other_text(name: str) -> None:
    errors = errors_of({"schema_version": 1, "clusters": {name: cluster_data()}})
    assert [e["type"] for e in errors] == ["invalid_name"]
    assert hint_of(errors[0])


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_schema_version_must_be_one(version: object) -> None:
    assert error_types({"schema_version": version, "clusters": {"a": cluster_data()}}) == ["literal_error"]


@pytest.mark.parametrize("version", [True, 1.0])
def test_schema_version_rejects_values_that_merely_equal_one(version: object) -> None:
    errors = errors_of({"schema_version": version, "clusters": {"a": cluster_data()}})
    assert [e["loc"] for e in errors] == [("schema_version",)]


def test_schema_version_is_required() -> None:
    assert error_types({"clusters": {"a": cluster_data()}}) == ["missing"]


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        ({**profile_data(), "extra": 1}, ("extra",)),
        (profile_data(acount="x"), ("clusters", "a", "acount")),
        (profile_data(partitions={"gpu": "g", "cpu": "c", "io": "i"}), ("clusters", "a", "partitions", "io")),
        (profile_data(compute_python={"interpreter": "/p", "venv": "/v"}), ("clusters", "a", "compute_python", "venv")),
        (profile_data(huggingface={"token": "HF_TOKEN"}), ("clusters", "a", "huggingface", "token")),
    ],
)
def test_unknown_keys_are_forbidden_everywhere(data: dict[str, Any], loc: tuple[str, ...]) -> None:
    errors = errors_of(data)
    assert [(e["type"], e["loc"]) for e in errors] == [("extra_forbidden", loc)]


def test_models_are_frozen() -> None:
    profile = Profile.model_validate(profile_data())
    with pytest.raises(ValidationError):
        profile.default_cluster = "a"
    with pytest.raises(ValidationError):
        profile.clusters["a"].workspace_root = "/elsewhere"
    with pytest.raises(ValidationError):
        profile.clusters["a"].partitions.gpu = "other"


def test_no_coercion_of_strings_to_numbers_or_booleans() -> None:
    assert error_types(profile_data(account=12)) == ["string_type"]
    assert error_types(profile_data(default_time_limit=240)) == ["string_type"]


def _two_clusters(default: str | None) -> Profile:
    return Profile.model_validate(
        {"schema_version": 1, "default_cluster": default, "clusters": {"b": cluster_data(), "a": cluster_data()}}
    )


def test_resolve_cluster_name_prefers_the_named_cluster() -> None:
    profile = _two_clusters("a")
    assert profile.resolve_cluster_name("b") == "b"
    assert profile.resolve_cluster_name("a") == "a"
    assert profile.resolve_cluster_name("zz") is None


def test_resolve_cluster_name_falls_back_to_default_then_to_the_only_cluster() -> None:
    assert _two_clusters("b").resolve_cluster_name(None) == "b"
    assert _two_clusters(None).resolve_cluster_name(None) is None
    assert Profile.model_validate(profile_data()).resolve_cluster_name(None) == "a"


def test_cluster_names_are_sorted() -> None:
    assert _two_clusters(None).cluster_names() == ("a", "b")


@pytest.mark.parametrize(("value", "kind"), [("/a/b", AbsolutePath), ("x y", PrintableText)])
def test_scalar_types_accept_valid_values(value: str, kind: Any) -> None:
    assert TypeAdapter(kind).validate_python(value) == value


# ---- Hypothesis round-trip -------------------------------------------------------------------------------------

_PRINTABLE = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=20)
_NAMES = st.from_regex(r"\A[a-z0-9]([a-z0-9._-]{0,8}[a-z0-9])?\Z", fullmatch=True)
_ENV_NAMES = st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,10}\Z", fullmatch=True)
_PATHS = _PRINTABLE.map(lambda s: "/" + s)
_OPTION_NAMES = st.from_regex(r"\A[a-z][a-z-]{0,12}\Z", fullmatch=True)
_OPTIONS = st.builds(
    lambda name, value: f"--{name}" if value is None else f"--{name}={value}", _OPTION_NAMES, st.none() | _PRINTABLE
)
_CLUSTERS = st.fixed_dictionaries(
    {
        "workspace_root": _PATHS,
        "partitions": st.fixed_dictionaries({"gpu": _PRINTABLE, "cpu": _PRINTABLE}),
        "compute_python": st.one_of(
            st.fixed_dictionaries({"interpreter": _PATHS}), st.fixed_dictionaries({"image": _PRINTABLE})
        ),
    },
    optional={
        "account": st.none() | _PRINTABLE,
        "gpus_per_node": st.integers(min_value=1, max_value=64) | st.just("auto"),
        "gpu_request": st.sampled_from(["gres", "whole_node"]),
        "container_runtime": st.sampled_from(["none", "pyxis", "apptainer"]),
        "default_time_limit": st.integers(min_value=1, max_value=10**7).map(format_time_limit),
        "sbatch_options": st.lists(_OPTIONS, max_size=4),
        "environment": st.lists(_ENV_NAMES, max_size=4),
        "huggingface": st.fixed_dictionaries({}, optional={"hf_home": st.none() | _PATHS, "offline": st.booleans()}),
    },
)


@st.composite
def _profiles(draw: st.DrawFn) -> Profile:
    clusters = draw(st.dictionaries(_NAMES, _CLUSTERS, min_size=1, max_size=3))
    default = draw(st.none() | st.sampled_from(sorted(clusters)))
    return Profile.model_validate({"schema_version": 1, "default_cluster": default, "clusters": clusters})


@settings(max_examples=150)
@given(_profiles())
def test_profile_round_trips_through_json_mode_dumps(profile: Profile) -> None:
    assert Profile.model_validate(profile.model_dump(mode="json")) == profile
    assert Profile.model_validate_json(profile.model_dump_json()) == profile


@given(_CLUSTERS)
def test_cluster_profile_keeps_every_value_as_written(data: dict[str, Any]) -> None:
    cluster = ClusterProfile.model_validate(data)
    dumped = cluster.model_dump(mode="json")
    for key, value in data.items():
        if isinstance(value, dict):
            assert {k: dumped[key][k] for k in value} == value
        else:
            assert dumped[key] == value
