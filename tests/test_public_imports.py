"""``scripts/check-public-imports`` (run by ``nox -s lint``): only a package's own code imports its private modules.

The checker flags ``_private`` imports from outside their package wherever code hides: import statements, code in
strings (``python -c``), bash heredocs and doc pages; it lets public imports and a package's imports of its own
private modules through; and the repository as it stands passes it.

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


@pytest.mark.parametrize(
    ("module", "importer", "allowed"),
    [
        (PRIVATE, "runtime", True),  # the runtime's own store
        (PRIVATE, "top", False),  # services reaching into the runtime
        ("data_designer.slurm.contracts." + "_types", "planner", False),
        ("data_designer.slurm.contracts." + "_types", "contracts", True),
        ("data_designer.slurm.services." + "_plans", "top", True),  # cli and services are one package
        ("data_designer.slurm.cli." + "_app", "top", True),
        ("data_designer.slurm.planner." + "_argv", None, False),  # tests/, benchmarks/, scripts/...
        (STORE, None, True),
        ("data_designer.config._private", None, True),  # not one of ours
    ],
)
def test_a_package_may_import_only_its_own_private_modules(module: str, importer: str | None, allowed: bool) -> None:
    assert (checker.forbidden(module, importer) is None) is allowed


@pytest.mark.parametrize(
    ("relative", "owner"),
    [
        ("packages/data-designer-slurm/src/data_designer/slurm/services/x.py", "top"),
        ("packages/data-designer-slurm/tests/test_x.py", "top"),
        ("packages/data-designer-slurm-runtime/src/data_designer/slurm/runtime/x.py", "runtime"),
        ("packages/data-designer-slurm-planner/tests/test_x.py", "planner"),
        ("packages/data-designer-slurm-contracts/src/data_designer/slurm/contracts/x.py", "contracts"),
        ("tests/test_x.py", None),
        ("benchmarks/bench_x.py", None),
        ("scripts/demo", None),
    ],
)
def test_a_file_belongs_to_the_package_of_its_directory(relative: str, owner: str | None) -> None:
    assert checker.owner_of_path(ROOT / relative) == owner


def test_the_repository_is_clean() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == done.stderr == ""
