"""Registered images at plan time: compatibility of what an image holds with its use, and PEP 440 versions."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from data_designer.slurm.contracts import (
    BenchmarkSpec,
    ClusterProfile,
    ExecutionPlan,
    ImageRecord,
    InvalidInputError,
    RunSpec,
    __version__,
    format_key_path,
)
from data_designer.slurm.planner._compile import compile
from data_designer.slurm.planner._images import Installation, benchmark_images, named_images
from data_designer.slurm.planner._inputs import load_run, resolve_config
from data_designer.slurm.planner._versions import same_version, satisfies

CONFIG: dict[str, Any] = {
    "model_configs": [{"alias": "writer", "model": "meta/llama-3.1-8b-instruct", "provider": "local"}],
    "columns": [{"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "x"}],
}
PROFILE: dict[str, Any] = {
    "workspace_root": "/ws",
    "account": "acct",
    "partitions": {"gpu": "gpu", "cpu": "cpu"},
    "gpus_per_node": 4,
    "compute_python": {"interpreter": "/venv/bin/python"},
    "default_time_limit": "04:00:00",
    "container_runtime": "pyxis",
}
OURS = {
    "data-designer-slurm-contracts": __version__,
    "data-designer-slurm-planner": __version__,
    "data-designer-slurm-runtime": __version__,
    "data-designer-slurm": None,
    "data-designer": "1.2.0",
    "vllm": None,
}
INSTALLATION = Installation(version=__version__, data_designer=">=1.0.0rc1,<2")


def _run(**changes: Any) -> dict[str, Any]:
    run: dict[str, Any] = {
        "schema_version": 1,
        "name": "r",
        "data_designer": {"inline": copy.deepcopy(CONFIG)},
        "records": 10,
        "sharding": {"shards": 1},
        "deployments": {"writer": {"engine": "vllm", "model": "meta/llama-3.1-8b-instruct", "image": "serve"}},
    }
    run.update(changes)
    return run


def _serving(versions: dict[str, str | None] | None, python: str | None = "3.12") -> ImageRecord:
    return ImageRecord(
        name="serve", path="/img/serve.sqsh", kind="squashfs", digest="a" * 64, role="serving", python=python,
        versions=versions,
    )  # fmt: skip


def _client(versions: dict[str, str | None], python: str | None = "3.11", role: str = "client") -> ImageRecord:
    return ImageRecord.model_validate(
        {"name": "cli", "path": "/img/cli.sqsh", "kind": "squashfs", "digest": "b" * 64, "role": role,
         "python": python, "versions": versions}
    )  # fmt: skip


def _compile(run: dict[str, Any], images: list[ImageRecord], profile: dict[str, Any] | None = None) -> ExecutionPlan:
    spec = load_run(json.dumps(run), file="run.json")
    cluster = ClusterProfile.model_validate({**PROFILE, **(profile or {})})
    return compile(
        spec, cluster, cluster="c", config=resolve_config(spec), images=images, installation=INSTALLATION
    )  # fmt: skip


def _messages(run: dict[str, Any], images: list[ImageRecord], profile: dict[str, Any] | None = None) -> list[str]:
    with pytest.raises(InvalidInputError) as caught:
        _compile(run, images, profile)
    assert caught.value.exit_code == 2
    return [f"{p.code}@{format_key_path(p.key_path or ())}: {p.message}" for p in caught.value.problems]


def test_a_serving_image_with_a_supported_vllm_resolves_with_its_digest() -> None:
    plan = _compile(_run(), [_serving({"vllm": "0.33.1"})])
    image = plan.allocation.replicas[0].image
    assert image is not None
    assert (image.reference, image.path, image.digest) == ("serve", "/img/serve.sqsh", "a" * 64)
    assert plan.unresolved == ()
    assert plan.warnings == ()


def test_a_serving_image_without_the_engine_or_outside_the_range_is_refused_naming_both_versions() -> None:
    assert _messages(_run(), [_serving({"vllm": "0.31.2"})]) == [
        "image_engine_version@deployments.writer.image: serving image 'serve' (/img/serve.sqsh): holds vllm 0.31.2, "
        "deployment 'writer' needs vllm >=0.32,<0.34"
    ]
    (absent,) = _messages(_run(), [_serving({"vllm": None})])
    assert absent.startswith("image_engine_missing@deployments.writer.image: serving image 'serve'")
    assert "vllm is absent or undetermined in it, deployment 'writer' needs vllm >=0.32,<0.34" in absent
    (missing_key,) = _messages(_run(), [_serving({})])
    assert missing_key.startswith("image_engine_missing@")


def test_under_pyxis_the_launcher_needs_a_python3_in_the_serving_image() -> None:
    old = _messages(_run(), [_serving({"vllm": "0.33.0"}, python="3.6")])
    assert old == [
        "image_python_version@deployments.writer.image: serving image 'serve' (/img/serve.sqsh): holds Python 3.6, "
        "the launcher (pyxis runs it with the image's python3) needs Python 3.8 or later"
    ]
    (unknown,) = _messages(_run(), [_serving({"vllm": "0.33.0"}, python=None)])
    assert "its Python is undetermined" in unknown
    # apptainer runs the launcher outside the image: its Python does not matter.
    plan = _compile(_run(), [_serving({"vllm": "0.33.0"}, python=None)], {"container_runtime": "apptainer"})
    assert plan.allocation.replicas[0].image is not None


def test_a_command_deployment_needs_no_engine_and_an_uninspected_record_is_not_checked() -> None:
    command = {"engine": "command", "model": "m", "argv": ["serve", "{port}"], "image": "serve"}
    plan = _compile(_run(deployments={"writer": command}), [_serving({"vllm": None}, python="3.12")])
    assert plan.allocation.replicas[0].image is not None
    assert _compile(_run(), [_serving(None, python=None)]).allocation.replicas[0].image is not None


def test_a_client_image_must_hold_our_packages_exactly_and_a_compatible_data_designer() -> None:
    run = _run(client={"image": "cli"})
    serve = _serving({"vllm": "0.33.0"})
    plan = _compile(run, [serve, _client(OURS)])
    assert plan.allocation.client.image is not None
    assert plan.allocation.client.image.digest == "b" * 64
    older = {**OURS, "data-designer-slurm-runtime": "0.9.0", "data-designer": "2.0.1"}
    assert _messages(run, [serve, _client(older)]) == [
        "image_package_version@client.image: client image 'cli' (/img/cli.sqsh): holds data-designer-slurm-runtime "
        f"0.9.0, this installation is data-designer-slurm-runtime {__version__}",
        "image_package_version@client.image: client image 'cli' (/img/cli.sqsh): holds data-designer 2.0.1, this "
        "installation needs data-designer >=1.0.0rc1,<2",
    ]
    absent = {**OURS, "data-designer-slurm-planner": None, "data-designer": None}
    found = _messages(run, [serve, _client(absent)])
    assert [m.split(": ", 2)[2] for m in found] == [
        f"data-designer-slurm-planner is absent or undetermined, this installation is data-designer-slurm-planner "
        f"{__version__}",
        "data-designer is absent or undetermined, this installation needs data-designer >=1.0.0rc1,<2",
    ]
    top = {**OURS, "data-designer-slurm": "0.1.0"}
    assert "holds data-designer-slurm 0.1.0" in _messages(run, [serve, _client(top)])[0]
    assert "holds Python 3.10" in _messages(run, [serve, _client(OURS, python="3.10")])[0]


def test_the_compute_image_is_checked_as_a_client_image() -> None:
    profile = {"compute_python": {"image": "cli"}, "container_runtime": "apptainer"}
    serve = _serving({"vllm": "0.33.0"})
    plan = _compile(_run(), [serve, _client(OURS)], profile)
    assert plan.allocation.client.image is not None
    bad = {**OURS, "data-designer-slurm-contracts": "1.0.0"}
    assert [m.split(":")[0] for m in _messages(_run(), [serve, _client(bad)], profile)] == [
        "image_package_version@compute_python.image"
    ]


def test_an_image_used_in_the_other_role_than_registered_is_a_warning() -> None:
    run = _run(client={"image": "cli"})
    plan = _compile(run, [_serving({"vllm": "0.33.0"}), _client(OURS, role="serving")])
    assert [(w.code, w.key_path) for w in plan.warnings] == [("image_role", "client.image")]


def test_the_names_a_run_or_a_benchmark_uses_leave_out_absolute_paths() -> None:
    run = RunSpec.model_validate(_run(client={"image": "/img/x.sif"}))
    profile = ClusterProfile.model_validate({**PROFILE, "compute_python": {"image": "dd"}})
    assert named_images(run, profile) == {"serve", "dd"}
    bench = BenchmarkSpec.model_validate(
        {
            "schema_version": 1,
            "name": "b",
            "base": {"inline": _run()},
            "axes": [{"axis": "image", "alias": "writer", "values": ["a", "/img/b.sqsh"]}],
            "records": {"policy": "fixed", "records": 10},
        }
    )
    assert benchmark_images(bench, run, profile) == {"serve", "dd", "a"}


VERSIONS = [
    "0.9", "1.0.dev1", "1.0a1", "1.0a1.dev2", "1.0b2", "1.0rc1", "1.0.0rc1", "1.0", "1.0.0", "1.0+local.7",
    "1.0.post1", "1.0.post1.dev3", "1.0.1", "1.1", "1.4.5", "1.4.5rc1", "2.0rc1", "2", "2.0.1", "10.0", "1!0.5",
]  # fmt: skip
SPECIFIERS = [
    ">=1.0.0rc1,<2", ">=1.0", ">1.0", "<1.0", "<=1.0", "==1.0", "!=1.0", "==1.0.*", "!=1.*", "~=1.4.2", "~=1.0",
    "==1.0+local.7", ">=1.0a1", "<2.0rc1", ">1.0.post1", ">=0.32,<0.34", "",
]  # fmt: skip


@pytest.mark.parametrize(("version", "specifier"), list(itertools.product(VERSIONS, SPECIFIERS)))
def test_satisfies_agrees_with_packaging(version: str, specifier: str) -> None:
    expected = SpecifierSet(specifier).contains(Version(version), prereleases=True)
    assert satisfies(version, specifier) is expected


def test_what_is_not_a_version_or_a_clause_is_never_satisfied() -> None:
    assert not satisfies("latest", "")
    assert not satisfies("1.0", "=>1.0")
    assert not satisfies("1.0", "~=1")
    assert not satisfies("1.0", ">=1.*")
    assert same_version("1.0.0rc1+x", "1.0rc1+x")
    assert not same_version("1.0+x", "1.0")
    assert not same_version("latest", "1.0")


@pytest.mark.parametrize("module", ["_images", "_versions"])
def test_the_image_modules_are_pure(module: str) -> None:
    import ast
    import importlib

    source = importlib.import_module(f"data_designer.slurm.planner.{module}").__file__
    assert source is not None
    with open(source, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    banned = {"os", "sys", "time", "datetime", "subprocess", "pathlib", "importlib", "socket", "shutil"}
    assert imported & banned == set()
