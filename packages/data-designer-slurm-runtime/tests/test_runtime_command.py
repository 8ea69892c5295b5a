"""The command runner: argv only, allowlisted environment, a timeout on every call, results as values."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from data_designer.slurm.contracts import InternalError
from data_designer.slurm.runtime.scheduler import CommandResult, SubprocessRunner, allowlisted_environment


def tool(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "bin"
    directory.mkdir()
    tool(directory, "squeue", 'env | sort; for a in "$@"; do echo "arg=$a"; done')
    tool(directory, "sbatch", 'cat; echo "rc-test" >&2; exit 3')
    tool(directory, "scontrol", "exec sleep 5")
    return directory


def runner_for(bin_dir: Path) -> SubprocessRunner:
    parent = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": "/root",
        "SLURM_CONF": "/etc/slurm/slurm.conf",
        "SBATCH_ACCOUNT": "someone-else",
        "SQUEUE_FORMAT": "%all",
        "AWS_SECRET_ACCESS_KEY": "not-for-slurm",
        "TZ": "Europe/Paris",
        "LANG": "de_DE.UTF-8",
    }
    return SubprocessRunner(env=parent)


def test_environment_is_allowlisted_and_forced(bin_dir: Path) -> None:
    result = runner_for(bin_dir).run(["squeue"], timeout_s=10)
    assert result.ok
    env = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line and not line.startswith("arg="))
    assert env["SLURM_CONF"] == "/etc/slurm/slurm.conf"
    assert env["TZ"] == "UTC"
    assert env["LC_ALL"] == "C"
    assert env["LANG"] == "C"
    assert env["SLURM_TIME_FORMAT"] == "standard"
    assert "SBATCH_ACCOUNT" not in env
    assert "SQUEUE_FORMAT" not in env
    assert "AWS_SECRET_ACCESS_KEY" not in env


def test_overrides_win_over_the_parent_environment() -> None:
    runner = SubprocessRunner(env={"SLURM_CONF": "/a", "PATH": "/bin"}, overrides={"SLURM_CONF": "/b", "EXTRA": "x"})
    assert runner.environment["SLURM_CONF"] == "/b"
    assert "EXTRA" not in runner.environment
    assert allowlisted_environment({})["TZ"] == "UTC"


def test_argv_is_never_interpreted_by_a_shell(bin_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    result = runner_for(bin_dir).run(["squeue", f"$(touch {marker})", "a b;c"], timeout_s=10)
    assert f"arg=$(touch {marker})" in result.stdout.splitlines()
    assert "arg=a b;c" in result.stdout.splitlines()
    assert not marker.exists()


def test_stdin_is_fed_and_stderr_and_exit_status_kept(bin_dir: Path) -> None:
    result = runner_for(bin_dir).run(["sbatch", "--parsable"], timeout_s=10, stdin="#!/bin/bash\necho hi\n")
    assert result.stdout == "#!/bin/bash\necho hi\n"
    assert (result.returncode, result.ok, result.timed_out, result.not_found) == (3, False, False, False)
    assert result.stderr == "rc-test\n"
    assert result.describe() == "sbatch exited 3: rc-test"
    assert result.duration_s >= 0


def test_timeout_is_a_value(bin_dir: Path) -> None:
    result = runner_for(bin_dir).run(["scontrol", "show", "config"], timeout_s=0.3)
    assert result.timed_out
    assert result.returncode is None
    assert result.duration_s < 4
    assert "timed out" in result.describe()


def test_missing_command_is_a_value(tmp_path: Path) -> None:
    result = SubprocessRunner(env={"PATH": str(tmp_path)}).run(["sacct"], timeout_s=5)
    assert result == CommandResult(result.argv, None, "", result.stderr, result.duration_s, not_found=True)
    assert "not found" in result.describe()


@pytest.mark.parametrize("argv", [[], ["bash", "-c", "true"], ["/bin/rm", "-rf", "/tmp/x"]])
def test_only_slurm_commands_run(argv: list[str]) -> None:
    with pytest.raises(InternalError) as caught:
        SubprocessRunner(env={}).run(argv, timeout_s=5)
    assert caught.value.info.code == "command_not_allowed"


def test_timeout_must_be_positive(bin_dir: Path) -> None:
    with pytest.raises(InternalError):
        runner_for(bin_dir).run(["squeue"], timeout_s=0)
