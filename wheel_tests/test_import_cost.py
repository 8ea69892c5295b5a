"""install_extra: ``--help`` of every ``slurm`` command stays light (style guide: import time is a tested feature).

The commands are discovered from our Click command tree, so new commands are covered without editing this file.
Each ``--help`` runs in a fresh interpreter that records ``sys.modules`` at exit; that list must not contain the
runtime package, the host's config package, pandas, numpy or pyarrow.

The host's own ``main`` imports ``data_designer.config`` (for a constant) on every call, so through the host CLI
the check is relative: our command may not import any part of ``data_designer.config`` beyond what plain
``data-designer --help`` already imports. Run without the host (our command object alone) the check is absolute.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

ImportedModules = Callable[[Sequence[str]], frozenset[str]]

HEAVY = ("data_designer.slurm.runtime", "pandas", "numpy", "pyarrow")
HOST_CONFIG = "data_designer.config"


def _command_paths() -> list[tuple[str, ...]]:
    """Every command path in the ``slurm`` tree, the group itself first, walked with Click's public API."""
    from data_designer.slurm.cli import command

    paths: list[tuple[str, ...]] = []

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        paths.append(path)
        if not hasattr(cmd, "list_commands"):
            return
        context = cmd.context_class(cmd, info_name=path[-1] if path else "slurm")
        for name in cmd.list_commands(context):
            walk(cmd.get_command(context, name), (*path, name))

    walk(command(), ())
    return paths


COMMAND_PATHS = _command_paths()


def _within(modules: Iterable[str], packages: Iterable[str]) -> set[str]:
    prefixes = tuple(packages)
    return {m for m in modules if m in prefixes or m.startswith(tuple(p + "." for p in prefixes))}


def _ids(path: tuple[str, ...]) -> str:
    return " ".join(("slurm", *path))


@pytest.fixture(scope="module")
def host_baseline(host_imports: ImportedModules) -> frozenset[str]:
    """What plain ``data-designer --help`` imports."""
    return host_imports(["--help"])


def test_discovery_finds_the_profile_commands() -> None:
    assert {(), ("profile",), ("profile", "init"), ("profile", "validate")} <= set(COMMAND_PATHS)


def test_host_help_imports_nothing_of_ours(host_baseline: frozenset[str]) -> None:
    assert _within(host_baseline, ["data_designer.slurm"]) == set()
    assert _within(host_baseline, HEAVY) == set()


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=_ids)
def test_help_through_the_host_stays_light(
    path: tuple[str, ...], host_imports: ImportedModules, host_baseline: frozenset[str]
) -> None:
    modules = host_imports(["slurm", *path, "--help"])
    assert "data_designer.slurm.cli" in modules, "our command tree was not even loaded"
    assert _within(modules, HEAVY) == set()
    assert _within(modules, [HOST_CONFIG]) <= _within(host_baseline, [HOST_CONFIG])


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=_ids)
def test_help_of_our_command_alone_stays_light(path: tuple[str, ...], extension_imports: ImportedModules) -> None:
    modules = extension_imports([*path, "--help"])
    assert "data_designer.slurm.cli" in modules
    assert _within(modules, [*HEAVY, HOST_CONFIG]) == set()
