"""Fixtures shared by the root tests."""

from __future__ import annotations

import importlib.util
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
