"""Profile services: where the profile lives, writing it safely, validating it, choosing a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts import (
    PROFILE_ENV_VAR,
    ConflictError,
    ExitCode,
    InvalidInputError,
    NotFoundError,
    Profile,
    ProfileInitResult,
)
from data_designer.slurm.planner import load_profile, render_profile
from data_designer.slurm.services import (
    ProfileTemplate,
    default_profile_path,
    init_profile,
    load_profile_file,
    resolve_profile_path,
    select_cluster,
    validate_profile,
)

TWO_CLUSTERS = """\
schema_version: 1
{default}
clusters:
  eos:
    workspace_root: /lustre/eos
    partitions: {{gpu: batch, cpu: cpu}}
    gpus_per_node: 8
    compute_python: {{interpreter: /opt/venv/bin/python}}
    sbatch_options: ["--constraint=a100&ib"]
    environment: [HF_TOKEN]
  draco:
    workspace_root: /shared/draco
    account: proj
    partitions: {{gpu: gpu, cpu: cpu}}
    gpu_request: whole_node
    container_runtime: pyxis
    compute_python: {{image: dd-client}}
    default_time_limit: "1-00:00:00"
"""


def two_clusters(tmp_path: Path, default: str | None = None) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(TWO_CLUSTERS.format(default=f"default_cluster: {default}" if default else ""), encoding="utf-8")
    return path


# ---- resolve_profile_path --------------------------------------------------------------------------------------


def test_the_profile_option_wins_over_everything(tmp_path: Path) -> None:
    environ = {PROFILE_ENV_VAR: str(tmp_path / "env.yaml"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert resolve_profile_path(tmp_path / "opt.yaml", environ) == tmp_path / "opt.yaml"
    assert resolve_profile_path(str(tmp_path / "opt.yaml"), environ) == tmp_path / "opt.yaml"


def test_a_relative_profile_option_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_profile_path("sub/p.yaml", {}) == tmp_path / "sub" / "p.yaml"


def test_the_environment_variable_comes_second(tmp_path: Path) -> None:
    environ = {PROFILE_ENV_VAR: str(tmp_path / "env.yaml"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert resolve_profile_path(None, environ) == tmp_path / "env.yaml"
    assert resolve_profile_path("", environ) == tmp_path / "env.yaml"


def test_xdg_config_home_comes_third(tmp_path: Path) -> None:
    environ = {PROFILE_ENV_VAR: "", "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    expected = tmp_path / "xdg" / "data-designer-slurm" / "profile.yaml"
    assert resolve_profile_path(None, environ) == expected
    assert default_profile_path(environ) == expected


def test_home_dot_config_is_the_last_resort(tmp_path: Path) -> None:
    expected = tmp_path / "home" / ".config" / "data-designer-slurm" / "profile.yaml"
    assert resolve_profile_path(None, {"HOME": str(tmp_path / "home")}) == expected
    assert resolve_profile_path(None, {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": ""}) == expected


def test_a_relative_xdg_config_home_is_ignored(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": "relative/config"}
    path = resolve_profile_path(None, environ)
    assert path.is_absolute()
    assert path == tmp_path / "home" / ".config" / "data-designer-slurm" / "profile.yaml"


def test_the_process_environment_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROFILE_ENV_VAR, str(tmp_path / "from-env.yaml"))
    assert resolve_profile_path() == tmp_path / "from-env.yaml"
    monkeypatch.delenv(PROFILE_ENV_VAR)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert resolve_profile_path() == tmp_path / "xdg" / "data-designer-slurm" / "profile.yaml"


# ---- init_profile ----------------------------------------------------------------------------------------------


def test_init_writes_a_profile_that_validates(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "profile.yaml"
    result = init_profile(path, template=ProfileTemplate(cluster="eos", gpus_per_node=4), environ={})
    assert result == ProfileInitResult(file=str(path), cluster="eos", schema_version=1, overwritten=False)
    text = path.read_text(encoding="utf-8")
    assert text == render_profile(ProfileTemplate(cluster="eos", gpus_per_node=4))
    profile = load_profile(text, file=str(path))
    assert profile.default_cluster == "eos"
    assert profile.clusters["eos"].gpus_per_node == 4
    assert validate_profile(path, environ={}).selected_cluster == "eos"


def test_init_uses_the_default_location(tmp_path: Path) -> None:
    result = init_profile(environ={"HOME": str(tmp_path)})
    expected = tmp_path / ".config" / "data-designer-slurm" / "profile.yaml"
    assert result.file == str(expected)
    assert result.cluster == "default"
    assert expected.is_file()


def test_init_never_overwrites_without_force(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_bytes(b"# mine\n")
    with pytest.raises(ConflictError) as caught:
        init_profile(path, environ={})
    assert caught.value.exit_code == ExitCode.CONFLICT
    assert caught.value.info.file == str(path)
    assert "--force" in (caught.value.info.hint or "")
    assert path.read_bytes() == b"# mine\n"


def test_init_overwrites_with_force(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    init_profile(path, environ={})
    result = init_profile(path, template=ProfileTemplate(cluster="eos"), force=True, environ={})
    assert result.overwritten is True
    assert load_profile(path.read_text(encoding="utf-8"), file=str(path)).cluster_names() == ("eos",)


@pytest.mark.parametrize(
    ("field", "value", "option"),
    [
        ("workspace_root", "relative/ws", "--workspace-root"),
        ("workspace_root", "/a\x00b", "--workspace-root"),
        ("gpus_per_node", 0, "--gpus-per-node"),
        ("gpus_per_node", "eight", "--gpus-per-node"),
        ("gpu_request", "all", "--gpu-request"),
        ("container_runtime", "docker", "--container-runtime"),
        ("python", "python3", "--python"),
        ("default_time_limit", "soon", "--time-limit"),
        ("cluster", "Bad Name", "--cluster"),
        ("gpu_partition", "", "--gpu-partition"),
        ("cpu_partition", "a\nb", "--cpu-partition"),
        ("account", "a\tb", "--account"),
        ("account", "nvapi-abcdefghijklmnopqrstuv", "--account"),
    ],
)
def test_a_bad_option_names_the_option_and_writes_nothing(
    tmp_path: Path, field: str, value: str | int, option: str
) -> None:
    path = tmp_path / "profile.yaml"
    overrides: dict[str, Any] = {field: value}
    template = ProfileTemplate(**overrides)
    with pytest.raises(InvalidInputError) as caught:
        init_profile(path, template=template, environ={})
    problems = caught.value.problems
    assert problems
    assert {p.key_path for p in problems} == {(option,)}
    for problem in problems:
        assert problem.file is None
        assert problem.line is None
        assert problem.hint
        assert problem.render().startswith(f"{option}: ")
    assert caught.value.info.operation == "profile.init"
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_bad_option_never_touches_an_existing_file_even_with_force(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_bytes(b"# mine\n")
    with pytest.raises(InvalidInputError):
        init_profile(path, template=ProfileTemplate(workspace_root="rel"), force=True, environ={})
    assert path.read_bytes() == b"# mine\n"


def test_every_bad_option_is_reported_at_once(tmp_path: Path) -> None:
    template = ProfileTemplate(workspace_root="rel", python="py", gpu_request="all")
    with pytest.raises(InvalidInputError) as caught:
        init_profile(tmp_path / "p.yaml", template=template, environ={})
    assert sorted(p.key_path or () for p in caught.value.problems) == [
        ("--gpu-request",),
        ("--python",),
        ("--workspace-root",),
    ]
    assert caught.value.info.message.startswith("3 problems in ")


# ---- validate_profile and select_cluster -----------------------------------------------------------------------


def test_validate_summarises_every_cluster_and_the_selected_one(tmp_path: Path) -> None:
    path = two_clusters(tmp_path, default="eos")
    result = validate_profile(path, environ={})
    assert result.file == str(path)
    assert result.schema_version == 1
    assert result.selected_cluster == "eos"
    assert [(c.name, c.selected) for c in result.clusters] == [("draco", False), ("eos", True)]
    draco, eos = result.clusters
    assert draco.compute_python == "image:dd-client"
    assert draco.account == "proj"
    assert (draco.gpu_request, draco.container_runtime, draco.default_time_limit) == (
        "whole_node",
        "pyxis",
        "1-00:00:00",
    )
    assert draco.gpus_per_node == "auto"
    assert eos.compute_python == "/opt/venv/bin/python"
    assert (eos.gpu_partition, eos.cpu_partition, eos.gpus_per_node) == ("batch", "cpu", 8)
    assert eos.sbatch_options == ("--constraint=a100&ib",)
    assert eos.environment == ("HF_TOKEN",)
    assert eos.account is None


def test_validate_selects_the_named_cluster(tmp_path: Path) -> None:
    path = two_clusters(tmp_path, default="eos")
    result = validate_profile(path, "draco", environ={})
    assert result.selected_cluster == "draco"
    assert [c.name for c in result.clusters if c.selected] == ["draco"]


def test_validate_finds_the_profile_through_the_environment(tmp_path: Path) -> None:
    path = two_clusters(tmp_path, default="draco")
    assert validate_profile(environ={PROFILE_ENV_VAR: str(path)}).file == str(path)


def test_validate_of_a_missing_profile_is_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(NotFoundError) as caught:
        validate_profile(missing, environ={})
    assert caught.value.exit_code == ExitCode.NOT_FOUND
    assert caught.value.info.code == "profile_not_found"
    assert caught.value.info.file == str(missing)
    assert "profile init" in (caught.value.info.hint or "")


def test_validate_of_an_invalid_profile_reports_every_problem_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    text = TWO_CLUSTERS.format(default="").replace("/lustre/eos", "lustre/eos").replace("HF_TOKEN", "hf_token")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidInputError) as caught:
        validate_profile(path, environ={})
    problems = caught.value.problems
    assert [(p.code, p.key_path, p.line) for p in problems] == [
        ("relative_path", ("clusters", "eos", "workspace_root"), 5),
        ("env_var_name", ("clusters", "eos", "environment", 0), 10),
    ]
    assert {p.file for p in problems} == {str(path)}


def test_load_profile_file_returns_the_path_and_the_model(tmp_path: Path) -> None:
    path = two_clusters(tmp_path)
    loaded_path, profile = load_profile_file(path, environ={})
    assert loaded_path == path
    assert isinstance(profile, Profile)
    assert profile.cluster_names() == ("draco", "eos")


def test_an_unknown_cluster_is_not_found(tmp_path: Path) -> None:
    path = two_clusters(tmp_path, default="eos")
    with pytest.raises(NotFoundError) as caught:
        validate_profile(path, "selene", environ={})
    assert caught.value.exit_code == 3
    assert caught.value.info.code == "cluster_not_found"
    assert "selene" in caught.value.info.message
    assert caught.value.info.hint == "use --cluster with one of: draco, eos"


def test_several_clusters_without_a_default_are_ambiguous(tmp_path: Path) -> None:
    path = two_clusters(tmp_path)
    with pytest.raises(InvalidInputError) as caught:
        validate_profile(path, environ={})
    assert caught.value.exit_code == 2
    assert caught.value.info.code == "cluster_ambiguous"
    assert caught.value.info.key_path == ("default_cluster",)
    assert "draco, eos" in (caught.value.info.hint or "")


def test_select_cluster_returns_the_cluster_profile(tmp_path: Path) -> None:
    _, profile = load_profile_file(two_clusters(tmp_path), environ={})
    name, cluster = select_cluster(profile, "draco", file="p.yaml")
    assert name == "draco"
    assert cluster is profile.clusters["draco"]
    with pytest.raises(NotFoundError) as caught:
        select_cluster(profile, "x", file="p.yaml")
    assert caught.value.info.file == "p.yaml"
    assert caught.value.info.operation == "profile.select"
