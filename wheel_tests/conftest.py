"""Fixtures for wheel_tests: checks of the built artifacts and of venvs installed from them (run by noxfile.py).

The install_base, install_extra and install_leaf sessions each create a fresh venv, install built wheels and
pytest into it, and run the test files that describe that venv's state with that venv's own pytest, so every
import resolves to installed wheels (the ``site_packages`` fixture refuses the workspace's editable venv). Only
test_dist.py (the build session) and test_release.py (release_check) read dist/ from the workspace venv.
``DDS_WHEEL_DIST`` names dist/.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Callable, Mapping, Sequence
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

RunCli = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]
ImportedModules = Callable[[Sequence[str]], frozenset[str]]
WheelRecord = Callable[[str], Mapping[str, str]]


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _parse_record(text: str) -> dict[str, str]:
    """RECORD lines as {path: hash}; entries without a hash (RECORD itself, pyc files) map to ''."""
    entries: dict[str, str] = {}
    for line in text.splitlines():
        if line:
            path, digest, _size = line.rsplit(",", 2)
            entries[path] = digest
    return entries


@pytest.fixture(scope="session")
def dist_dir() -> Path:
    value = os.environ.get("DDS_WHEEL_DIST")
    if not value:
        pytest.fail("DDS_WHEEL_DIST is not set: wheel_tests run only inside the venvs that `uv run nox` builds")
    path = Path(value)
    assert path.is_dir(), f"DDS_WHEEL_DIST={value!r} is not a directory"
    return path


@pytest.fixture(scope="session")
def version() -> str:
    """The lockstep version of our distributions, as the top leaf's pyproject declares it."""
    import tomllib

    data = tomllib.loads((REPO / "packages" / "data-designer-slurm" / "pyproject.toml").read_text(encoding="utf-8"))
    value = data["project"]["version"]
    assert isinstance(value, str)
    return value


@pytest.fixture(scope="session")
def wheel_path(dist_dir: Path, version: str) -> Callable[[str], Path]:
    """The one built wheel of a distribution in dist/."""

    def find(name: str) -> Path:
        matches = sorted(dist_dir.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        assert len(matches) == 1, f"expected one {name} {version} wheel in {dist_dir}, found {matches!r}"
        return matches[0]

    return find


@pytest.fixture(scope="session")
def wheel_metadata(wheel_path: Callable[[str], Path], version: str) -> Callable[[str], Message]:
    """The METADATA inside a distribution's built wheel in dist/."""

    def read(name: str) -> Message:
        with zipfile.ZipFile(wheel_path(name)) as wheel:
            text = wheel.read(f"{name.replace('-', '_')}-{version}.dist-info/METADATA").decode("utf-8")
        return Parser().parsestr(text)

    return read


@pytest.fixture(scope="session")
def wheel_record(wheel_path: Callable[[str], Path], version: str) -> WheelRecord:
    """The RECORD inside a built wheel, as {path: hash}."""

    def read(name: str) -> Mapping[str, str]:
        with zipfile.ZipFile(wheel_path(name)) as wheel:
            text = wheel.read(f"{name.replace('-', '_')}-{version}.dist-info/RECORD").decode("utf-8")
        return _parse_record(text)

    return read


@pytest.fixture(scope="session")
def site_packages() -> Path:
    """This venv's site-packages; also asserts we are in a venv that is not the workspace's editable one."""
    assert sys.prefix != sys.base_prefix, "wheel_tests must run inside a venv"
    assert Path(sys.prefix).resolve() != (REPO / ".venv").resolve(), "wheel_tests must not run in the workspace venv"
    return Path(sysconfig.get_path("purelib")).resolve()


@pytest.fixture(scope="session")
def cli_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for CLI subprocesses: a throwaway HOME (the host writes ~/.data-designer), wide plain output."""
    home = tmp_path_factory.mktemp("home")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "DATA_DESIGNER"))}
    env.update({"HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"})
    return env


@pytest.fixture(scope="session")
def run_cli(cli_env: dict[str, str]) -> RunCli:
    """Run this venv's ``data-designer`` console script with the given arguments."""
    script = Path(sys.executable).parent / "data-designer"

    def run(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(script), *args], env=cli_env, capture_output=True, text=True, timeout=300, check=False
        )

    return run


# Runs a CLI in-process and, at interpreter exit, writes every module name in sys.modules to argv[1] (one per line).
# sys.modules is the ground truth: -X importtime does not log modules loaded through importlib.import_module, which
# is how entry points and lazy command groups load theirs.
_RECORD_MODULES = """
import atexit, sys

def _dump(path=sys.argv[1]):
    with open(path, "w", encoding="utf-8") as out:
        out.write("\\n".join(sorted(sys.modules)))

atexit.register(_dump)
"""
_HOST_MAIN = """
sys.argv = [sys.argv[2], *sys.argv[3:]]
from data_designer.cli.main import main
sys.exit(main())
"""
_EXTENSION_MAIN = """
from data_designer.slurm.cli import command
command().main(args=sys.argv[3:], prog_name="data-designer slurm")
"""


def _modules_after(main: str, args: Sequence[str], env: Mapping[str, str], scratch: Path) -> frozenset[str]:
    """Run ``main`` with ``args`` in a fresh isolated interpreter; the modules it had imported when it exited."""
    out = scratch / "modules.txt"
    out.unlink(missing_ok=True)
    script = Path(sys.executable).parent / "data-designer"
    result = subprocess.run(
        [sys.executable, "-I", "-c", _RECORD_MODULES + main, str(out), str(script), *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    assert "Usage:" in result.stdout, result.stdout
    modules = frozenset(out.read_text(encoding="utf-8").splitlines())
    assert "sys" in modules, "the module record is empty: the check would be vacuous"
    return modules


@pytest.fixture(scope="session")
def host_imports(cli_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> ImportedModules:
    """Every module loaded by ``data-designer <args>`` (the host's ``main``, exactly as its console script runs it)."""
    scratch = tmp_path_factory.mktemp("host-imports")

    def imported(args: Sequence[str]) -> frozenset[str]:
        return _modules_after(_HOST_MAIN, args, cli_env, scratch)

    return imported


@pytest.fixture(scope="session")
def extension_imports(cli_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> ImportedModules:
    """Every module loaded by our ``slurm`` command object run on its own (no host ``main``) with ``<args>``."""
    scratch = tmp_path_factory.mktemp("extension-imports")

    def imported(args: Sequence[str]) -> frozenset[str]:
        return _modules_after(_EXTENSION_MAIN, args, cli_env, scratch)

    return imported


@pytest.fixture(scope="session")
def file_hash() -> Callable[[Path], str]:
    """A file's sha256 in RECORD's notation (``sha256=<urlsafe base64, unpadded>``)."""

    def digest(path: Path) -> str:
        return _record_hash(path.read_bytes())

    return digest


@pytest.fixture(scope="session")
def owners(site_packages: Path) -> Callable[[str], set[str]]:
    """Names of the installed distributions owning at least one file under a path prefix (e.g. ``data_designer/``)."""
    from importlib.metadata import distributions

    def find(prefix: str) -> set[str]:
        return {
            dist.metadata["Name"]
            for dist in distributions(path=[str(site_packages)])
            if any(str(file).startswith(prefix) for file in dist.files or ())
        }

    return find


_PANEL_ROW = re.compile(r"^[│|]\s(?P<name>[a-z][\w-]*)\s{2,}\S")


@pytest.fixture(scope="session")
def host_commands() -> Callable[[str], set[str]]:
    """Command names listed in the panels of the host's top-level ``--help`` (option rows start with ``-``)."""

    def names(help_text: str) -> set[str]:
        found = {m.group("name") for line in help_text.splitlines() if (m := _PANEL_ROW.match(line))}
        assert "config" in found, f"could not read the host's command list from:\n{help_text}"
        return found

    return names
