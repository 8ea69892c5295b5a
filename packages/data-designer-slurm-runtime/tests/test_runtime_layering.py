"""The runtime's subpackages keep their direction: the client worker never imports the supervisor, and the store
(and the scheduler adapter beneath it) imports neither the worker nor the supervisor nor the status rules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import data_designer.slurm.runtime as runtime

ROOT = Path(runtime.__file__).parent
FORBIDDEN = {
    "worker": ("data_designer.slurm.runtime.supervisor",),
    "store": (
        "data_designer.slurm.runtime.worker",
        "data_designer.slurm.runtime.supervisor",
        "data_designer.slurm.runtime.status",
    ),
    "scheduler": (
        "data_designer.slurm.runtime.worker",
        "data_designer.slurm.runtime.supervisor",
        "data_designer.slurm.runtime.status",
        "data_designer.slurm.runtime.store",
    ),
}


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("subpackage", sorted(FORBIDDEN))
def test_subpackage_imports_keep_their_direction(subpackage: str) -> None:
    files = sorted((ROOT / subpackage).glob("*.py"))
    assert files, subpackage
    offending = [
        f"{path.name} imports {module}"
        for path in files
        for module in sorted(imported_modules(path))
        if module.startswith(FORBIDDEN[subpackage])
    ]
    assert offending == []
