"""The vllm_parser session's case table agrees with the planner (no vLLM needed: the session runs the real parser).

``tests/vllm_parser/cases.py`` holds the awkward engine args, the argv each must render to and what vLLM must parse
from it; these tests keep the table honest against the planner's public API in every normal test run.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from data_designer.slurm.planner import (
    bind_argv,
    check_engine_args,
    escape_braces,
    render_engine_args,
    serve_flag_versions,
)

CASES_FILE = Path(__file__).resolve().parent / "vllm_parser" / "cases.py"


def _load() -> ModuleType:
    name = "vllm_parser_cases"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, CASES_FILE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


cases = _load()
AWKWARD: tuple[Any, ...] = cases.AWKWARD


@pytest.mark.parametrize("case", AWKWARD, ids=[case.name for case in AWKWARD])
def test_awkward_case_renders_to_its_argv(case: Any) -> None:
    assert render_engine_args(case.engine_args) == case.argv


@pytest.mark.parametrize("version", serve_flag_versions())
@pytest.mark.parametrize("case", AWKWARD, ids=[case.name for case in AWKWARD])
def test_awkward_case_is_valid_for_every_supported_vllm(case: Any, version: str) -> None:
    assert check_engine_args(case.engine_args, version=version) == []


@pytest.mark.parametrize("case", AWKWARD, ids=[case.name for case in AWKWARD])
def test_awkward_case_survives_the_argv_template(case: Any) -> None:
    """Braces, quotes and unicode come back byte for byte from escape_braces + bind_argv (what a plan does)."""
    template = [escape_braces(word) for word in case.argv]
    assert bind_argv(template, cases.BINDINGS) == case.argv


@pytest.mark.parametrize("case", AWKWARD, ids=[case.name for case in AWKWARD])
def test_awkward_case_expects_each_key_it_sets(case: Any) -> None:
    """Every engine arg of a case has an expectation: its dest, a field under it, or for a dotted key its path."""
    for key in case.engine_args:
        name, _, rest = key.partition(".")
        dest = name.replace("-", "_") + (f".{rest}" if rest else "")
        covered = dest in case.expect or any(path.startswith(f"{dest}.") for path in case.expect)
        assert covered, f"{case.name}: no expected value for {key!r} ({dest})"


def test_names_are_unique() -> None:
    names = [case.name for case in AWKWARD] + [control.name for control in cases.CONTROLS]
    assert len(names) == len(set(names))


def test_the_table_covers_what_the_issue_asks() -> None:
    """Negative numbers, values starting with '-', JSON, unicode, floats, negations, dotted keys, choices."""
    argvs = [word for case in AWKWARD for word in case.argv]
    assert any(word.startswith("--") and "=-" in word and word.split("=-", 1)[1][:1].isdigit() for word in argvs)
    assert any(word.startswith("--") and "=-" in word and word.split("=-", 1)[1][:1].isalpha() for word in argvs)
    assert any(word.startswith("{") and '"' in word for word in argvs)
    assert any(not word.isascii() for word in argvs)
    assert any(isinstance(v, float) for case in AWKWARD for v in case.engine_args.values())
    assert any(word.startswith("--no-") for word in argvs)
    assert any(word.startswith("--") and "." in word.split("=", 1)[0] for word in argvs)


def test_the_checks_cover_every_golden_vllm_argv_for_every_version() -> None:
    versions = list(serve_flag_versions())
    data = cases.build()
    assert data["versions"] == versions
    expected = 0
    for path in sorted(cases.GOLDEN.glob("*.plan.json")):
        plan = json.loads(path.read_text(encoding="utf-8"))
        for replica in plan["allocation"]["replicas"]:
            if replica["engine"] == "vllm":
                expected += len(replica.get("rank_argv") or [replica["argv"]])
    golden = [c for c in data["checks"] if c["kind"] == "golden"]
    assert expected > 0
    assert len(golden) == expected * len(versions)
    assert len([c for c in data["checks"] if c["kind"] == "awkward"]) == len(AWKWARD) * len(versions)
    for check in data["checks"]:
        assert check["argv"][:2] == ["vllm", "serve"]
        assert not any("{" in word and word.strip("{}") in cases.BINDINGS for word in check["argv"]), check["id"]


def test_rank_argvs_expect_headless_on_every_rank_but_the_first() -> None:
    ranks = [c for c in cases.build()["checks"] if c["kind"] == "golden" and " rank " in c["id"]]
    assert ranks, "no golden plan has a replica that spans nodes"
    for check in ranks:
        rank = check["expect"]["node_rank"]
        assert check["expect"]["headless"] is (rank > 0)
        assert ("--headless" in check["argv"]) is (rank > 0)
        assert check["expect"]["launch"] == ("headless" if rank > 0 else "api_server")


def test_the_sweep_covers_every_version_and_lists_what_vllm_refuses_alone() -> None:
    versions = list(serve_flag_versions())
    sweep = [c for c in cases.build()["checks"] if c["kind"] == "sweep"]
    for version in versions:
        mine = [c for c in sweep if c["version"] == version]
        assert len(mine) > 100, f"the sweep found only {len(mine)} options of vllm {version} in the flag data"
        must_fail = {c["id"] for c in mine if "must_fail" in c}
        listed = {f"sweep {name}: {json.dumps(value)}" for name, value in cases.SWEEP_REFUSED}
        assert must_fail <= listed
    refused = {c["id"] for c in sweep if "must_fail" in c}
    assert refused == {f"sweep {name}: {json.dumps(value)}" for name, value in cases.SWEEP_REFUSED}, (
        "an entry of SWEEP_REFUSED is no longer swept (the planner refuses it, or the flag data lost it): drop it"
    )
