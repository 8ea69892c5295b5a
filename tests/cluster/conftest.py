"""Session fixture for the real local Slurm cluster (``scripts/local-slurm``) and its conformance harness.

The cluster is brought up once per session (``scripts/local-slurm up`` is idempotent: it reuses a
running cluster). When it cannot be brought up (not root, no apt, a failing start), every
cluster test FAILS under ``CI=true`` and is skipped otherwise, with the reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import itertools
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler, SubprocessRunner

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCAL_SLURM = REPO_ROOT / "scripts" / "local-slurm"
UP_TIMEOUT_S = 600
LOCK_TIMEOUT_S = 900


def parse_exports(text: str) -> dict[str, str]:
    """The ``export KEY=VALUE`` lines ``local-slurm up``/``env`` print (shell-quoted values)."""
    exports: dict[str, str] = {}
    for line in text.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            key, _, value = words[1].partition("=")
            exports[key] = value
    return exports


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the local Slurm cluster is required under CI=true: {reason}")
    pytest.skip(f"local Slurm cluster unavailable: {reason}")


def _bring_up() -> dict[str, str]:
    if os.geteuid() != 0:
        _unavailable("scripts/local-slurm needs root")
    if shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
        _unavailable("neither the Slurm daemons nor apt-get are available")
    problems: list[str] = []
    for _attempt in range(2):  # a first start can lose a race with slurmdbd; `up` then resumes
        try:
            done = subprocess.run(
                [str(LOCAL_SLURM), "up"], capture_output=True, text=True, timeout=UP_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append(repr(exc))
            continue
        exports = parse_exports(done.stdout)
        if done.returncode == 0 and "SLURM_CONF" in exports:
            return exports
        problems.append(f"exit {done.returncode}: {done.stderr.strip()[-800:]}")
    _unavailable("; ".join(problems))
    raise AssertionError("unreachable")  # pragma: no cover - _unavailable always raises


@dataclass
class LocalSlurmHarness:
    """The conformance harness over the real local cluster."""

    exports: Mapping[str, str]
    token: str

    def __post_init__(self) -> None:
        overrides = {k: v for k, v in self.exports.items() if k in ("SLURM_CONF", "PATH")}
        self._runner = SubprocessRunner(overrides=overrides)
        self._names = itertools.count(1)
        self._failed_nodes: set[str] = set()

    @property
    def runner(self) -> CommandRunner:
        return self._runner

    @property
    def min_job_age_s(self) -> float:
        return float(self.exports.get("DDSLURM_MIN_JOB_AGE", "300"))

    @property
    def out_of_memory_state(self) -> str:
        return "out_of_memory" if self.exports.get("DDSLURM_CGROUPS") == "1" else "failed"

    @property
    def sbatch_args(self) -> tuple[str, ...]:
        return ("--output=/dev/null",)

    def scheduler(self, runner: CommandRunner | None = None) -> SlurmScheduler:
        return SlurmScheduler(runner or self._runner)

    def now(self) -> datetime:
        return datetime.now(UTC)

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)

    def unique_name(self, label: str) -> str:
        return f"ddct-{self.token}-{label}-{next(self._names)}"

    def fail_node(self, node: str) -> None:
        # The node really dies (its slurmd is killed); marking it down at once does what slurmctld would do after
        # SlurmdTimeout, saves that wait, and keeps a concurrent `local-slurm up` (which restarts missing slurmd)
        # from reviving the node before the controller notices.
        pid_file = Path(self.exports["DDSLURM_STATE_DIR"]) / "pids" / f"slurmd-{node}"
        os.kill(int(pid_file.read_text(encoding="utf-8").strip()), signal.SIGKILL)
        self._failed_nodes.add(node)
        down = ["scontrol", "update", f"nodename={node}", "state=down", "reason=ddslurm-conformance-node-failure"]
        result = self._runner.run(down, timeout_s=30)
        assert result.ok, result.describe()

    def restore_nodes(self) -> None:
        done = subprocess.run(
            [str(LOCAL_SLURM), "up"], capture_output=True, text=True, timeout=UP_TIMEOUT_S, check=False
        )
        assert done.returncode == 0, done.stderr[-2000:]
        for node in sorted(self._failed_nodes):  # refused when the node is already back: that is fine
            self._runner.run(["scontrol", "update", f"nodename={node}", "state=resume"], timeout_s=30)
        self._failed_nodes.clear()
        for _ in range(60):  # ReturnToService=2 brings a restarted node back to idle by itself
            nodes = self._runner.run(["sinfo", "--noheader", "-N", "-o", "%N %t"], timeout_s=30)
            node_states = [line.split()[-1] for line in nodes.stdout.splitlines() if line.strip()]
            if nodes.ok and node_states and all(state in ("idle", "mix", "alloc") for state in node_states):
                return
            time.sleep(1)
        raise AssertionError(f"nodes did not come back: {nodes.stdout}")


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Serialise test sessions on the one shared cluster: a node-failure test in one breaks the jobs of another."""
    with lock_path.open("a") as handle:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another test session held {lock_path} for over {LOCK_TIMEOUT_S}s")
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def local_slurm() -> Iterator[dict[str, str]]:
    """The exports of a running local cluster (brought up, or reused), held exclusively for this session."""
    exports = _bring_up()
    with _exclusive(Path(exports.get("DDSLURM_STATE_DIR", "/tmp")) / "pytest-cluster.lock"):
        yield exports


@pytest.fixture(scope="session")
def e2e() -> ModuleType:
    """The end-to-end helpers of ``test_cluster_run_e2e.py`` (``execute_and_wait``, ``server``, ``write_profile``...),
    loaded by path: test directories are not packages."""
    name = "ddslurm_cluster_e2e"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("test_cluster_run_e2e.py"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def cluster_harness(local_slurm: dict[str, str]) -> LocalSlurmHarness:
    return LocalSlurmHarness(exports=local_slurm, token=secrets.token_hex(3))
