"""scripts/check-deps: the dependency audit finds undeclared, unused and heavy dependencies in a wheel.

Each test packs a scratch copy of the planner's real sources (and a METADATA made from its real pyproject) into a
wheel in tmp_path, changes one thing, and audits it against the workspace venv (where everything the workspace
needs is installed) as the "installed" environment. Packing the zip directly keeps each test well under a second;
``uv run nox -s deps`` audits the real built wheels.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import sys
import tomllib
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLANNER = ROOT / "packages" / "data-designer-slurm-planner"
PLANNER_NAME = "data-designer-slurm-planner"
SCRATCH = "data_designer/slurm/planner/_scratch.py"


@functools.cache
def _check_deps() -> ModuleType:
    """scripts/check-deps (standard library only), loaded as a module."""
    name = "scripts_check_deps"
    loader = importlib.machinery.SourceFileLoader(name, str(ROOT / "scripts" / "check-deps"))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses resolve their annotations through sys.modules
    loader.exec_module(module)
    return module


@functools.cache
def _environment() -> Any:
    return _check_deps().describe_environment()


def _planner_requirements() -> list[str]:
    project = tomllib.loads((PLANNER / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra, items in project.get("optional-dependencies", {}).items():
        requirements += [f"{item}; extra == {extra!r}" for item in items]
    return requirements


def _wheel(
    tmp_path: Path,
    *,
    name: str = PLANNER_NAME,
    extra_files: dict[str, str] | None = None,
    requirements: list[str] | None = None,
    sources: Path | None = PLANNER / "src",
) -> Path:
    """A wheel of ``name``: the planner's real modules (``sources``) plus ``extra_files``, with ``requirements``."""
    requires = _planner_requirements() if requirements is None else requirements
    metadata = "".join(
        [f"Metadata-Version: 2.4\nName: {name}\nVersion: 0.0.1\n", *(f"Requires-Dist: {r}\n" for r in requires), "\n"]
    )
    path = tmp_path / f"{name.replace('-', '_')}-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        if sources is not None:
            for file in sorted(sources.rglob("*.py")):
                wheel.write(file, file.relative_to(sources).as_posix())
        for member, text in (extra_files or {}).items():
            wheel.writestr(member, text)
        wheel.writestr(f"{name.replace('-', '_')}-0.0.1.dist-info/METADATA", metadata)
    return path


def _findings(wheel: Path, **kwargs: Any) -> list[str]:
    return list(_check_deps().audit_wheel(wheel, _environment(), **kwargs).findings)


def test_the_scratch_copy_of_the_planner_passes(tmp_path: Path) -> None:
    report = _check_deps().audit_wheel(_wheel(tmp_path), _environment())
    assert report.findings == ()
    assert set(report.imported) == {"data-designer-slurm-contracts", "packaging", "pydantic", "pyyaml"}
    assert set(report.declared) == set(report.imported)


def test_an_undeclared_import_names_the_module_its_distribution_and_the_line(tmp_path: Path) -> None:
    module = '"""Scratch."""\n\nimport requests\n\nVALUE = requests.codes.ok\n'
    findings = _findings(_wheel(tmp_path, extra_files={SCRATCH: module}))
    assert len(findings) == 1
    finding = findings[0]
    assert finding.startswith(f"{PLANNER_NAME}: requests is imported at {SCRATCH}:3 ")
    assert "its distribution requests is not declared" in finding
    assert "packages/data-designer-slurm-planner/pyproject.toml" in finding


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("def load() -> object:\n    import jinja2\n\n    return jinja2\n", 2),
        ("import importlib\n\nMODULE = importlib.import_module('jinja2.sandbox')\n", 3),
        ("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from jinja2 import Template\n", 4),
    ],
    ids=["lazy", "import_module", "type_checking"],
)
def test_lazy_literal_and_typing_only_imports_count(tmp_path: Path, source: str, line: int) -> None:
    findings = _findings(_wheel(tmp_path, extra_files={SCRATCH: source}))
    assert len(findings) == 1
    assert f"at {SCRATCH}:{line} but its distribution Jinja2 is not declared" in findings[0], findings


def test_an_import_no_installed_distribution_provides_fails(tmp_path: Path) -> None:
    findings = _findings(_wheel(tmp_path, extra_files={SCRATCH: "import no_such_module_anywhere\n"}))
    assert len(findings) == 1
    assert f"{SCRATCH}:1 imports no_such_module_anywhere, which no distribution installed in" in findings[0]


def test_a_declared_but_unused_distribution_fails_unless_allowed_with_a_reason(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, requirements=[*_planner_requirements(), "requests>=2; extra == 'web'"])
    findings = _findings(wheel)
    assert len(findings) == 1
    assert findings[0].startswith(f"""{PLANNER_NAME}: declares "requests>=2; extra == 'web'" (extra 'web') but no""")
    assert "remove it from packages/data-designer-slurm-planner/pyproject.toml" in findings[0]

    allowed = {(PLANNER_NAME, "requests"): "a reason"}
    report = _check_deps().audit_wheel(wheel, _environment(), allow_unused=allowed)
    assert report.findings == ()
    assert report.notes == ("requests declared, not imported: a reason",)


def test_a_sibling_counts_as_used_only_when_imported(tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path,
        name="data-designer-slurm-runtime",
        sources=None,
        extra_files={"data_designer/slurm/runtime/_scratch.py": "from data_designer.slurm import planner\n"},
        requirements=[
            "data-designer-slurm-planner==1.0.0rc1+ddslurm",
            "data-designer-slurm-contracts==1.0.0rc1+ddslurm",
        ],
    )
    findings = _findings(wheel)
    assert len(findings) == 1  # the planner pins contracts exactly, but a sibling must be imported itself
    assert findings[0].startswith("data-designer-slurm-runtime: declares 'data-designer-slurm-contracts==")


def test_the_planner_may_not_import_or_require_heavy_distributions(tmp_path: Path) -> None:
    module = "import numpy\n"
    requirements = [*_planner_requirements(), "numpy>=1.26", "data-designer-config>=1.0.0rc1,<2"]
    findings = _findings(_wheel(tmp_path, extra_files={SCRATCH: module}, requirements=requirements))
    assert any(
        f.startswith(f"{PLANNER_NAME}: numpy (numpy) is imported at {SCRATCH}:1, but {PLANNER_NAME} must stay light")
        for f in findings
    ), findings
    assert any("requires pandas through data-designer-config -> pandas" in f for f in findings), findings
    assert any("declares 'data-designer-config>=1.0.0rc1,<2'" in f for f in findings), findings  # and it is unused


def test_an_import_under_an_extra_that_declares_it_passes(tmp_path: Path) -> None:
    plot = "def figure() -> object:\n    import matplotlib.pyplot\n\n    return matplotlib.pyplot\n"
    wheel = _wheel(
        tmp_path,
        name="data-designer-slurm",
        sources=None,
        extra_files={"data_designer/slurm/services/_plot.py": plot},
        requirements=["matplotlib>=3.8; extra == 'plot'"],
    )
    report = _check_deps().audit_wheel(wheel, _environment(), allow_unused={})
    assert report.findings == ()
    assert set(report.imported) == {"matplotlib"}


def test_host_modules_map_to_the_host_distribution_that_ships_them() -> None:
    env = _environment()
    assert env.distribution("data_designer.config.column_configs") == "data-designer-config"
    assert env.distribution("data_designer.interface.data_designer") == "data-designer"
    assert env.distribution("data_designer.engine") == "data-designer-engine"
    assert env.distribution("data_designer") is None  # a namespace: no single owner


def test_slurm_help_in_the_workspace_venv_imports_no_pyarrow_pandas_or_numpy() -> None:
    assert _check_deps().help_findings(sys.executable) == []
