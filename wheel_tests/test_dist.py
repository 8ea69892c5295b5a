"""build: the artifacts in dist/ are what we mean to publish (runs in the workspace venv, reads files only).

Four wheels and four sdists at the lockstep version; each wheel ships only its own subpackages under the empty
``data_designer`` / ``data_designer.slurm`` namespaces, with ``py.typed``; siblings are pinned exactly; only the
top leaf registers the ``slurm`` CLI extension; the extras are exactly :data:`EXTRAS` (the top leaf's ``plot``:
matplotlib; the runtime's ``host``: the host, which the runtime installs without; its ``testing``: pytest); each sdist
carries the sources, README and tests.
"""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Callable
from email.message import Message
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parent.parent
OWN_SUBPACKAGES = {
    "data-designer-slurm-contracts": {"contracts"},
    "data-designer-slurm-planner": {"planner"},
    "data-designer-slurm-runtime": {"runtime"},
    "data-designer-slurm": {"services", "cli"},
}
SIBLINGS: dict[str, set[str]] = {
    "data-designer-slurm-contracts": set(),
    "data-designer-slurm-planner": {"data-designer-slurm-contracts"},
    "data-designer-slurm-runtime": {"data-designer-slurm-contracts", "data-designer-slurm-planner"},
    "data-designer-slurm": {
        "data-designer-slurm-contracts",
        "data-designer-slurm-planner",
        "data-designer-slurm-runtime",
    },
}
NEEDS_HOST = {"data-designer-slurm": None, "data-designer-slurm-runtime": "host"}
"""Distributions requiring the host -> the extra that does (None: unconditionally)."""
EXTRAS: dict[str, dict[str, set[str]]] = {
    "data-designer-slurm": {"plot": {"matplotlib"}},
    "data-designer-slurm-runtime": {"host": {"data-designer"}, "testing": {"pytest"}},
}
"""Each distribution's extras -> the distributions only that extra requires."""
DISTRIBUTIONS = sorted(OWN_SUBPACKAGES)


def _dist_info(name: str, version: str) -> str:
    return f"{name.replace('-', '_')}-{version}.dist-info"


def _wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_dist_holds_exactly_four_wheels_and_four_sdists(dist_dir: Path, version: str) -> None:
    artifacts = sorted(p.name for p in dist_dir.iterdir() if not p.name.startswith("."))
    expected = sorted(
        f"{name.replace('-', '_')}-{version}{suffix}"
        for name in DISTRIBUTIONS
        for suffix in ("-py3-none-any.whl", ".tar.gz")
    )
    assert artifacts == expected


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_wheel_ships_only_its_own_subpackages(name: str, wheel_path: Callable[[str], Path], version: str) -> None:
    names = _wheel_names(wheel_path(name))
    payload = [n for n in names if not n.startswith(_dist_info(name, version) + "/")]
    assert payload
    assert {n.split("/")[2] for n in payload if n.startswith("data_designer/slurm/")} == OWN_SUBPACKAGES[name]
    assert all(n.startswith("data_designer/slurm/") and n.count("/") >= 3 for n in payload), payload
    for subpackage in OWN_SUBPACKAGES[name]:
        assert f"data_designer/slurm/{subpackage}/__init__.py" in names
        assert f"data_designer/slurm/{subpackage}/py.typed" in names


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_namespaces_have_no_init(name: str, wheel_path: Callable[[str], Path]) -> None:
    names = set(_wheel_names(wheel_path(name)))
    assert "data_designer/__init__.py" not in names
    assert "data_designer/slurm/__init__.py" not in names


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_metadata_pins_siblings_exactly(name: str, wheel_metadata: Callable[[str], Message], version: str) -> None:
    metadata = wheel_metadata(name)
    assert metadata["Name"] == name
    assert metadata["Version"] == version
    assert metadata["Requires-Python"] == ">=3.11"
    requirements = [Requirement(value) for value in metadata.get_all("Requires-Dist") or []]
    siblings = {r.name: str(r.specifier) for r in requirements if r.name.startswith("data-designer-slurm")}
    assert siblings == dict.fromkeys(SIBLINGS[name], f"=={version}")
    host = [r for r in requirements if r.name == "data-designer"]
    assert bool(host) == (name in NEEDS_HOST)
    for requirement in host:
        extra = NEEDS_HOST[name]
        assert requirement.marker is None if extra is None else str(requirement.marker) == f'extra == "{extra}"'
    for requirement in host:
        assert requirement.specifier.contains(version.split("+", 1)[0], prereleases=True), requirement


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_extras_are_exactly_the_listed_ones_and_hold_only_their_distributions(
    name: str, wheel_metadata: Callable[[str], Message]
) -> None:
    metadata = wheel_metadata(name)
    extras = EXTRAS.get(name, {})
    assert sorted(metadata.get_all("Provides-Extra") or []) == sorted(extras)
    requirements = [Requirement(value) for value in metadata.get_all("Requires-Dist") or []]
    under = {
        extra: {r.name for r in requirements if r.marker is not None and str(r.marker) == f'extra == "{extra}"'}
        for extra in extras
    }
    assert under == extras
    for requirement in requirements:  # nothing else hides behind a marker; nothing of an extra is unconditional
        assert requirement.marker is None or any(requirement.name in names for names in extras.values()), requirement
        if requirement.marker is None:
            assert not any(requirement.name in names for names in extras.values()), requirement


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_only_the_top_leaf_registers_the_cli_extension(
    name: str, wheel_path: Callable[[str], Path], version: str
) -> None:
    entry_points = f"{_dist_info(name, version)}/entry_points.txt"
    with zipfile.ZipFile(wheel_path(name)) as archive:
        text = archive.read(entry_points).decode("utf-8") if entry_points in archive.namelist() else ""
    if name == "data-designer-slurm":
        assert "[data_designer.cli]" in text
        assert "slurm = data_designer.slurm.cli:command" in text
    else:
        assert text == ""


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_sdist_carries_sources_readme_and_tests(name: str, dist_dir: Path, version: str) -> None:
    stem = f"{name.replace('-', '_')}-{version}"
    with tarfile.open(dist_dir / f"{stem}.tar.gz") as sdist:
        members = {m.name.removeprefix(stem + "/") for m in sdist.getmembers() if m.isfile()}
    assert {"PKG-INFO", "pyproject.toml", "README.md"} <= members
    package = REPO / "packages" / name
    for tree in ("src", "tests"):
        on_disk = {
            p.relative_to(package).as_posix()
            for p in (package / tree).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        }
        assert {m for m in members if m.startswith(tree + "/")} == on_disk, tree
