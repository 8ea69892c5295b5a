"""The benchmark protocol: what a ``bench_*.py`` module exposes and what the runner prints.

A benchmark module defines one module-level ``BENCHMARK = Benchmark(...)``. Its ``run`` receives a
:class:`RunContext` and returns :class:`Figure` values: a measured number, its unit and, where the
project has one, the :class:`Target` it should meet. The runner prints every figure with its target
and whether it is met; a missed target never fails the run (speed and memory are reported, not
asserted), but an exception raised by ``run`` does.

Benchmarks that need something outside the workspace (the local Slurm cluster, ``uv``) declare it
as a :class:`Prerequisite`. The runner skips a benchmark whose prerequisite is missing, and under
``CI=true`` reports it as an error instead, so nothing silently stops running in CI.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True)
class Target:
    """A bound a figure should stay within: ``value <= bound`` or ``value >= bound``."""

    op: Literal["<=", ">="]
    bound: float

    @classmethod
    def at_most(cls, bound: float) -> Target:
        return cls("<=", bound)

    @classmethod
    def at_least(cls, bound: float) -> Target:
        return cls(">=", bound)

    def met_by(self, value: float) -> bool:
        return value <= self.bound if self.op == "<=" else value >= self.bound

    def __str__(self) -> str:
        return f"{self.op} {format_number(self.bound)}"


@dataclass(frozen=True)
class Figure:
    """One measured number: ``name`` is unique within its benchmark; ``note`` explains or lists details."""

    name: str
    value: float
    unit: str
    target: Target | None = None
    note: str = ""

    @property
    def met(self) -> bool | None:
        """Whether the target is met; None when the figure has no target."""
        return None if self.target is None else self.target.met_by(self.value)


@dataclass(frozen=True)
class Prerequisite:
    """Something a benchmark needs from its surroundings; ``check`` says why it is missing, or None."""

    name: str
    description: str
    check: Callable[[], str | None]


@dataclass(frozen=True)
class RunContext:
    """What the runner hands to a benchmark.

    ``scratch`` is a fresh empty directory removed after the benchmark; ``cache`` persists between
    runs (for expensive fixtures such as a host-only virtual environment) and lies outside the
    repository. ``without`` names the prerequisites deselected with ``--without``, for a benchmark that
    measures an optional part only where a prerequisite is there (and must not miss it silently in CI).
    """

    quick: bool
    scratch: Path
    cache: Path
    without: frozenset[str] = frozenset()

    def repeats(self, *, quick: int, full: int) -> int:
        return quick if self.quick else full


@dataclass(frozen=True)
class Benchmark:
    """What a ``bench_*.py`` module exposes as ``BENCHMARK``; its name is the module name without ``bench_``."""

    summary: str
    run: Callable[[RunContext], Sequence[Figure]]
    requires: tuple[Prerequisite, ...] = ()


def median_seconds(action: Callable[[], object], repeats: int) -> float:
    """The median wall time of ``repeats`` calls of ``action`` (at least one)."""
    samples: list[float] = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def format_number(value: float) -> str:
    """Integers as integers, other numbers with about three significant digits (never exponent form)."""
    if float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return f"{value:.3f}"


def in_ci(environ: dict[str, str] | None = None) -> bool:
    """Whether we run in CI (``CI=true``), where a missing prerequisite is an error rather than a skip."""
    env = dict(os.environ) if environ is None else environ
    return env.get("CI", "").strip().lower() in {"true", "1", "yes"}


def _slurm_cluster_missing() -> str | None:
    conf = os.environ.get("SLURM_CONF", "")
    if not conf:
        return "SLURM_CONF is not set (start the local cluster with scripts/local-slurm)"
    if not Path(conf).is_file():
        return f"SLURM_CONF names {conf!r}, which is not a file"
    return None


def _uv_missing() -> str | None:
    return None if uv_executable() is not None else "uv is not on PATH and $UV is not set"


def uv_executable() -> str | None:
    """The ``uv`` binary: ``$UV`` (set by ``uv run``), else the one on PATH."""
    named = os.environ.get("UV")
    if named and Path(named).is_file():
        return named
    return shutil.which("uv")


SLURM_CLUSTER = Prerequisite(
    name="slurm-cluster",
    description="a reachable Slurm cluster, selected by $SLURM_CONF (the local one from scripts/local-slurm)",
    check=_slurm_cluster_missing,
)
UV = Prerequisite(
    name="uv",
    description="the uv binary, to build throwaway virtual environments",
    check=_uv_missing,
)


CLUSTER_LOCK_TIMEOUT_S = 900.0
"""How long a benchmark waits for another holder of a lock (a cluster test session) before giving up."""


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[float]:
    """Hold an exclusive ``flock`` on ``path`` (waiting at most ``CLUSTER_LOCK_TIMEOUT_S``); yields the seconds waited."""
    with path.open("a") as handle:
        start = time.monotonic()
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - start > CLUSTER_LOCK_TIMEOUT_S:
                    raise TimeoutError(f"{path} stayed locked for {CLUSTER_LOCK_TIMEOUT_S:g}s") from None
                time.sleep(1.0)
        try:
            yield time.monotonic() - start
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def cluster_lock(state_dir: str | None) -> Iterator[str]:
    """Hold the cluster test session's lock (if the local cluster's state dir is known); yields a note."""
    if not state_dir or not Path(state_dir).is_dir():
        yield "no DDSLURM_STATE_DIR: ran without the cluster lock"
        return
    path = Path(state_dir) / "pytest-cluster.lock"
    with file_lock(path) as waited:
        yield f"held {path.name} (waited {waited:.1f}s)"
