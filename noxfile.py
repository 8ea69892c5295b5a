"""Sessions that prove data-designer-slurm: lint, types, tests, wheels, installs from wheels, docs, benchmarks.

CI runs them all with ``bash scripts/test``; run one with ``uv run nox -s NAME`` (arguments after ``--`` go to
pytest in ``tests``, to ``benchmarks/run.py`` in ``benchmarks``).

- lint, typecheck, tests, build, release_check and benchmarks run in the uv workspace venv (``.venv``, exactly
  ``uv.lock``).
- install_base, install_extra, install_leaf, install_runtime, host_lowest, host_newest, deps and docs each create
  brand-new venvs under ``.nox/fresh/`` (removed first, so ``--reuse-venv`` cannot weaken them), install only built
  wheels from ``dist/`` for our distributions (third-party packages and the host ``data-designer`` come from PyPI),
  and run the checks in ``wheel_tests/`` with that venv's own pytest.

real_cluster (not in the default list; needs DDSLURM_REAL_CLUSTER=1 and DDSLURM_REAL_PROFILE) runs a benchmark on a
real cluster from the built wheels; ``.ci/run`` runs it on the local cluster after ``bash scripts/test``.

vllm_parser (not in the default list) feeds every vLLM argv the planner renders through each supported vLLM's real
``vllm serve`` parser on the CPU, each vLLM in a fresh venv with only what that parse path imports.

uv never downloads an interpreter here: ``UV_PYTHON_DOWNLOADS=never``, and venvs use the machine's Python 3.11.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tomllib
import zipfile
from pathlib import Path

import nox
from nox.command import CommandFailed
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

nox.needs_version = ">=2024.10.9"
nox.options.default_venv_backend = "none"

ROOT = Path(__file__).resolve().parent
DIST = ROOT / "dist"
FRESH = ROOT / ".nox" / "fresh"
TOOLS = ROOT / ".nox" / "tools"
WHEEL_TESTS = ROOT / "wheel_tests"
PYTHON = "3.11"

os.environ["UV_PYTHON_DOWNLOADS"] = "never"
os.environ.setdefault("UV_PYTHON", PYTHON)

# Leaf first: the order in which the packages depend on each other (contracts <- planner <- runtime <- top leaf).
DISTRIBUTIONS = (
    "data-designer-slurm-contracts",
    "data-designer-slurm-planner",
    "data-designer-slurm-runtime",
    "data-designer-slurm",
)
TOP_LEAF = "data-designer-slurm"


def _project_version(name: str) -> str:
    project = tomllib.loads((ROOT / "packages" / name / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return str(project["version"])


def _version() -> str:
    """The lockstep version of our four distributions (they must all agree)."""
    versions = {name: _project_version(name) for name in DISTRIBUTIONS}
    distinct = set(versions.values())
    if len(distinct) != 1:
        raise RuntimeError(f"packages disagree on their version: {versions!r}")
    return distinct.pop()


VERSION = _version()
# Our local version label (+ddslurm) marks the build; the host release line is its public part.
HOST_REQUIREMENT = f"data-designer=={VERSION.split('+', 1)[0]}"
EXTRA_REQUIREMENT = f"data-designer[slurm]=={VERSION.split('+', 1)[0]}"

CI_SESSIONS = [
    "lint",
    "typecheck",
    "tests",
    "build",
    "install_base",
    "install_extra",
    "install_leaf",
    "install_runtime",
    "host_lowest",
    "host_newest",
    "deps",
    "release_check",
    "docs",
    "benchmarks",
]
nox.options.sessions = CI_SESSIONS


# --- helpers -------------------------------------------------------------------------------------------------------


def _sync(session: nox.Session) -> None:
    """Make ``.venv`` exactly ``uv.lock`` (a no-op when it already is)."""
    session.run("uv", "sync", "--frozen", external=True)


def _uv_run(session: nox.Session, *args: str, env: dict[str, str | None] | None = None) -> None:
    session.run("uv", "run", "--frozen", "--no-sync", *args, env=env, external=True)


def _wheel(name: str) -> Path:
    """The one built wheel of distribution ``name`` in dist/."""
    matches = sorted(DIST.glob(f"{name.replace('-', '_')}-{VERSION}-*.whl"))
    if len(matches) != 1:
        raise RuntimeError(f"expected exactly one {name} {VERSION} wheel in {DIST}, found {[m.name for m in matches]}")
    return matches[0]


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _stale_files(name: str) -> list[str]:
    """Source files of ``name`` whose content differs from (or is missing in) its wheel in dist/."""
    src = ROOT / "packages" / name / "src"
    with zipfile.ZipFile(_wheel(name)) as wheel:
        record = wheel.read(f"{name.replace('-', '_')}-{VERSION}.dist-info/RECORD").decode("utf-8")
    built = {
        path: digest
        for path, digest, _size in (line.rsplit(",", 2) for line in record.splitlines() if line)
        if path.startswith("data_designer/")
    }
    source = {
        path.relative_to(src).as_posix(): _record_hash(path.read_bytes())
        for path in src.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    return sorted(path for path in built.keys() | source.keys() if built.get(path) != source.get(path))


def _dist_problems() -> list[str]:
    """Why dist/ is not exactly one wheel per distribution built from the current working tree (empty: it is)."""
    problems: list[str] = []
    for name in DISTRIBUTIONS:
        try:
            stale = _stale_files(name)
        except (RuntimeError, KeyError, OSError) as exc:
            problems.append(f"{name}: {exc}")
            continue
        if stale:
            problems.append(f"{name}: wheel differs from src for {', '.join(stale)}")
    return problems


def _require_current_dist(session: nox.Session) -> None:
    """Fail unless dist/ holds exactly one wheel per distribution, built from the current working tree."""
    problems = _dist_problems()
    if problems:
        session.error("dist/ is missing or stale (run `uv run nox -s build`):\n  " + "\n  ".join(problems))


def _fresh_venv(session: nox.Session, label: str, *, pip: bool = False) -> Path:
    """A brand-new venv at .nox/fresh/<session>-<label> (any previous one is deleted first).

    With ``pip=True`` it is seeded with pip, for steps whose point is what ``pip`` does for users.
    """
    location = FRESH / f"{session.name}-{label}"
    shutil.rmtree(location, ignore_errors=True)
    seed = ["--seed"] if pip else []
    session.run("uv", "venv", "--quiet", "--python", PYTHON, *seed, str(location), external=True)
    return location


def _uv_pip_install(session: nox.Session, venv: Path, *requirements: str) -> None:
    # --prerelease=allow is uv's spelling of pip's --pre: the host line we target is a release candidate.
    session.run(
        "uv",
        "pip",
        "install",
        "--quiet",
        "--python",
        str(venv / "bin" / "python"),
        "--prerelease=allow",
        *requirements,
        external=True,
    )


def _pip(session: nox.Session, venv: Path, *args: str) -> None:
    session.run(str(venv / "bin" / "python"), "-m", "pip", *args, external=True)


def _venv_env(venv: Path) -> dict[str, str | None]:
    """Environment for commands run inside ``venv``: its bin first, nothing leaking in from the workspace venv."""
    workspace_bin = str(ROOT / ".venv" / "bin")
    path = [str(venv / "bin"), *(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != workspace_bin)]
    return {
        "VIRTUAL_ENV": str(venv),
        "PATH": os.pathsep.join(path),
        "PYTHONPATH": None,
        "DDS_WHEEL_DIST": str(DIST),
    }


def _wheel_tests(session: nox.Session, venv: Path, *files: str, env: dict[str, str | None] | None = None) -> None:
    """Run wheel_tests/<files> with the pytest installed in ``venv`` (so imports resolve to its site-packages)."""
    paths = [str(WHEEL_TESTS / name) for name in files]
    session.run(str(venv / "bin" / "pytest"), *paths, env={**_venv_env(venv), **(env or {})}, external=True)


def _guarded_tests(
    session: nox.Session, venv: Path, leaf: str, *args: str, env: dict[str, str | None] | None = None
) -> None:
    """Tests from the source tree that import only the installed wheels, with ``venv``'s pytest.

    pytest runs in importlib mode (no sys.path insertion) and wheel_tests/plugins/installed_guard.py fails the run
    unless ``data_designer.slurm.<leaf>`` comes from the venv and no data_designer.slurm module came from elsewhere.
    """
    session.run(
        str(venv / "bin" / "pytest"),
        *("-p", "installed_guard", *args),
        env={**_venv_env(venv), "DDS_LEAF": leaf, "PYTHONPATH": str(WHEEL_TESTS / "plugins"), **(env or {})},
        external=True,
    )


# --- workspace sessions --------------------------------------------------------------------------------------------


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check over the whole repo, the public-imports check, and ``bash -n`` on shell scripts.

    Each package's pyproject bans upward imports (contracts <- planner <- runtime <- services/cli), so the
    dependency direction is linted here too. ``scripts/check-public-imports`` fails on any import of a package's
    ``_private`` modules from outside that package (another package's src or tests, tests/, benchmarks/,
    wheel_tests/, fern/, scripts/, this noxfile, the user-facing docs).
    """
    _sync(session)
    _uv_run(session, "ruff", "check", ".")
    _uv_run(session, "ruff", "format", "--check", ".")
    _uv_run(session, "python", "scripts/check-public-imports")
    scripts = [ROOT / ".ci" / "run", *sorted((ROOT / "scripts").glob("*"))]
    for script in scripts:
        if script.is_file() and script.read_text(encoding="utf-8", errors="replace").startswith("#!/usr/bin/env bash"):
            session.run("bash", "-n", str(script.relative_to(ROOT)), external=True)


def _typecheck_groups() -> list[list[str]]:
    """mypy invocations: one for all sources, one per test-like directory.

    Test directories have no ``__init__.py``, so two ``conftest.py`` (or two ``test_x.py``) would be the same
    top-level module to mypy; checking each directory on its own keeps every module name unique.
    """
    sources = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("packages/*/src") if p.is_dir())
    groups = [[*sources, "noxfile.py"]]
    for pattern in ("packages/*/tests", "tests", "wheel_tests", "benchmarks", "fern"):
        for directory in sorted(ROOT.glob(pattern)):
            if directory.is_dir() and any(directory.rglob("*.py")):
                groups.append([str(directory.relative_to(ROOT))])
    return groups


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over sources, all test directories, benchmarks, fern and this noxfile.

    Config: root pyproject [tool.mypy]. Covers packages/*/src, packages/*/tests, tests, wheel_tests, benchmarks,
    fern (whichever exist); every directory is checked even after one fails.
    """
    _sync(session)
    failed: list[str] = []
    for group in _typecheck_groups():
        try:
            _uv_run(session, "mypy", *group)
        except CommandFailed:  # keep going: one run shows every directory's errors
            failed.append(" ".join(group))
    if failed:
        session.error("mypy found errors in: " + "; ".join(failed))


@nox.session
def tests(session: nox.Session) -> None:
    """pytest over packages/*/tests and tests/ in the workspace venv (all markers by default).

    The ``cluster`` tests run too; they manage the local Slurm cluster themselves. Pass pytest arguments after
    ``--``, e.g. ``uv run nox -s tests -- -m "not cluster"``.
    """
    paths = [str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("packages/*/tests")) if p.is_dir()]
    if (ROOT / "tests").is_dir():
        paths.append("tests")
    if not paths:
        session.error("no test directories: expected packages/*/tests and/or tests/")
    _sync(session)
    _uv_run(session, "pytest", *paths, *session.posargs)


@nox.session
def build(session: nox.Session) -> None:
    """Four wheels and four sdists into a clean dist/, checked with ``twine check --strict`` and test_dist.py.

    ``uv build`` builds each wheel from its sdist; wheel_tests/test_dist.py then checks the artifacts (empty
    namespaces, py.typed, exact sibling pins, the CLI entry point, sdists carrying sources and tests).
    """
    _sync(session)
    shutil.rmtree(DIST, ignore_errors=True)
    session.run("uv", "build", "--all-packages", "--out-dir", str(DIST), external=True)
    artifacts = sorted(str(p.relative_to(ROOT)) for p in [*DIST.glob("*.whl"), *DIST.glob("*.tar.gz")])
    _uv_run(session, "twine", "check", "--strict", *artifacts)
    _require_current_dist(session)
    _uv_run(session, "pytest", str((WHEEL_TESTS / "test_dist.py").relative_to(ROOT)), env={"DDS_WHEEL_DIST": str(DIST)})


# --- sessions in fresh venvs built from dist/ -----------------------------------------------------------------------


@nox.session(requires=["build"])
def install_base(session: nox.Session) -> None:
    """Fresh venv: the top-leaf wheel adds ``data-designer slurm`` and uninstalls without a trace.

    Host + contracts + planner + runtime wheels first: no ``slurm`` command. Then ``pip install`` of the
    data-designer-slurm wheel: ``slurm`` is listed and runs, namespaces intact. Then ``pip uninstall``: the
    command is gone and no file, cache or dist-info of that distribution is left.
    """
    _require_current_dist(session)
    venv = _fresh_venv(session, "venv", pip=True)
    wheels = [str(_wheel(name)) for name in DISTRIBUTIONS if name != TOP_LEAF]
    _uv_pip_install(session, venv, HOST_REQUIREMENT, *wheels, "pytest")
    _wheel_tests(session, venv, "test_base_without_leaf.py")

    # The top leaf's dependencies are all present now: install it offline, as a user would with pip.
    _pip(session, venv, "install", "--progress-bar=off", "--quiet", "--no-index", str(_wheel(TOP_LEAF)))
    _wheel_tests(session, venv, "test_leaf_installed.py")

    _pip(session, venv, "uninstall", "--yes", TOP_LEAF)
    _wheel_tests(session, venv, "test_leaf_uninstalled.py")


@nox.session(requires=["build"])
def install_extra(session: nox.Session) -> None:
    """Fresh venv with pip: the host's ``slurm`` extra resolves to our wheels, and ``--help`` stays light.

    Runs ``pip install --pre --find-links dist "data-designer[slurm]==<host>"`` (what users run), proves by RECORD
    hashes that all four installed distributions are the wheels in dist/ (not PyPI's release of the same name),
    that ``data-designer slurm`` works, and that no ``slurm ... --help`` imports the runtime, the host's config
    package, pandas, numpy or pyarrow.
    """
    _require_current_dist(session)
    venv = _fresh_venv(session, "venv", pip=True)
    _pip(session, venv, "install", "--progress-bar=off", "--pre", "--find-links", str(DIST), EXTRA_REQUIREMENT)
    _pip(session, venv, "install", "--progress-bar=off", "pytest")
    _wheel_tests(session, venv, "test_record_matches.py", "test_leaf_installed.py", "test_import_cost.py")


@nox.session(requires=["build"])
def install_leaf(session: nox.Session) -> None:
    """Fresh venvs with contracts alone, then contracts + planner, each running its package's own tests.

    The tests run against the installed wheels (not src/), and each venv proves the host, typer and the
    runtime are absent: the dependency direction holds for real installs.
    """
    _require_current_dist(session)
    stacks = {
        "contracts": ["data-designer-slurm-contracts"],
        "planner": ["data-designer-slurm-contracts", "data-designer-slurm-planner"],
    }
    for leaf, names in stacks.items():
        package_tests = ROOT / "packages" / names[-1] / "tests"
        if not package_tests.is_dir():
            session.error(f"{package_tests.relative_to(ROOT)} does not exist: nothing to run against the wheel")
        venv = _fresh_venv(session, leaf)
        _uv_pip_install(session, venv, *(str(_wheel(name)) for name in names), "pytest", "hypothesis")
        _wheel_tests(session, venv, "test_leaf_alone.py", env={"DDS_LEAF": leaf})
        _guarded_tests(session, venv, leaf, str(package_tests.relative_to(ROOT)))


@nox.session(requires=["build"])
def deps(session: nox.Session) -> None:
    """Each wheel declares exactly what it imports, contracts and planner stay light, ``slurm --help`` loads no pyarrow.

    A fresh venv gets the four wheels with every extra they declare (the top leaf's ``plot``, the runtime's ``host``
    and ``testing``) and their dependencies; ``scripts/check-deps`` then maps every import in each wheel to the
    distribution installed there and compares with the wheel's ``Requires-Dist`` (its docstring has the rules).
    """
    _require_current_dist(session)
    venv = _fresh_venv(session, "venv")
    _uv_pip_install(
        session,
        venv,
        *(str(_wheel(name)) for name in DISTRIBUTIONS),
        f"{TOP_LEAF}[plot]",
        "data-designer-slurm-runtime[host,testing]",
    )
    _uv_run(session, "python", "scripts/check-deps", "--dist", str(DIST), "--python", str(venv / "bin" / "python"))


# --- the runtime without the top package, the host range at both ends, the release ----------------------------------

RUNTIME_HOST_TESTS = 30
"""The runtime's tests marked ``host`` (they start the supervisor, which refuses to run without the host).

install_runtime deselects exactly these; the installed_guard plugin fails the run on any other count, so adding or
removing a host test means updating this number, and a marker expression cannot deselect everything silently.
"""


def _locked_version(name: str) -> str:
    """The version of ``name`` that uv.lock pins (the workspace venv's)."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    for package in lock.get("package", []):
        if package.get("name") == name:
            return str(package["version"])
    raise RuntimeError(f"{name} is not in uv.lock")


@nox.session(requires=["build"])
def install_runtime(session: nox.Session) -> None:
    """Fresh venv: contracts + planner + runtime wheels, no top package, no host: the runtime's tests pass, no Typer.

    test_leaf_alone.py (``DDS_LEAF=runtime``) proves exactly those three are installed, from dist/, and that the
    host, Typer, services and cli are not importable. The runtime's own tests then run against the installed wheels
    (importlib mode and the installed_guard plugin, as in install_leaf) with ``-m "not host"``; the guard also
    requires exactly RUNTIME_HOST_TESTS deselected tests, each marked ``host``.
    """
    _require_current_dist(session)
    names = [name for name in DISTRIBUTIONS if name != TOP_LEAF]
    package_tests = ROOT / "packages" / names[-1] / "tests"
    venv = _fresh_venv(session, "venv")
    # Test dependencies only: cryptography (test_runtime_preflight makes a self-signed TLS certificate with it), and
    # the two engines test_runtime_merge_page_index reads spliced files back with (page-index pruning in DataFusion),
    # at the lock's versions.
    engines = [f"{name}=={_locked_version(name)}" for name in ("duckdb", "datafusion")]
    _uv_pip_install(
        session, venv, *(str(_wheel(name)) for name in names), "pytest", "hypothesis", "cryptography", *engines
    )
    _wheel_tests(session, venv, "test_leaf_alone.py", env={"DDS_LEAF": "runtime"})
    _guarded_tests(
        session,
        venv,
        "runtime",
        *("-m", "not host", str(package_tests.relative_to(ROOT))),
        env={"DDS_EXPECT_DESELECTED": str(RUNTIME_HOST_TESTS)},
    )


# The root tests that drive the host's own API (its CLI, its generator) against our installed wheels.
HOST_API_TESTS = (
    "tests/test_host_worker.py",
    "tests/test_host_against_test_server.py",
    "tests/test_host_cli_errors.py",
)


def _host_range() -> SpecifierSet:
    """The top package's requirement on the host (``data-designer>=1.0.0rc1,<2``), read from its pyproject."""
    pyproject = ROOT / "packages" / TOP_LEAF / "pyproject.toml"
    dependencies = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    host = [r for r in map(Requirement, dependencies) if r.name == "data-designer" and r.marker is None]
    if len(host) != 1:
        raise RuntimeError(f"{pyproject}: expected one unconditional data-designer requirement, found {host!r}")
    return host[0].specifier


def _lowest_host(host_range: SpecifierSet) -> str:
    """The range's lower bound: the lowest host release we claim (the first with CLI extension discovery)."""
    lower = [spec.version for spec in host_range if spec.operator == ">="]
    if len(lower) != 1:
        raise RuntimeError(f"the host range {host_range} needs exactly one '>=' lower bound to test, found {lower!r}")
    return lower[0]


def _host_releases(session: nox.Session, venv: Path) -> list[Version]:
    """Every ``data-designer`` release on the index, pre-releases included (``pip index versions --json``)."""
    output = session.run(
        str(venv / "bin" / "python"),
        *("-m", "pip", "index", "versions", "--pre", "--json", "data-designer"),
        silent=True,
        stderr=subprocess.DEVNULL,
        external=True,
    )
    return [Version(v) for v in json.loads(str(output))["versions"]]


def _newest_host(session: nox.Session, venv: Path, host_range: SpecifierSet) -> str:
    """The newest ``data-designer`` release on the index within ``host_range`` (pre-releases included).

    Read from ``pip index versions --json`` (the versions pip could install here, yanked ones aside), independently
    of the resolver whose choice it then checks.
    """
    versions = _host_releases(session, venv)
    within = [v for v in versions if host_range.contains(v, prereleases=True)]
    if not within:
        session.error(f"the index has no data-designer release within {host_range}: {sorted(map(str, versions))}")
    return str(max(within))


def _host_range_check(session: nox.Session, venv: Path, expected: str, end: str, host_range: SpecifierSet) -> None:
    """Assert the installed host is ``expected``, then run discovery and the host-API tests in ``venv``."""
    installed = session.run(
        str(venv / "bin" / "python"),
        *("-c", "import importlib.metadata as m; print(m.version('data-designer'))"),
        silent=True,
        stderr=subprocess.DEVNULL,
        external=True,
    )
    found = str(installed).strip()
    session.log(f"data-designer {found} installed: the {end} release within {host_range} is {expected}")
    if Version(found) != Version(expected):
        session.error(f"data-designer {found} is installed, but the {end} release within {host_range} is {expected}")
    _wheel_tests(session, venv, "test_record_matches.py", "test_leaf_installed.py")
    _guarded_tests(session, venv, "runtime", *HOST_API_TESTS)


def _install_with_host(session: nox.Session, venv: Path, host: str, *pip_args: str) -> None:
    _pip(
        session,
        venv,
        *("install", "--progress-bar=off", "--quiet", "--pre", "--find-links", str(DIST), *pip_args),
        host,
        f"{TOP_LEAF}=={VERSION}",
        "pytest",
    )


@nox.session(requires=["build"])
def host_lowest(session: nox.Session) -> None:
    """Fresh venv with pip: our four wheels with the LOWEST host the top package's range allows (its lower bound).

    ``pip install --pre --find-links dist data-designer==<lower bound> data-designer-slurm==<VERSION>``; the
    installed host must be exactly that release; then test_record_matches.py and test_leaf_installed.py (the
    installed files are dist/'s, the host discovers ``slurm``) and the root tests that drive the host's API
    (HOST_API_TESTS, importing only installed wheels through installed_guard). Last, the newest release below the
    bound, with our wheels beside it, must not know ``data-designer slurm``: the bound is the first release that
    discovers extensions.
    """
    _require_current_dist(session)
    host_range = _host_range()
    lowest = _lowest_host(host_range)
    venv = _fresh_venv(session, "venv", pip=True)
    _install_with_host(session, venv, f"data-designer=={lowest}")
    _host_range_check(session, venv, lowest, "lowest", host_range)

    # The bound is the lowest release that discovers extensions: the release just below it, with our four wheels
    # installed beside it (--no-deps: only discovery is in question), has no `slurm` command.
    below = [v for v in _host_releases(session, venv) if v < Version(lowest)]
    if not below:
        session.log(f"no data-designer release below {lowest} on the index: nothing to compare the bound with")
        return
    previous = str(max(below))
    old = _fresh_venv(session, "below", pip=True)
    _pip(session, old, "install", "--progress-bar=off", "--quiet", f"data-designer=={previous}")
    _pip(
        session, old, "install", "--progress-bar=off", "--quiet", "--no-deps", *(str(_wheel(n)) for n in DISTRIBUTIONS)
    )
    done = subprocess.run(
        [str(old / "bin" / "data-designer"), "slurm", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **{k: v for k, v in _venv_env(old).items() if v is not None}},
        check=False,
    )
    if done.returncode == 0 or "No such command" not in done.stdout + done.stderr:
        session.error(
            f"data-designer {previous} (below the range's lower bound {lowest}) runs `data-designer slurm`: the bound "
            f"is not the lowest release that discovers extensions; lower it (exit {done.returncode})"
        )
    session.log(f"data-designer {previous}, the release below {lowest}, has no `slurm` command: the bound is tight")


@nox.session(requires=["build"])
def host_newest(session: nox.Session) -> None:
    """Fresh venv with pip: our four wheels with the NEWEST host release on the index within the range.

    The newest release within the range is read from ``pip index versions --pre --json``; pip then resolves
    ``data-designer<range>`` with ``--upgrade --pre`` and the installed host must be that release; then the same
    tests as host_lowest.
    """
    _require_current_dist(session)
    host_range = _host_range()
    venv = _fresh_venv(session, "venv", pip=True)
    newest = _newest_host(session, venv, host_range)
    _install_with_host(session, venv, f"data-designer{host_range}", "--upgrade")
    _host_range_check(session, venv, newest, "newest", host_range)


@nox.session(requires=["build"])
def release_check(session: nox.Session) -> None:
    """The four wheels and sdists in dist/ release as one: rebuildable, valid, lockstep, readable, documented.

    ``twine check --strict`` on all eight artifacts, ``check-wheel-contents`` on the four wheels (no code ignored:
    our PEP 420 namespaces pass as they are), then wheel_tests/test_release.py in the workspace venv: each sdist
    rebuilds a wheel with the same RECORD as dist/'s, sdist and wheel metadata agree and pin siblings exactly (the
    build session's test_dist.py checks the wheels' pins), each README renders to HTML as the index renders it,
    and every version of ours in the docs is this release's.
    """
    _require_current_dist(session)
    _sync(session)
    wheels = sorted(str(p.relative_to(ROOT)) for p in DIST.glob("*.whl"))
    sdists = sorted(str(p.relative_to(ROOT)) for p in DIST.glob("*.tar.gz"))
    _uv_run(session, "twine", "check", "--strict", *wheels, *sdists)
    _uv_run(session, "check-wheel-contents", *wheels)
    release_tests = (WHEEL_TESTS / "test_release.py").relative_to(ROOT)
    _uv_run(session, "pytest", str(release_tests), env={"DDS_WHEEL_DIST": str(DIST)})


def _fern_cli(session: nox.Session) -> Path:
    """The ``fern`` binary of the fern-api version pinned in fern/fern.config.json, npm-installed once under .nox/tools."""
    version = str(json.loads((ROOT / "fern" / "fern.config.json").read_text(encoding="utf-8")).get("version", ""))
    if not version or version == "*":
        session.error(f"fern/fern.config.json must pin an exact fern-api version, not {version!r}")
    prefix = TOOLS / f"fern-api-{version}"
    binary = prefix / "node_modules" / ".bin" / "fern"
    if not binary.exists():
        session.run(
            "npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), f"fern-api@{version}", external=True
        )
    return binary


@nox.session(requires=["build"])
def docs(session: nox.Session) -> None:
    """Docs are code: ``fern check`` plus every command on every page, run against the built wheels.

    A fresh venv is made exactly as the docs tell users (``pip install --pre --find-links dist
    "data-designer[slurm]==<host>"``); fern/check_docs.py then runs ``fern check --local`` with the pinned fern-api
    and executes the pages' commands in that venv.
    """
    checker = ROOT / "fern" / "check_docs.py"
    for required in (ROOT / "fern" / "fern.config.json", checker):
        if not required.is_file():
            session.error(f"{required.relative_to(ROOT)} does not exist yet (the docs are written separately)")
    _require_current_dist(session)
    fern = _fern_cli(session)
    venv = _fresh_venv(session, "venv", pip=True)
    _pip(session, venv, "install", "--progress-bar=off", "--pre", "--find-links", str(DIST), EXTRA_REQUIREMENT)
    _sync(session)
    _uv_run(
        session,
        "python",
        str(checker.relative_to(ROOT)),
        "--venv",
        str(venv),
        "--dist",
        str(DIST),
        "--fern-bin",
        str(fern),
        env={"FERN_NO_VERSION_REDIRECTION": "true", "FERN_DISABLE_TELEMETRY": "true"},
    )


REAL_CLUSTER_ENABLE = "DDSLURM_REAL_CLUSTER"
REAL_CLUSTER_PROFILE = "DDSLURM_REAL_PROFILE"
REAL_CLUSTER_VENV = "DDSLURM_REAL_VENV"


@nox.session(default=False)
def real_cluster(session: nox.Session) -> None:
    """A 4-child benchmark end to end on the cluster a profile names, from the built wheels (not in the default list).

    Needs ``DDSLURM_REAL_CLUSTER=1`` and ``DDSLURM_REAL_PROFILE=/path/profile.yaml`` (it fails, never skips, without
    them). Builds dist/ unless it is current, makes a fresh venv (``.nox/fresh/real_cluster-venv``, or
    ``$DDSLURM_REAL_VENV``, which must be on the shared filesystem: the profile's ``compute_python.interpreter`` is its
    ``bin/python``), installs ``data-designer[slurm]`` and the plot extra from dist/ as users do, and runs
    ``scripts/real-cluster-benchmark`` with it: ``benchmark run``, a bounded poll of ``benchmark status``,
    ``benchmark analyze --check --format json --plot``; it fails unless every child succeeded and the analysis is
    complete. ``DDSLURM_REAL_ENGINE=test-server`` uses the in-tree test server (``.ci/run`` does so on the local
    cluster), else vLLM with a small model; the script's docstring lists the other variables.
    """
    missing = [
        f"{name}={want}"
        for name, want in ((REAL_CLUSTER_ENABLE, "1"), (REAL_CLUSTER_PROFILE, "/path/profile.yaml"))
        if not os.environ.get(name) or (name == REAL_CLUSTER_ENABLE and os.environ[name] != "1")
    ]
    if missing:
        session.error(
            f"real_cluster runs a benchmark on a real Slurm cluster: set {' and '.join(missing)} "
            "(see scripts/real-cluster-benchmark)"
        )
    profile = Path(os.environ[REAL_CLUSTER_PROFILE]).resolve()
    if not profile.is_file():
        session.error(
            f"{REAL_CLUSTER_PROFILE}={profile} is not a file: write one with 'data-designer slurm profile init'"
        )
    if _dist_problems():
        build(session)
    _require_current_dist(session)
    if os.environ.get(REAL_CLUSTER_VENV):
        venv = Path(os.environ[REAL_CLUSTER_VENV]).resolve()
        shutil.rmtree(venv, ignore_errors=True)
        session.run("uv", "venv", "--quiet", "--python", PYTHON, "--seed", str(venv), external=True)
    else:
        venv = _fresh_venv(session, "venv", pip=True)
    plot_requirement = f"{TOP_LEAF}[plot]=={VERSION}"
    _pip(
        session,
        venv,
        "install",
        "--progress-bar=off",
        "--quiet",
        "--pre",
        "--find-links",
        str(DIST),
        EXTRA_REQUIREMENT,
        plot_requirement,
    )
    script = ROOT / "scripts" / "real-cluster-benchmark"
    session.run(
        str(venv / "bin" / "python"),
        str(script),
        "--profile",
        str(profile),
        *session.posargs,
        env=_venv_env(venv),
        external=True,
    )


@nox.session
def benchmarks(session: nox.Session) -> None:
    """Quick benchmarks: ``python benchmarks/run.py --quick`` in the workspace venv (more arguments after ``--``)."""
    runner = ROOT / "benchmarks" / "run.py"
    if not runner.is_file():
        session.error("benchmarks/run.py does not exist yet (the benchmarks are written separately)")
    _sync(session)
    _uv_run(session, "python", str(runner.relative_to(ROOT)), "--quick", *session.posargs)


# --- the real vLLM parser: every argv the planner renders, parsed by each supported vLLM (not in the default list) ---

VLLM_PARSER_DIR = ROOT / ".nox" / "vllm-parser"
VLLM_PARSER_WHEELS = "DDSLURM_VLLM_WHEELS"
VLLM_PARSER_TORCH = "DDSLURM_VLLM_TORCH"
VLLM_PARSER_DEFAULT_TORCH = "torch==2.13.0"
"""The torch every vLLM venv gets: the CPU build where the machine offers one to pip (this project's machines have
2.13.0 for Python 3.11 on disk), else PyPI's default build. vLLM 0.33 pins 2.14.0, whose CPU build is not on PyPI;
its ``vllm serve`` parse path uses only torch's Python API, so 2.13.0 serves both (``$DDSLURM_VLLM_TORCH`` overrides)."""

VLLM_PARSE_REQUIREMENTS = frozenset(
    {
        # What `vllm serve`'s parse path imports (main.py, serve.py, make_arg_parser, validate_parsed_serve_args,
        # setup_server, AsyncEngineArgs.from_cli_args), by vLLM's requirement names; each gets vLLM's own specifier.
        # The rest of vLLM's requirements are CUDA kernels (flashinfer, nvidia-*, cutlass, tilelang, quack,
        # humming), media and model tooling the parse path never imports (torchvision, opencv, numba, mistral_common)
        # or servers beside the HTTP one (mcp, anthropic, opentelemetry): several GB that a parse check does not need.
        "aiohttp",
        "apache-tvm-ffi",
        "cachetools",
        "cbor2",
        "certifi",
        "cloudpickle",
        "fastapi",
        "filelock",
        "huggingface-hub",
        "llguidance",
        "msgspec",
        "multidict",
        "numpy",
        "openai",
        "orjson",
        "oss-harmony",
        "partial-json-parser",
        "pillow",
        "prometheus-client",
        "psutil",
        "py-cpuinfo",
        "pybase64",
        "pydantic",
        "pyyaml",
        "pyzmq",
        "regex",
        "requests",
        "safetensors",
        "starlette",
        "tokenizers",
        "tqdm",
        "transformers",
        "typing-extensions",
        "watchfiles",
    }
)
VLLM_PARSE_NO_DEPS = frozenset({"xgrammar"})
"""Imported by the parse path but installed without its dependencies: xgrammar requires triton (1 GB, GPU only),
which nothing here imports; its other requirements are all in VLLM_PARSE_REQUIREMENTS."""


def _canonical_name(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _vllm_parse_requirements(requires_dist: list[str]) -> tuple[list[str], list[str], str | None]:
    """(requirements, no-deps requirements, torch pin) of a vLLM, from its wheel's ``Requires-Dist``.

    Only requirements without an extra and whose marker holds here are kept; a name of VLLM_PARSE_REQUIREMENTS or
    VLLM_PARSE_NO_DEPS that this vLLM does not require is simply not installed (vLLM 0.32 has no orjson).
    """
    wanted: list[str] = []
    no_deps: list[str] = []
    torch_pin: str | None = None
    for line in requires_dist:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = _canonical_name(requirement.name)
        if name == "torch":
            torch_pin = str(requirement.specifier)
        elif name in VLLM_PARSE_REQUIREMENTS:
            extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
            wanted.append(f"{requirement.name}{extras}{requirement.specifier}")
        elif name in VLLM_PARSE_NO_DEPS:
            no_deps.append(f"{requirement.name}{requirement.specifier}")
    return wanted, no_deps, torch_pin


def _uv_pip(session: nox.Session, venv: Path, *args: str) -> None:
    session.run("uv", "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), *args, external=True)


def _vllm_parser_venv(session: nox.Session, version: str) -> Path:
    """A fresh venv with vLLM ``version`` (no dependencies) and what its ``vllm serve`` parse path imports.

    pip picks torch (the CPU build where the machine offers one to pip) and uv installs it; then uv installs vLLM with
    ``--no-deps`` (from ``$DDSLURM_VLLM_WHEELS`` alone when set, else from the index), then the parse path's
    requirements with the specifiers of the installed vLLM's metadata, then VLLM_PARSE_NO_DEPS with ``--no-deps``.
    uv's cache keeps every download, so a second run downloads nothing.
    """
    try:
        venv = _fresh_venv(session, version, pip=True)
    except CommandFailed:
        session.error(
            "vllm_parser: cannot make a venv with pip (uv seeds it from the index): no network? With no network, "
            f"run with UV_OFFLINE=1 (uv's cache from an earlier run) and {VLLM_PARSER_WHEELS}"
        )
    torch = os.environ.get(VLLM_PARSER_TORCH, VLLM_PARSER_DEFAULT_TORCH)
    try:
        # pip picks the torch file (the machine's CPU build where its pip configuration offers one); uv installs
        # it, so the second run copies it from uv's cache instead of unpacking 750 MB again.
        picked = session.run(
            str(venv / "bin" / "python"),
            *("-m", "pip", "install", "--quiet", "--dry-run", "--no-deps", "--report", "-", torch),
            silent=True,
            stderr=subprocess.DEVNULL,
            external=True,
        )
        (item,) = json.loads(str(picked))["install"]
        _uv_pip(session, venv, f"torch @ {item['download_info']['url']}")
    except (CommandFailed, ValueError, KeyError):
        session.error(f"vllm_parser: cannot install {torch} ({VLLM_PARSER_TORCH}): no network?")
    wheels = [d for d in os.environ.get(VLLM_PARSER_WHEELS, "").split(os.pathsep) if d]
    source = ["--no-index", *(arg for d in wheels for arg in ("--find-links", d))] if wheels else []
    try:
        _uv_pip(session, venv, "--no-deps", *source, f"vllm=={version}")
    except CommandFailed:
        where = (
            f"no vllm-{version}-*.whl in {os.pathsep.join(wheels)} ({VLLM_PARSER_WHEELS})"
            if wheels
            else ("not from the package index (no network?)")
        )
        session.error(
            f"vllm_parser: cannot install vllm=={version}: {where}. Put the wheel in a directory and set "
            f"{VLLM_PARSER_WHEELS}=/that/dir, or run where the package index is reachable"
        )
    output = session.run(
        str(venv / "bin" / "python"),
        *("-c", "import importlib.metadata as m, json; print(json.dumps(m.requires('vllm') or []))"),
        silent=True,
        external=True,
    )
    wanted, no_deps, torch_pin = _vllm_parse_requirements(json.loads(str(output).strip().splitlines()[-1]))
    if torch_pin and torch != f"torch{torch_pin}":
        session.log(f"vllm {version} pins torch{torch_pin}; its parse check runs with {torch} ({VLLM_PARSER_TORCH})")
    try:
        _uv_pip(session, venv, *wanted)
        if no_deps:
            _uv_pip(session, venv, "--no-deps", *no_deps)
    except CommandFailed:
        session.error(
            f"vllm_parser: cannot install what vllm {version}'s parse path imports ({len(wanted) + len(no_deps)} "
            "packages from the package index): no network?"
        )
    return venv


def _without_network() -> list[str]:
    """``unshare --net`` where it works (root on Linux): the check then runs with no network at all, not even
    loopback, which proves it needs none; elsewhere nothing (the check replaces the server socket either way)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    probe = subprocess.run([unshare, "--net", "true"], capture_output=True, timeout=30, check=False)
    return [unshare, "--net"] if probe.returncode == 0 else []


def _du(path: Path) -> str:
    total = sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return f"{total / 2**20:,.0f} MiB"


@nox.session(default=False)
def vllm_parser(session: nox.Session) -> None:
    """Every vLLM argv the planner renders, through each supported vLLM's real ``vllm serve`` parser, on the CPU.

    ``tests/vllm_parser/cases.py`` (workspace venv) writes the checks: every vLLM ``argv`` and ``rank_argv`` of the
    planner's golden plans, bound with sample addresses, its table of awkward engine args rendered by
    ``render_engine_args``, controls that must fail, and a sweep of every option of the planner's flag data, each
    with the values vLLM must parse. Then for each version of ``serve_flag_versions()``
    a fresh venv (``.nox/fresh/vllm_parser-<version>``) gets that vLLM without dependencies, the CPU torch and only
    what the parse path imports (VLLM_PARSE_REQUIREMENTS, with the vLLM wheel's own specifiers), and
    ``tests/vllm_parser/check.py`` runs there with ``VLLM_TARGET_DEVICE=cpu``: vLLM's parser as main.py builds it,
    ``validate_parsed_serve_args``, ``ServeSubcommand.cmd`` up to its launcher (the API server's ``setup_server``
    up to the socket), ``AsyncEngineArgs.from_cli_args``; then every expected value. Nothing binds or connects; where
    ``unshare --net`` works the check runs with no network at all.

    Not in the default list. vLLM wheels come from ``$DDSLURM_VLLM_WHEELS`` (directories, ``:``-separated) or the
    package index; uv's cache keeps what it downloads (with it, ``UV_OFFLINE=1`` and ``$DDSLURM_VLLM_WHEELS`` it runs
    with no network at all). It fails, never skips, when a vLLM cannot be installed.
    Pass versions after ``--`` to check only those (``nox -s vllm_parser -- 0.33.0``).
    """
    _sync(session)
    VLLM_PARSER_DIR.mkdir(parents=True, exist_ok=True)
    cases = VLLM_PARSER_DIR / "cases.json"
    chosen = [arg for version in session.posargs for arg in ("--version", version)]
    _uv_run(session, "python", "tests/vllm_parser/cases.py", "--out", str(cases), *chosen)
    data = json.loads(cases.read_text(encoding="utf-8"))
    versions: list[str] = data["versions"]
    if not versions:
        session.error("vllm_parser: the planner's serve_flag_versions() is empty: no vLLM to check")
    env: dict[str, str | None] = {
        "VLLM_TARGET_DEVICE": "cpu",
        "CUDA_VISIBLE_DEVICES": "",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        # The plans' models are not here: offline mode would make from_cli_args resolve each to a local snapshot.
        "HF_HUB_OFFLINE": None,
        "HF_HOME": str(VLLM_PARSER_DIR / "hf-home"),
        "VLLM_CONFIG_ROOT": str(VLLM_PARSER_DIR / "vllm-config"),
        "VLLM_CACHE_ROOT": str(VLLM_PARSER_DIR / "vllm-cache"),
        "VLLM_LOGGING_LEVEL": "WARNING",
    }
    isolate = _without_network()
    session.log("the checks run without network (unshare --net)" if isolate else "unshare --net is not available here")
    failed: list[str] = []
    summary: list[str] = []
    for version in versions:
        venv = _vllm_parser_venv(session, version)
        report = VLLM_PARSER_DIR / f"report-{version}.json"
        report.unlink(missing_ok=True)
        script = ROOT / "tests" / "vllm_parser" / "check.py"
        try:
            session.run(
                *isolate,
                str(venv / "bin" / "python"),
                *(str(script), "--cases", str(cases), "--version", version, "--report", str(report)),
                env={**_venv_env(venv), **env},
                external=True,
            )
        except CommandFailed:
            failed.append(version)
        results = json.loads(report.read_text(encoding="utf-8"))["results"] if report.is_file() else []
        passed = sum(1 for r in results if r["status"] == "ok")
        kinds: dict[str, int] = {}
        for check in data["checks"]:
            if check["version"] == version:
                kinds[check["kind"]] = kinds.get(check["kind"], 0) + 1
        counts = ", ".join(f"{kind} {count}" for kind, count in kinds.items())
        summary.append(f"vllm {version}: {passed} of {len(results)} argvs passed ({counts}; venv {_du(venv)})")
    for line in summary:
        session.log(line)
    if failed:
        session.error(f"vllm_parser: the real vllm serve parser refused or misread argvs of vllm {', '.join(failed)}")
