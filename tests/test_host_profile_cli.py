"""``data-designer slurm profile ...`` through the real host CLI, as a user runs it (subprocess, HOME in tmp)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_designer.slurm.contracts import PROFILE_ENV_VAR, ErrorInfo, ProfileInitResult, ProfileValidation
from data_designer.slurm.planner import ProfileTemplate, render_profile

pytestmark = pytest.mark.host

DATA_DESIGNER = Path(sys.executable).parent / "data-designer"
TOKEN = "nvapi-abcdefghijklmnopqrstuv"


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert DATA_DESIGNER.is_file(), f"the host console script {DATA_DESIGNER} is missing: run 'uv sync'"
    env = {k: v for k, v in os.environ.items() if k not in {PROFILE_ENV_VAR, "XDG_CONFIG_HOME"}}
    env.update({"HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1"})
    return subprocess.run(
        [str(DATA_DESIGNER), *args], env=env, cwd=home, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def test_the_host_lists_the_slurm_extension(home: Path) -> None:
    result = run(home, "--help")
    assert result.returncode == 0, result.stderr
    assert "slurm" in result.stdout


def test_slurm_help_lists_the_profile_group(home: Path) -> None:
    result = run(home, "slurm", "--help")
    assert result.returncode == 0, result.stderr
    assert "profile" in result.stdout
    profile_help = run(home, "slurm", "profile", "--help")
    assert profile_help.returncode == 0, profile_help.stderr
    assert "init" in profile_help.stdout
    assert "validate" in profile_help.stdout


def test_init_then_validate_in_the_default_location(home: Path) -> None:
    init = run(home, "slurm", "profile", "init", "--json")
    assert init.returncode == 0, init.stderr
    expected = home / ".config" / "data-designer-slurm" / "profile.yaml"
    assert ProfileInitResult.model_validate_json(init.stdout).file == str(expected)
    validate = run(home, "slurm", "profile", "validate", "--json")
    assert validate.returncode == 0, validate.stderr
    result = ProfileValidation.model_validate_json(validate.stdout)
    assert (result.file, result.selected_cluster) == (str(expected), "default")


def test_init_twice_exits_4_and_keeps_the_file_and_force_replaces_it(home: Path) -> None:
    path = home / "p.yaml"
    first = run(home, "slurm", "profile", "init", "--profile", str(path))
    assert first.returncode == 0, first.stderr
    before = path.read_bytes()

    second = run(home, "slurm", "profile", "init", "--profile", str(path), "--cluster", "other")
    assert second.returncode == 4
    assert second.stderr.splitlines() == [
        f"error: {path}: {str(path)!r} already exists (fix: pass --force to overwrite it)"
    ]
    assert path.read_bytes() == before

    forced = run(home, "slurm", "profile", "init", "--profile", str(path), "--cluster", "other", "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert ProfileInitResult.model_validate_json(forced.stdout).overwritten is True
    assert path.read_bytes() != before
    assert '"other":' in path.read_text(encoding="utf-8")


TEMPLATE = render_profile(ProfileTemplate())

BAD_INPUTS = {
    "unknown key": (
        ("    account: null\n", "    account: null\n    acount: proj\n"),
        "clusters.default.acount",
    ),
    "wrong type": (('cpu: "cpu"', "cpu: 12"), "clusters.default.partitions.cpu"),
    "relative workspace": (('"/shared/data-designer-slurm"', '"relative/ws"'), "clusters.default.workspace_root"),
    "reserved sbatch option": (
        ("sbatch_options: []", 'sbatch_options: ["--time=01:00:00"]'),
        "clusters.default.sbatch_options[0]",
    ),
    "newline in an option": (
        ("sbatch_options: []", 'sbatch_options: ["--constraint=a100\\n--wrap=evil"]'),
        "clusters.default.sbatch_options[0]",
    ),
    "secret literal": (("account: null", f'account: "{TOKEN}"'), "clusters.default.account"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_each_bad_input_exits_2_with_one_line_naming_the_key(home: Path, case: str) -> None:
    (old, new), key = BAD_INPUTS[case]
    assert TEMPLATE.count(old) == 1
    path = home / "p.yaml"
    path.write_text(TEMPLATE.replace(old, new), encoding="utf-8")
    before = path.read_bytes()

    result = run(home, "slurm", "profile", "validate", "--profile", str(path))
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {path}:")
    assert f": {key}: " in line
    assert "(fix: " in line
    assert TOKEN not in line
    assert path.read_bytes() == before


def test_a_bad_input_with_json_is_one_error_info_object(home: Path) -> None:
    path = home / "p.yaml"
    path.write_text(TEMPLATE.replace('"/shared/data-designer-slurm"', '"relative/ws"'), encoding="utf-8")
    result = run(home, "slurm", "profile", "validate", "--profile", str(path), "--json")
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    info = ErrorInfo.model_validate_json(result.stderr)
    assert info.exit_code == 2
    assert [(p.code, p.key_path) for p in info.problems] == [
        ("relative_path", ("clusters", "default", "workspace_root"))
    ]
    assert json.loads(result.stderr)["category"] == "invalid_input"


def test_a_missing_profile_exits_3(home: Path) -> None:
    result = run(home, "slurm", "profile", "validate", "--profile", str(home / "missing.yaml"))
    assert result.returncode == 3
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr
