"""Pytest plugin for install_leaf: a package's own tests must exercise the INSTALLED wheel, not the source tree.

Loaded with ``-p installed_guard`` when a package's tests run inside a fresh venv. Before collection it requires
the leaf under test (``DDS_LEAF``) to resolve into this venv's site-packages; after the run it fails the session
if any ``data_designer.slurm`` module was imported from anywhere else. With ``DDS_EXPECT_DESELECTED=N`` (a run
with ``-m "not host"``) it also fails unless exactly N tests were deselected, each of them marked ``host``: a
marker expression that deselects more (or everything) cannot pass silently.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from pathlib import Path

import pytest

_SITE = Path(sysconfig.get_path("purelib")).resolve()
_DESELECTED: list[pytest.Item] = []


def _outside_venv() -> list[str]:
    loaded = [(name, getattr(module, "__file__", None)) for name, module in sorted(sys.modules.items())]
    return [
        f"{name} from {file}"
        for name, file in loaded
        if name.startswith("data_designer.slurm.") and file and not Path(file).resolve().is_relative_to(_SITE)
    ]


def pytest_configure(config: pytest.Config) -> None:
    leaf = os.environ.get("DDS_LEAF", "")
    spec = importlib.util.find_spec(f"data_designer.slurm.{leaf}") if leaf else None
    if spec is None or spec.origin is None or not Path(spec.origin).resolve().is_relative_to(_SITE):
        origin = None if spec is None else spec.origin
        raise pytest.UsageError(f"data_designer.slurm.{leaf or '<DDS_LEAF unset>'} must import from {_SITE}: {origin}")


def pytest_deselected(items: list[pytest.Item]) -> None:
    _DESELECTED.extend(items)


def _deselection_problems() -> list[str]:
    expected = os.environ.get("DDS_EXPECT_DESELECTED")
    if expected is None:
        return []
    problems = [f"{item.nodeid} was deselected but is not marked host" for item in _DESELECTED if not _is_host(item)]
    if len(_DESELECTED) != int(expected):
        problems.append(
            f"{len(_DESELECTED)} tests were deselected, expected DDS_EXPECT_DESELECTED={expected} (the tests marked "
            "host); if host tests were added or removed on purpose, update the count in noxfile.py"
        )
    return problems


def _is_host(item: pytest.Item) -> bool:
    return item.get_closest_marker("host") is not None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    leaf = os.environ["DDS_LEAF"]
    problems = _outside_venv() + _deselection_problems()
    if f"data_designer.slurm.{leaf}" not in sys.modules:
        problems.append(f"the tests never imported data_designer.slurm.{leaf}")
    if problems:
        sys.stderr.write("installed_guard: " + "; ".join(problems) + "\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
