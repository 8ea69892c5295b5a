"""Sessions that prove data-designer-slurm: lint, types, tests, wheels, installs from wheels, docs, benchmarks.

CI runs them all with ``bash scripts/test``; run one with ``uv run nox -s NAME`` (arguments after ``--`` go to
pytest in ``tests``, to ``benchmarks/run.py`` in ``benchmarks``).

- lint, typecheck, tests, build and benchmarks run in the uv workspace venv (``.venv``, exactly ``uv.lock``).
- install_base, install_extra, install_leaf, deps and docs each create brand-new venvs under ``.nox/fresh/`` (removed
  first, so ``--reuse-venv`` cannot weaken them), install only built wheels from ``dist/`` for our four
  distributions (third-party packages and the host ``data-designer`` come from PyPI), and run the checks in
  ``wheel_tests/`` with that venv's own pytest.

real_cluster (not in the default list; needs DDSLURM_REAL_CLUSTER=1 and DDSLURM_REAL_PROFILE) runs a benchmark on a
real cluster from the built wheels; ``.ci/run`` runs it on the local cluster after ``bash scripts/test``.

uv never downloads an interpreter here: ``UV_PYTHON_DOWNLOADS=never``, and venvs use the machine's Python 3.11.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tomllib
import zipfile
from pathlib import Path

import nox
from nox.command import CommandFailed

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
    "deps",
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
        leaf_env: dict[str, str | None] = {"DDS_LEAF": leaf}
        _wheel_tests(session, venv, "test_leaf_alone.py", env=leaf_env)
        # The package's own tests, from the source tree but importing only the installed wheel: pytest runs in
        # importlib mode (no sys.path insertion) and the guard plugin fails the run if any data_designer.slurm
        # module was imported from outside the venv.
        session.run(
            str(venv / "bin" / "pytest"),
            "-p",
            "installed_guard",
            str(package_tests.relative_to(ROOT)),
            env={**_venv_env(venv), **leaf_env, "PYTHONPATH": str(WHEEL_TESTS / "plugins")},
            external=True,
        )


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
