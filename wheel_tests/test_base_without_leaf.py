"""install_base, step 1: the host plus contracts, planner and runtime wheels, without the top leaf.

Nothing registers a ``slurm`` command yet: the host must neither list it nor run it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

RunCli = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def test_exactly_the_lower_three_distributions_are_installed(version: str) -> None:
    for name in ("data-designer-slurm-contracts", "data-designer-slurm-planner", "data-designer-slurm-runtime"):
        assert importlib.metadata.version(name) == version
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("data-designer-slurm")
    assert importlib.metadata.version("data-designer") == version.split("+", 1)[0]


@pytest.mark.parametrize("leaf", ["contracts", "planner", "runtime"])
def test_lower_leaves_import_from_the_venv(leaf: str, site_packages: Path) -> None:
    spec = importlib.util.find_spec(f"data_designer.slurm.{leaf}")
    assert spec is not None
    assert spec.origin is not None
    assert Path(spec.origin).resolve().is_relative_to(site_packages)


@pytest.mark.parametrize("leaf", ["services", "cli"])
def test_top_leaf_packages_are_absent(leaf: str) -> None:
    assert importlib.util.find_spec(f"data_designer.slurm.{leaf}") is None


def test_no_cli_extension_is_registered() -> None:
    assert [ep.name for ep in importlib.metadata.entry_points(group="data_designer.cli")] == []


def test_host_help_does_not_list_slurm(run_cli: RunCli, host_commands: Callable[[str], set[str]]) -> None:
    result = run_cli(["--help"])
    assert result.returncode == 0, result.stderr
    assert "slurm" not in host_commands(result.stdout)
    assert "slurm" not in result.stdout.lower()


def test_slurm_command_does_not_exist(run_cli: RunCli) -> None:
    result = run_cli(["slurm", "--help"])
    assert result.returncode == 2, result.stdout + result.stderr
    assert "No such command 'slurm'" in result.stderr
