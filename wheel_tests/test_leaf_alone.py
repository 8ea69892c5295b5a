"""install_leaf and install_runtime: the lower leaves installed without the ones above (``DDS_LEAF``).

Proves the declared dependency direction with real installs: contracts needs nothing of ours, planner needs only
contracts, the runtime only those two; none of them pulls in the host, typer or a leaf above it
(``DDS_LEAF=contracts``, ``planner`` or ``runtime``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

STACKS = {
    "contracts": ("contracts",),
    "planner": ("contracts", "planner"),
    "runtime": ("contracts", "planner", "runtime"),
}
ALL_LEAVES = ("contracts", "planner", "runtime", "services", "cli")


@pytest.fixture(scope="module")
def leaves() -> tuple[str, ...]:
    leaf = os.environ.get("DDS_LEAF", "")
    if leaf not in STACKS:
        pytest.fail(f"DDS_LEAF must be one of {sorted(STACKS)}, got {leaf!r}")
    return STACKS[leaf]


def test_only_the_stack_is_installed(leaves: tuple[str, ...], version: str) -> None:
    ours = {
        dist.metadata["Name"]: dist.version
        for dist in importlib.metadata.distributions()
        if dist.metadata["Name"].startswith("data-designer")
    }
    assert ours == {f"data-designer-slurm-{leaf}": version for leaf in leaves}


def test_stack_imports_from_the_venv(leaves: tuple[str, ...], site_packages: Path) -> None:
    for leaf in leaves:
        spec = importlib.util.find_spec(f"data_designer.slurm.{leaf}")
        assert spec is not None, leaf
        assert spec.origin is not None
        assert Path(spec.origin).resolve().is_relative_to(site_packages), spec.origin


def test_installed_files_are_the_built_wheels(
    leaves: tuple[str, ...],
    site_packages: Path,
    wheel_record: Callable[[str], Mapping[str, str]],
    file_hash: Callable[[Path], str],
) -> None:
    for leaf in leaves:
        record = wheel_record(f"data-designer-slurm-{leaf}")
        assert any(path.startswith(f"data_designer/slurm/{leaf}/") for path in record)
        for path, digest in record.items():
            if digest:
                assert file_hash(site_packages / path) == digest, path


def test_upper_leaves_are_not_importable(leaves: tuple[str, ...]) -> None:
    for leaf in ALL_LEAVES:
        if leaf not in leaves:
            assert importlib.util.find_spec(f"data_designer.slurm.{leaf}") is None, leaf


@pytest.mark.usefixtures("leaves")
@pytest.mark.parametrize("module", ["data_designer.config", "data_designer.cli", "typer"])
def test_host_and_cli_stack_are_not_importable(module: str) -> None:
    assert importlib.util.find_spec(module) is None
