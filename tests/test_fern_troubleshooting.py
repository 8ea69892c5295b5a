"""The troubleshooting page covers every code and state the product has, and the docs check says which one is not.

fern/check_docs.py runs :func:`check_troubleshooting` in the docs session against the tables printed by the built
wheels; here the same check runs against this workspace's packages, on the real page and on copies of it with one
entry removed or broken.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "fern" / "pages" / "troubleshooting.mdx"


@functools.cache
def _check_docs() -> ModuleType:
    name = "fern_check_docs"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "fern" / "check_docs.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@functools.cache
def _tables() -> dict[str, Any]:
    """The tables as the docs session reads them, from this interpreter's installed packages."""
    tables: dict[str, Any] = _check_docs().product_tables(Path(sys.executable).parent.parent)
    return tables


def _failures(text: str) -> list[str]:
    failures: list[str] = _check_docs().check_troubleshooting(text, _tables())
    return failures


def _without_entry(text: str, heading: str) -> str:
    """The page with the ``###`` entry titled ``heading`` (and its body) removed."""
    pattern = re.compile(rf"^### {re.escape(heading)}\n.*?(?=^##)", re.MULTILINE | re.DOTALL)
    removed, count = pattern.subn("", text)
    assert count == 1, heading
    return removed


def test_the_page_has_one_complete_entry_for_every_code_and_state() -> None:
    assert _failures(PAGE.read_text(encoding="utf-8")) == []


def test_the_tables_are_the_products() -> None:
    from data_designer.slurm.contracts import ERROR_CODES, SHARD_STATES
    from data_designer.slurm.contracts.records import EXIT_CODES

    tables = _tables()
    assert set(tables["error_codes"]) == set(ERROR_CODES)
    assert tables["error_codes"]["unknown_key"] == [2]
    assert tables["error_codes"]["run_not_found"] == [3]
    assert tables["final_statuses"] == {status: [code] for status, code in EXIT_CODES.items()}
    assert list(tables["shard_states"]) == list(SHARD_STATES)


@pytest.mark.parametrize(
    ("heading", "named"),
    [
        ("`unknown_key`", "`unknown_key` (exit 2) has no entry under '## Error codes'"),
        ("`run_not_found`", "`run_not_found` (exit 3) has no entry under '## Error codes'"),
        ("`server_died`", "`server_died` (exit 11) has no entry under '## Attempt endings'"),
        ("`stale`", "`stale` has no entry under '## Shard states'"),
        ("`attention`", "`attention` has no entry under '## Run states'"),
        ("`alias_unused`", "`alias_unused` has no entry under '## Plan warnings'"),
    ],
)
def test_removing_an_entry_fails_naming_it(heading: str, named: str) -> None:
    text = PAGE.read_text(encoding="utf-8")
    failures = _failures(_without_entry(text, heading))
    assert len(failures) == 1, failures
    assert named in failures[0]


def test_removing_the_validation_family_fails_naming_it() -> None:
    family = _check_docs().VALIDATION_FAMILY
    failures = _failures(_without_entry(PAGE.read_text(encoding="utf-8"), family))
    assert failures == [
        f"fern/pages/troubleshooting.mdx: no '### {family}' entry under '## Error codes' for pydantic's own types"
    ]


def test_a_wrong_exit_code_an_unknown_code_and_a_missing_fix_fail() -> None:
    text = PAGE.read_text(encoding="utf-8")
    entry = re.search(r"^### `run_not_found`\n.*?(?=^##)", text, re.MULTILINE | re.DOTALL)
    assert entry is not None
    original = entry.group(0)
    assert "Exit 3." in original
    assert "- **Fix:**" in original
    broken = original.replace("Exit 3.", "Exit 2.", 1).replace("- **Fix:**", "- Fix:", 1)
    broken += "### `no_such_code`\n\nExit 2. Made up.\n\n- **Usual causes:** none.\n- **Fix:** none.\n- **More:** `data-designer slurm status RUN`\n\n"
    failures = _failures(text.replace(original, broken))
    assert any("`run_not_found` must say its exit code: start with 'Exit 3.'" in f for f in failures), failures
    assert any("`run_not_found` lacks '- **Fix:** ...'" in f for f in failures), failures
    assert any("`no_such_code` is not one of the product's error codes" in f for f in failures), failures
