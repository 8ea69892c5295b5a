"""All four distributions installed (install_base after adding the top leaf, and install_extra).

The host discovers ``slurm`` through the ``data_designer.cli`` entry point, the host's own packages still import,
and ``data_designer`` / ``data_designer.slurm`` stay PEP 420 namespaces shared by several distributions.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import subprocess
import types
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

RunCli = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]

HOST_DISTRIBUTIONS = {"data-designer", "data-designer-config", "data-designer-engine"}
OUR_DISTRIBUTIONS = {
    "data-designer-slurm-contracts",
    "data-designer-slurm-planner",
    "data-designer-slurm-runtime",
    "data-designer-slurm",
}


def test_all_four_distributions_are_installed_at_our_version(version: str) -> None:
    assert {name: importlib.metadata.version(name) for name in sorted(OUR_DISTRIBUTIONS)} == dict.fromkeys(
        sorted(OUR_DISTRIBUTIONS), version
    )


def test_the_plain_install_does_not_pull_the_plot_extra() -> None:
    """matplotlib comes only with ``data-designer-slurm[plot]``: neither install session asks for it."""
    assert importlib.util.find_spec("matplotlib") is None


def test_entry_point_registers_slurm() -> None:
    (entry_point,) = importlib.metadata.entry_points(group="data_designer.cli", name="slurm")
    assert entry_point.value == "data_designer.slurm.cli:command"
    assert entry_point.dist is not None
    assert entry_point.dist.metadata["Name"] == "data-designer-slurm"


def test_host_help_lists_slurm(run_cli: RunCli, host_commands: Callable[[str], set[str]]) -> None:
    result = run_cli(["--help"])
    assert result.returncode == 0, result.stderr
    assert "slurm" in host_commands(result.stdout)
    summary = importlib.metadata.metadata("data-designer-slurm")["Summary"]
    assert any("slurm" in line and summary in line for line in result.stdout.splitlines()), result.stdout


def test_slurm_help_runs(run_cli: RunCli) -> None:
    result = run_cli(["slurm", "--help"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Usage: data-designer slurm" in result.stdout
    assert "profile" in result.stdout


def test_host_config_package_still_imports() -> None:
    config = importlib.import_module("data_designer.config")
    assert config.__file__ is not None


@pytest.mark.parametrize("name", ["data_designer", "data_designer.slurm"])
def test_namespaces_stay_namespaces(name: str, site_packages: Path) -> None:
    module = importlib.import_module(name)
    assert isinstance(module, types.ModuleType)
    assert module.__file__ is None
    assert type(module.__path__).__name__ == "_NamespacePath"
    directory = site_packages.joinpath(*name.split("."))
    assert directory in [Path(entry).resolve() for entry in module.__path__]
    assert not (directory / "__init__.py").exists()


def test_data_designer_namespace_spans_host_and_our_distributions(owners: Callable[[str], set[str]]) -> None:
    assert owners("data_designer/") >= HOST_DISTRIBUTIONS | OUR_DISTRIBUTIONS
    assert owners("data_designer/slurm/") == OUR_DISTRIBUTIONS


@pytest.mark.parametrize("leaf", ["contracts", "planner", "runtime", "services", "cli"])
def test_every_leaf_imports_from_the_venv(leaf: str, site_packages: Path) -> None:
    module = importlib.import_module(f"data_designer.slurm.{leaf}")
    assert module.__file__ is not None
    assert Path(module.__file__).resolve().is_relative_to(site_packages)
