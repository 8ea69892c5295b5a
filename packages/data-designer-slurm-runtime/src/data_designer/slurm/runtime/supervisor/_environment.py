"""Before anything starts: read the plan, find this task's shard and attempt, check the plan and the environment.

The batch script runs in the run directory (``sbatch --chdir``), so ``plan.json`` is read from there and
the run directory is ``<workspace>/runs/<run id>``. The array job is named ``<prefix>-c<chunk>``; the chunk's
binding for ``SLURM_ARRAY_TASK_ID`` gives (shard, attempt).

The environment check compares what runs here with what the plan and the installed runtime expect: the
interpreter the plan starts the client with (when it names one outside an image), the lockstep version of
every data-designer-slurm package, and the host ``data-designer`` version against the runtime's requirement.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import ExecutionPlan, InvalidInputError, SlurmExtensionError, __version__
from data_designer.slurm.contracts.records import FinalStatus
from data_designer.slurm.planner import bind_argv, satisfies
from data_designer.slurm.runtime._versions import installed_version
from data_designer.slurm.runtime.store import RunLayout, digest_problem, load_plan_file

LOCKSTEP_PACKAGES = (
    "data-designer-slurm-contracts",
    "data-designer-slurm-planner",
    "data-designer-slurm-runtime",
)
HOST_PACKAGE = "data-designer"
_CHUNK = re.compile(r"-c(0|[1-9][0-9]*)$")

VersionOf = Callable[[str], str | None]


class SetupError(Exception):
    """The attempt cannot start; ``status`` says how it is classified."""

    def __init__(self, status: FinalStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class TaskIdentity:
    """Which chunk, array index, shard and attempt this allocation runs, and Slurm's ids for it."""

    chunk: int
    array_task: int
    shard: int
    attempt: int
    job_id: str | None
    restart_count: int


def load_plan(path: Path) -> ExecutionPlan:
    """The plan at ``path`` (``store.load_plan_file``); SetupError ``invalid_config`` when it is missing, unreadable,
    not a plan or not its own digest."""
    try:
        return load_plan_file(path, verify_digest=False)  # checked by check_digest, with a status.json
    except SlurmExtensionError as exc:
        raise SetupError("invalid_config", exc.info.message) from exc


def run_layout(run_dir: Path) -> RunLayout:
    """The layout of the run whose directory is ``run_dir`` (``<workspace>/runs/<run id>``)."""
    try:
        return RunLayout.of_run_dir(run_dir.absolute())
    except InvalidInputError as exc:
        raise SetupError("invalid_config", exc.info.message) from exc


def identify_task(plan: ExecutionPlan, environ: Mapping[str, str]) -> TaskIdentity:
    """(chunk, array index) from Slurm's environment, (shard, attempt) from the plan's chunk binding."""
    name = environ.get("SLURM_JOB_NAME", "")
    match = _CHUNK.search(name)
    if match is None:
        raise SetupError("invalid_config", f"job name {name!r} does not end in '-c<chunk>'")
    chunk_number = int(match.group(1))
    chunk = next((c for c in plan.submission.chunks if c.chunk == chunk_number), None)
    if chunk is None:
        raise SetupError("invalid_config", f"the plan has no chunk {chunk_number} (job name {name!r})")
    index_text = environ.get("SLURM_ARRAY_TASK_ID", "")
    if not index_text.isascii() or not index_text.isdigit():
        raise SetupError("invalid_config", f"SLURM_ARRAY_TASK_ID {index_text!r} is not an array index")
    binding = next((t for t in chunk.tasks if t.index == int(index_text)), None)
    if binding is None:
        raise SetupError("invalid_config", f"chunk {chunk_number} of the plan has no array index {index_text}")
    restarts = environ.get("SLURM_RESTART_COUNT", "0") or "0"
    return TaskIdentity(
        chunk=chunk_number,
        array_task=binding.index,
        shard=binding.shard,
        attempt=binding.attempt,
        job_id=environ.get("SLURM_ARRAY_JOB_ID") or environ.get("SLURM_JOB_ID") or None,
        restart_count=int(restarts) if restarts.isdigit() else 0,
    )


def check_digest(plan: ExecutionPlan) -> None:
    problem = digest_problem(plan)
    if problem is not None:
        raise SetupError("invalid_config", f"plan digest mismatch: the plan {problem}")


def expected_interpreter(plan: ExecutionPlan) -> str | None:
    """The interpreter the plan runs the client with, when it names an absolute path outside an image."""
    client = plan.allocation.client
    if client.image is not None or not client.argv:
        return None
    first = bind_argv(client.argv[:1], {})[0]
    return first if first.startswith("/") else None


def check_environment(
    plan: ExecutionPlan, *, executable: str = sys.executable, version_of: VersionOf = installed_version
) -> None:
    """SetupError ``environment_mismatch`` naming the interpreter or package that differs from the plan's."""
    expected = expected_interpreter(plan)
    if expected is not None and not _same_file(expected, executable):
        raise SetupError(
            "environment_mismatch", f"interpreter: the plan runs {expected!r}, the supervisor runs {executable!r}"
        )
    for package in LOCKSTEP_PACKAGES:
        found = version_of(package)
        if found != __version__:
            raise SetupError(
                "environment_mismatch",
                f"{package}: version {found or '(not installed)'} is installed, the plan needs {__version__}",
            )
    host = version_of(HOST_PACKAGE)
    wanted = _host_requirement()
    if host is None:
        raise SetupError("environment_mismatch", f"{HOST_PACKAGE}: not installed (the runtime needs {wanted or 'it'})")
    if wanted is not None and not satisfies(host, wanted):
        raise SetupError(
            "environment_mismatch", f"{HOST_PACKAGE}: version {host} is installed, the runtime needs {wanted}"
        )


def _same_file(expected: str, actual: str) -> bool:
    # Not os.path.samefile: every venv's python links to the same base interpreter, so that would hide a wrong venv.
    return os.path.normpath(expected) == os.path.normpath(actual)


def _host_requirement() -> str | None:
    """The runtime's specifier on the host package (e.g. ``>=1.0.0rc1,<2``), from its installed metadata.

    The runtime requires the host only through its ``host`` extra (it installs without it); the supervisor, which
    starts the client worker, needs it, so that requirement is the one checked.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requires = importlib.metadata.requires("data-designer-slurm-runtime") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for text in requires:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.name == HOST_PACKAGE and (
            requirement.marker is None or requirement.marker.evaluate({"extra": "host"})
        ):
            return str(requirement.specifier)
    return None
