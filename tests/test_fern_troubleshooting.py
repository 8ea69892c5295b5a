"""The troubleshooting page covers every code and state the product has, and the docs check says which one is not.

fern/check_docs.py runs :func:`check_troubleshooting` in the docs session against the tables printed by the built
wheels; here the same check runs against this workspace's packages, on the real page and on copies of it with one
entry removed or broken.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "fern" / "pages" / "troubleshooting.mdx"
Checker = Callable[[str], list[str]]


@pytest.fixture(scope="module")
def failures_of(check_docs: ModuleType) -> Checker:
    """The troubleshooting check of a page text, against the tables as the docs session reads them (this venv's)."""
    tables = check_docs.product_tables(Path(sys.executable).parent.parent)

    def failures(text: str) -> list[str]:
        found: list[str] = check_docs.check_troubleshooting(text, tables)
        return found

    return failures


def _without_entry(text: str, heading: str) -> str:
    """The page with the ``###`` entry titled ``heading`` (and its body) removed."""
    pattern = re.compile(rf"^### {re.escape(heading)}\n.*?(?=^##)", re.MULTILINE | re.DOTALL)
    removed, count = pattern.subn("", text)
    assert count == 1, heading
    return removed


def test_the_page_has_one_complete_entry_for_every_code_and_state(failures_of: Checker) -> None:
    assert failures_of(PAGE.read_text(encoding="utf-8")) == []


def test_the_tables_are_the_products(check_docs: ModuleType) -> None:
    from data_designer.slurm.contracts import ERROR_CODES, SHARD_STATES
    from data_designer.slurm.contracts.records import EXIT_CODES

    tables = check_docs.product_tables(Path(sys.executable).parent.parent)
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
def test_removing_an_entry_fails_naming_it(heading: str, named: str, failures_of: Checker) -> None:
    text = PAGE.read_text(encoding="utf-8")
    failures = failures_of(_without_entry(text, heading))
    assert len(failures) == 1, failures
    assert named in failures[0]


def test_removing_the_validation_family_fails_naming_it(check_docs: ModuleType, failures_of: Checker) -> None:
    family = check_docs.VALIDATION_FAMILY
    failures = failures_of(_without_entry(PAGE.read_text(encoding="utf-8"), family))
    assert failures == [
        f"fern/pages/troubleshooting.mdx: no '### {family}' entry under '## Error codes' for pydantic's own types"
    ]


def test_a_wrong_exit_code_an_unknown_code_and_a_missing_fix_fail(failures_of: Checker) -> None:
    text = PAGE.read_text(encoding="utf-8")
    entry = re.search(r"^### `run_not_found`\n.*?(?=^##)", text, re.MULTILINE | re.DOTALL)
    assert entry is not None
    original = entry.group(0)
    assert "Exit 3." in original
    assert "- **Fix:**" in original
    broken = original.replace("Exit 3.", "Exit 2.", 1).replace("- **Fix:**", "- Fix:", 1)
    broken += "### `no_such_code`\n\nExit 2. Made up.\n\n- **Usual causes:** none.\n- **Fix:** none.\n- **More:** `data-designer slurm status RUN`\n\n"
    failures = failures_of(text.replace(original, broken))
    assert any("`run_not_found` must say its exit code: start with 'Exit 3.'" in f for f in failures), failures
    assert any("`run_not_found` lacks '- **Fix:** ...'" in f for f in failures), failures
    assert any("`no_such_code` is not one of the product's error codes" in f for f in failures), failures


def test_an_attempt_ending_gives_the_tasks_exit_not_a_commands(failures_of: Checker) -> None:
    text = PAGE.read_text(encoding="utf-8")
    entry = re.search(r"^### `server_died`\n.*?(?=^##)", text, re.MULTILINE | re.DOTALL)
    assert entry is not None
    assert "Task exit 11." in entry.group(0)
    failures = failures_of(text.replace(entry.group(0), entry.group(0).replace("Task exit 11.", "Exit 11.", 1)))
    assert len(failures) == 1, failures
    assert "`server_died` must say its exit code: start with 'Task exit 11.' (found Exit [11])" in failures[0]
