"""``scripts/check-public-imports`` (run by ``nox -s lint``): a private module serves only the room that holds it.

The checker flags ``_private`` imports from outside their room (the package directory holding the module: another
package, a sibling or child subpackage of the same package) wherever code hides: import statements, relative
imports, code in strings (``python -c``), bash heredocs and doc pages; it lets public imports, a module's imports of
its own room's and its enclosing rooms' private modules and a package's tests' imports of their package's private
modules through; and the repository as it stands passes it.

The private module paths below are assembled from parts, so this file does not itself contain the imports it
feeds the checker.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check-public-imports"

STORE = "data_designer.slurm.runtime.store"
PRIVATE = STORE + "." + "_record_io"
EXECUTE = "data_designer.slurm.services." + "_execute"


def _load_checker() -> Any:
    loader = importlib.machinery.SourceFileLoader("check_public_imports", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # dataclasses look their module up while the class is created
    loader.exec_module(module)
    return module


checker = _load_checker()


def findings(tmp_path: Path, name: str, text: str) -> list[str]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return [str(finding) for finding in checker.check([path])]


def findings_in(tmp_path: Path, package: str, text: str) -> list[str]:
    """The findings of ``text`` read as a source module sitting in ``package``."""
    path = tmp_path / "_module.py"
    path.write_text(text, encoding="utf-8")
    importer = checker.Importer(package=package)
    return [
        str(finding).rpartition(": imports private module ")[2] for finding in checker.check_file(path, "m", importer)
    ]


def test_a_private_import_is_flagged_with_file_line_and_module(tmp_path: Path) -> None:
    text = f"from __future__ import annotations\n\nfrom {PRIVATE} import read_record\n"
    assert findings(tmp_path, "test_x.py", text) == [f"{tmp_path / 'test_x.py'}:3: imports private module {PRIVATE}"]


def test_a_public_import_passes(tmp_path: Path) -> None:
    text = (
        f"from {STORE} import RecordOk, read_record\n"
        "import data_designer.slurm.runtime.supervisor\n"
        "from data_designer.slurm.contracts import __version__\n"
        "from data_designer.slurm.runtime.worker import __main__\n"
    )
    assert findings(tmp_path, "test_x.py", text) == []


@pytest.mark.parametrize(
    ("line", "module"),
    [
        (f"import {PRIVATE}", PRIVATE),
        (f"import {PRIVATE} as io", PRIVATE),
        (f"from {PRIVATE} import (\n    RecordOk,\n)", PRIVATE),
        ("from data_designer.slurm.runtime import " + "_launch", "data_designer.slurm.runtime." + "_launch"),
        ("from data_designer.slurm.planner import " + "_sbatch as s", "data_designer.slurm.planner." + "_sbatch"),
        ("def f() -> None:\n    from " + EXECUTE + " import x", EXECUTE),
        (f"SCRIPT = 'import time\\nfrom {PRIVATE} import read_record\\n'", PRIVATE),
        (f"ARGV = ['-m', '{PRIVATE}']", PRIVATE),
    ],
)
def test_every_spelling_of_a_private_import_is_flagged(tmp_path: Path, line: str, module: str) -> None:
    [finding] = findings(tmp_path, "bench_x.py", line + "\n")
    assert finding.endswith(f"imports private module {module}")


def test_python_in_a_bash_heredoc_or_python_c_is_flagged(tmp_path: Path) -> None:
    text = (
        "#!/usr/bin/env bash\n"
        "set -euo pipefail\n"
        "python - \"$dir\" <<'PY'\n"
        "import sys\n"
        f"from {STORE} import RunLayout\n"
        f"from {PRIVATE} import (\n"
        "    read_record,\n"
        ")\n"
        "PY\n"
        f"python -c 'import {PRIVATE}'\n"
    )
    assert findings(tmp_path, "demo", text) == [
        f"{tmp_path / 'demo'}:6: imports private module {PRIVATE}",
        f"{tmp_path / 'demo'}:10: imports private module {PRIVATE}",
    ]


def test_a_doc_page_may_show_only_public_imports(tmp_path: Path) -> None:
    text = f"```python\nfrom {STORE} import RunLayout\nfrom {PRIVATE} import read_record\n```\n"
    assert findings(tmp_path, "page.mdx", text) == [f"{tmp_path / 'page.mdx'}:3: imports private module {PRIVATE}"]


RUNTIME = "data_designer.slurm.runtime"
SERVICES = "data_designer.slurm.services"
SRC = {
    "contracts": "packages/data-designer-slurm-contracts/src/data_designer/slurm/contracts",
    "planner": "packages/data-designer-slurm-planner/src/data_designer/slurm/planner",
    "runtime": "packages/data-designer-slurm-runtime/src/data_designer/slurm/runtime",
    "top": "packages/data-designer-slurm/src/data_designer/slurm",
}


@pytest.mark.parametrize(
    ("module", "importer", "allowed"),
    [
        # a subpackage's private modules serve that subpackage
        (PRIVATE, f"{SRC['runtime']}/store/_reader.py", True),
        (PRIVATE, f"{SRC['runtime']}/store/__init__.py", True),
        (STORE + "._layout", f"{SRC['runtime']}/supervisor/_main.py", False),  # a sibling subpackage
        (STORE + "._layout", f"{SRC['runtime']}/__init__.py", False),  # the root reaching down into a room
        (STORE + "._layout", f"{SRC['runtime']}/_launch.py", False),
        (f"{SERVICES}.images._workspace", f"{SRC['top']}/services/runs/_retry.py", False),
        (f"{SERVICES}.images._workspace", f"{SRC['top']}/services/images/_add.py", True),
        (f"{SERVICES}._status", f"{SRC['top']}/cli/_x.py", False),  # cli and services are sibling rooms
        (f"{SERVICES}.runs._status", f"{SRC['top']}/services/_x.py", False),
        ("data_designer.slurm.contracts.records." + "_run", f"{SRC['contracts']}/_run.py", False),
        # a package's root-level private modules serve the whole package, its subpackages too
        (f"{RUNTIME}._launch", f"{SRC['runtime']}/supervisor/_main.py", True),
        (f"{RUNTIME}._versions", f"{SRC['runtime']}/worker/deep/_x.py", True),
        (f"{SERVICES}._status", f"{SRC['top']}/services/runs/_retry.py", True),
        ("data_designer.slurm.contracts." + "_types", f"{SRC['contracts']}/records/_run.py", True),
        # a private name counts as a private module of the module it comes from
        (STORE + "._helper", f"{SRC['runtime']}/store/_reader.py", True),
        (STORE + "._helper", f"{SRC['runtime']}/worker/_main.py", False),
        # another package's private modules are closed, whatever the room
        (PRIVATE, f"{SRC['top']}/services/_x.py", False),
        ("data_designer.slurm.contracts." + "_types", f"{SRC['planner']}/_compile.py", False),
        (f"{RUNTIME}._launch", f"{SRC['top']}/services/runs/_execute.py", False),
        # a package's tests see every private module of their package, and no other package's
        (PRIVATE, "packages/data-designer-slurm-runtime/tests/test_x.py", True),
        (f"{RUNTIME}.supervisor._main", "packages/data-designer-slurm-runtime/tests/test_x.py", True),
        ("data_designer.slurm.cli." + "_app", "packages/data-designer-slurm/tests/test_x.py", True),
        (f"{SERVICES}.runs._status", "packages/data-designer-slurm/tests/test_x.py", True),
        (PRIVATE, "packages/data-designer-slurm/tests/test_x.py", False),
        # outside code sees public faces only; what is not ours is not judged
        ("data_designer.slurm.planner." + "_argv", "tests/test_x.py", False),
        (PRIVATE, "benchmarks/bench_x.py", False),
        (PRIVATE, "scripts/demo", False),
        (STORE, "tests/test_x.py", True),
        (f"{RUNTIME}.worker.__main__", "tests/test_x.py", True),
        ("data_designer.config._private", "tests/test_x.py", True),
    ],
)
def test_a_private_module_serves_only_its_room(module: str, importer: str, allowed: bool) -> None:
    assert (checker.forbidden(module, checker.importer_of_path(ROOT / importer)) is None) is allowed


@pytest.mark.parametrize(
    ("relative", "package", "roots"),
    [
        ("packages/data-designer-slurm/src/data_designer/slurm/services/x.py", SERVICES, ()),
        ("packages/data-designer-slurm/src/data_designer/slurm/services/runs/__init__.py", SERVICES + ".runs", ()),
        ("packages/data-designer-slurm/src/data_designer/slurm/cli/_app.py", "data_designer.slurm.cli", ()),
        ("packages/data-designer-slurm-runtime/src/data_designer/slurm/runtime/x.py", RUNTIME, ()),
        ("packages/data-designer-slurm/tests/test_x.py", None, (SERVICES, "data_designer.slurm.cli")),
        ("packages/data-designer-slurm-planner/tests/sub/test_x.py", None, ("data_designer.slurm.planner",)),
        ("tests/test_x.py", None, ()),
        ("benchmarks/bench_x.py", None, ()),
        ("scripts/demo", None, ()),
        ("packages/data-designer-slurm/README.md", None, ()),
    ],
)
def test_a_file_imports_as_the_package_of_its_directory(
    relative: str, package: str | None, roots: tuple[str, ...]
) -> None:
    assert checker.importer_of_path(ROOT / relative) == checker.Importer(package=package, roots=roots)


def test_a_module_is_flagged_for_another_subpackages_private_module(tmp_path: Path) -> None:
    text = (
        f"from {STORE} import RunLayout\n"
        f"from {STORE}._layout import OUTPUT_DIR\n"
        f"from {RUNTIME}.supervisor._heartbeat import Heartbeat\n"
        f"from {RUNTIME} import _launch\n"
    )
    assert findings_in(tmp_path, f"{RUNTIME}.supervisor", text) == [f"{STORE}._layout"]
    assert findings_in(tmp_path, STORE, text) == [f"{RUNTIME}.supervisor._heartbeat"]


def test_relative_imports_are_resolved_against_the_modules_package(tmp_path: Path) -> None:
    text = "from ._heartbeat import Heartbeat\nfrom ..store._layout import OUTPUT_DIR\nfrom .. import _launch\n"
    assert findings_in(tmp_path, f"{RUNTIME}.supervisor", text) == [f"{STORE}._layout"]


def test_code_in_a_string_of_a_source_module_counts_as_its_import(tmp_path: Path) -> None:
    text = f"ARGV = ['-c', 'from {STORE}._layout import OUTPUT_DIR']\n"
    assert findings_in(tmp_path, f"{RUNTIME}.testing", text) == [f"{STORE}._layout"]
    assert findings_in(tmp_path, STORE, text) == []


def test_the_repository_is_clean() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == done.stderr == ""
