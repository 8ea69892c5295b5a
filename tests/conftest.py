"""Fixtures shared by the root tests."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

FERN = Path(__file__).resolve().parent.parent / "fern"


@pytest.fixture(scope="session")
def check_docs() -> ModuleType:
    """fern/check_docs.py (standard library only): its page parser and the troubleshooting check."""
    name = "fern_check_docs"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FERN / "check_docs.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


VLLM_WHEELS_ENV = "DDSLURM_VLLM_WHEELS"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``vllm_wheels`` need the released vLLM wheels (hundreds of MB each): they belong to
    ``nox -s vllm_parser``, which sets ``DDSLURM_VLLM_WHEELS``. Elsewhere they are deselected (reported as such),
    never skipped: a run that asks for them by setting the variable fails when the wheels are not there."""
    if os.environ.get(VLLM_WHEELS_ENV):
        return
    kept = [item for item in items if item.get_closest_marker("vllm_wheels") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
