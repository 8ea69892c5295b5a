"""Profiles: the template profile init writes loads back exactly; YAML, JSON and key order do not matter."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from data_designer.slurm.contracts import InvalidInputError, KeyPath, Profile, format_time_limit
from data_designer.slurm.planner import (
    RESERVED_SBATCH_OPTIONS,
    ProfileTemplate,
    load_profile,
    looks_like_token,
    render_profile,
    sbatch_option_table,
)
from data_designer.slurm.planner._document import _StrictLoader


class _Yaml12Dumper(yaml.SafeDumper):
    """Quotes exactly the strings the planner's YAML 1.2 reader would not read back as strings (e.g. '1e100')."""


_Yaml12Dumper.yaml_implicit_resolvers = {k: list(v) for k, v in _StrictLoader.yaml_implicit_resolvers.items()}


def test_the_default_template_loads_to_the_documented_profile() -> None:
    text = render_profile(ProfileTemplate())
    assert text.startswith("# data-designer-slurm cluster profile.\n")
    profile = load_profile(text, file="p.yaml")
    assert profile.model_dump(mode="json") == {
        "schema_version": 1,
        "default_cluster": "default",
        "clusters": {
            "default": {
                "workspace_root": "/shared/data-designer-slurm",
                "account": None,
                "partitions": {"gpu": "gpu", "cpu": "cpu"},
                "gpus_per_node": "auto",
                "gpu_request": "gres",
                "container_runtime": "none",
                "compute_python": {"interpreter": "/usr/bin/python3", "image": None},
                "default_time_limit": "04:00:00",
                "sbatch_options": [],
                "environment": [],
                "huggingface": {"hf_home": None, "offline": True},
                "workspace_sharing": "private",
            }
        },
    }


def test_the_template_lists_every_reserved_sbatch_option() -> None:
    text = render_profile(ProfileTemplate())
    comment = " ".join(line.strip("# ") for line in text.splitlines() if line.lstrip().startswith("#"))
    for name in RESERVED_SBATCH_OPTIONS:
        assert f"{name}," in comment or f"{name}." in comment, name


def test_a_template_with_every_option_set_round_trips() -> None:
    template = ProfileTemplate(
        cluster="eos",
        workspace_root="/lustre/fs1/my ws",
        account="acct;$(touch x)",
        gpu_partition="batch&gpu",
        cpu_partition='cpu "short"',
        gpus_per_node=8,
        gpu_request="whole_node",
        container_runtime="pyxis",
        python="/opt/venv/bin/python",
        default_time_limit="1-00:00:00",
    )
    profile = load_profile(render_profile(template), file="p.yaml")
    assert profile.default_cluster == "eos"
    cluster = profile.clusters["eos"]
    assert cluster.workspace_root == "/lustre/fs1/my ws"
    assert cluster.account == "acct;$(touch x)"
    assert cluster.partitions.gpu == "batch&gpu"
    assert cluster.partitions.cpu == 'cpu "short"'
    assert cluster.gpus_per_node == 8
    assert cluster.gpu_request == "whole_node"
    assert cluster.container_runtime == "pyxis"
    assert cluster.compute_python.interpreter == "/opt/venv/bin/python"
    assert cluster.default_time_limit == "1-00:00:00"


@pytest.mark.parametrize(
    "char", ["\x85", "\x80", "\x9f", "\u2028", "\u2029", "\ufeff", "\ufffe", "\uffff", "\U0001f600"]
)
def test_printable_characters_yaml_treats_specially_survive_the_template(char: str) -> None:
    account = f"a{char}b"
    profile = load_profile(render_profile(ProfileTemplate(account=account)), file="p.yaml")
    assert profile.clusters["default"].account == account


@pytest.mark.parametrize(
    ("field", "value", "key_path"),
    [
        ("workspace_root", "relative", ("clusters", "default", "workspace_root")),
        ("python", "python3", ("clusters", "default", "compute_python", "interpreter")),
        ("gpus_per_node", 0, ("clusters", "default", "gpus_per_node")),
        ("gpu_request", "all", ("clusters", "default", "gpu_request")),
        ("default_time_limit", "0", ("clusters", "default", "default_time_limit")),
        ("account", "a\nb", ("clusters", "default", "account")),
    ],
)
def test_a_bad_template_value_renders_a_profile_that_fails_on_its_key(
    field: str, value: object, key_path: KeyPath
) -> None:
    overrides: dict[str, Any] = {field: value}
    template = replace(ProfileTemplate(), **overrides)
    with pytest.raises(InvalidInputError) as caught:
        load_profile(render_profile(template), file="p.yaml")
    assert [p.key_path for p in caught.value.problems] == [key_path]


# ---- Hypothesis ------------------------------------------------------------------------------------------------

_PRINTABLE = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=16).filter(
    lambda s: not looks_like_token(s)
)
_NAMES = st.from_regex(r"\A[a-z0-9]([a-z0-9._-]{0,8}[a-z0-9])?\Z", fullmatch=True)
_PATHS = _PRINTABLE.map(lambda s: "/" + s)
_TIME_LIMITS = st.integers(min_value=1, max_value=10**7).map(format_time_limit)

_TEMPLATES = st.builds(
    ProfileTemplate,
    cluster=_NAMES,
    workspace_root=_PATHS,
    account=st.none() | _PRINTABLE,
    gpu_partition=_PRINTABLE,
    cpu_partition=_PRINTABLE,
    gpus_per_node=st.integers(min_value=1, max_value=64) | st.just("auto"),
    gpu_request=st.sampled_from(["gres", "whole_node"]),
    container_runtime=st.sampled_from(["none", "pyxis", "apptainer"]),
    python=_PATHS,
    default_time_limit=_TIME_LIMITS,
)


@settings(max_examples=150)
@given(_TEMPLATES)
def test_any_valid_template_loads_back_with_the_values_given(template: ProfileTemplate) -> None:
    profile = load_profile(render_profile(template), file="p.yaml")
    assert profile.default_cluster == template.cluster
    assert profile.cluster_names() == (template.cluster,)
    cluster = profile.clusters[template.cluster]
    assert cluster.workspace_root == template.workspace_root
    assert cluster.account == template.account
    assert cluster.partitions.gpu == template.gpu_partition
    assert cluster.partitions.cpu == template.cpu_partition
    assert cluster.gpus_per_node == template.gpus_per_node
    assert cluster.gpu_request == template.gpu_request
    assert cluster.container_runtime == template.container_runtime
    assert cluster.compute_python.interpreter == template.python
    assert cluster.default_time_limit == template.default_time_limit


# Canonical spellings of accepted options load back unchanged.
_OPTIONS = st.sampled_from(
    sorted(
        f"--{spec.name}=x" if spec.argument == "required" else f"--{spec.name}"
        for spec in sbatch_option_table().values()
        if spec.name not in RESERVED_SBATCH_OPTIONS
    )
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
        "default_time_limit": _TIME_LIMITS,
        "sbatch_options": st.lists(_OPTIONS, max_size=3),
        "environment": st.lists(st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,8}\Z", fullmatch=True), max_size=3),
        "huggingface": st.fixed_dictionaries({}, optional={"hf_home": _PATHS, "offline": st.booleans()}),
    },
)


@st.composite
def _profile_data(draw: st.DrawFn) -> dict[str, Any]:
    clusters = draw(st.dictionaries(_NAMES, _CLUSTERS, min_size=1, max_size=3))
    data: dict[str, Any] = {"schema_version": 1, "clusters": clusters}
    if draw(st.booleans()):
        data["default_cluster"] = draw(st.sampled_from(sorted(clusters)))
    return data


def _reordered(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _reordered(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_reordered(v, rng) for v in value]
    return value


@settings(max_examples=100)
@given(_profile_data(), st.randoms(use_true_random=False))
def test_yaml_json_and_key_order_give_equal_profiles(data: dict[str, Any], rng: random.Random) -> None:
    expected = Profile.model_validate(data)
    shuffled = _reordered(data, rng)
    texts = [
        (json.dumps(data, indent=2, ensure_ascii=False), "p.json"),
        (json.dumps(shuffled), "p.json"),
        (yaml.dump(data, Dumper=_Yaml12Dumper, allow_unicode=True, sort_keys=False), "p.yaml"),
        (yaml.dump(shuffled, Dumper=_Yaml12Dumper, allow_unicode=True, sort_keys=True), "p.yaml"),
        (yaml.dump(shuffled, Dumper=_Yaml12Dumper, default_flow_style=True), "p.yml"),
    ]
    for text, file in texts:
        assert load_profile(text, file=file) == expected, text
