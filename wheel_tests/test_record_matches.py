"""install_extra: ``pip install --pre --find-links dist "data-designer[slurm]==<host>"`` installed OUR wheels.

PyPI also publishes ``data-designer-slurm`` at the host's version; ours carry a local version label
(``+ddslurm``) that PEP 440 sorts higher. Versions can lie, bytes cannot: every file of each built wheel must be
installed with the same sha256 in the installed RECORD and on disk.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

DISTRIBUTIONS = (
    "data-designer-slurm-contracts",
    "data-designer-slurm-planner",
    "data-designer-slurm-runtime",
    "data-designer-slurm",
)
# What pip itself adds to a dist-info directory (not part of the wheel).
PIP_METADATA = {"INSTALLER", "REQUESTED", "direct_url.json"}


def _installed_record(name: str) -> dict[str, str]:
    files = importlib.metadata.distribution(name).files
    assert files, f"{name} has no installed RECORD"
    return {str(file): (f"{file.hash.mode}={file.hash.value}" if file.hash else "") for file in files}


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_installed_version_is_ours(name: str, version: str) -> None:
    assert importlib.metadata.version(name) == version


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_installed_record_matches_built_wheel(
    name: str,
    site_packages: Path,
    wheel_record: Callable[[str], Mapping[str, str]],
    file_hash: Callable[[Path], str],
) -> None:
    built = wheel_record(name)
    installed = _installed_record(name)
    for path, digest in built.items():
        assert path in installed, f"{path} of the built wheel was not installed"
        if digest:
            assert installed[path] == digest, f"{path}: installed RECORD differs from the built wheel"
            assert file_hash(site_packages / path) == digest, f"{path}: file on disk differs from the built wheel"
    extra = {
        path
        for path in installed.keys() - built.keys()
        if "__pycache__" not in path and Path(path).name not in PIP_METADATA
    }
    assert extra == set(), f"installed files that are not in the built wheel: {sorted(extra)}"


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_installed_by_pip(name: str) -> None:
    installer = importlib.metadata.distribution(name).read_text("INSTALLER")
    assert installer is not None
    assert installer.strip() == "pip"


def test_host_is_the_targeted_release(version: str) -> None:
    assert importlib.metadata.version("data-designer") == version.split("+", 1)[0]
