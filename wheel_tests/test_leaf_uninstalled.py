"""install_base, last step: after ``pip uninstall data-designer-slurm``.

The ``slurm`` command is gone, no file of that distribution is left (not even byte-code caches or empty package
directories), and the three lower distributions it shared the namespace with are intact.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

RunCli = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]
LOWER = ("data-designer-slurm-contracts", "data-designer-slurm-planner", "data-designer-slurm-runtime")


def test_distribution_metadata_is_gone(site_packages: Path) -> None:
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.distribution("data-designer-slurm")
    assert sorted(site_packages.glob("data_designer_slurm-*")) == []


def test_no_file_of_the_wheel_is_left(site_packages: Path, wheel_record: Callable[[str], Mapping[str, str]]) -> None:
    record = wheel_record("data-designer-slurm")
    assert record, "the wheel's RECORD is empty"
    assert [path for path in record if (site_packages / path).exists()] == []


@pytest.mark.parametrize("leaf", ["services", "cli"])
def test_top_leaf_package_directories_are_gone(leaf: str, site_packages: Path) -> None:
    assert not (site_packages / "data_designer" / "slurm" / leaf).exists()


def test_entry_point_is_gone() -> None:
    assert [ep.name for ep in importlib.metadata.entry_points(group="data_designer.cli")] == []


def test_host_help_no_longer_lists_slurm(run_cli: RunCli, host_commands: Callable[[str], set[str]]) -> None:
    result = run_cli(["--help"])
    assert result.returncode == 0, result.stderr
    assert "slurm" not in host_commands(result.stdout)


def test_slurm_command_is_gone(run_cli: RunCli) -> None:
    result = run_cli(["slurm", "--help"])
    assert result.returncode == 2, result.stdout + result.stderr
    assert "No such command 'slurm'" in result.stderr


@pytest.mark.parametrize("name", LOWER)
def test_lower_distributions_are_intact(
    name: str,
    site_packages: Path,
    wheel_record: Callable[[str], Mapping[str, str]],
    file_hash: Callable[[Path], str],
) -> None:
    for path, digest in wheel_record(name).items():
        if digest:
            assert file_hash(site_packages / path) == digest, path
