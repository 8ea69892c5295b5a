"""Containers for server replicas and the client worker: pyxis/enroot and apptainer command lines (pure).

A replica or a client whose plan names an image (``ImagePlan``, the profile's ``container_runtime``) runs in it:

* **apptainer**: the launcher runs outside the container with the supervisor's Python, as without an image, and
  the server argv it execs becomes ``apptainer exec [--nv] --bind M1,M2 --pwd RUN_DIR IMAGE <server argv>``
  (``--nv`` when the replica has GPUs). Apptainer shares the host's network namespace, so the port the
  launcher probed on the node is the port the server binds. The client is ``apptainer exec --bind ... --pwd
  RUN_DIR IMAGE <client argv>``, unless the supervisor already runs in that very image (``APPTAINER_CONTAINER``).
* **pyxis**: ``srun`` itself gets ``--container-image=IMAGE --container-mounts=M:M[:ro],...
  --container-workdir=RUN_DIR --no-container-mount-home``, so the whole step runs in the container, the launcher
  included: the image's ``python3`` runs the standalone launcher file by path (``python3 -I .../_launch.py``; it
  imports the standard library only). The client becomes an ``srun`` step of its own on node 0 with the same
  flags.

Mounts keep every path the same inside and out, absolute paths only, deduplicated and sorted: the workspace root
(run directory, inputs, ports, outputs, logs), ``HF_HOME`` when the replica's environment sets it, the model path
when the deployment's ``model`` is absolute, and for pyxis the directory holding the launcher, read-only. A
mount path holding ``,`` or ``:`` cannot be written in either runtime's mount syntax: the attempt ends
``invalid_config`` naming it.

Both kinds of step share the resource rules of this module (:func:`step_limits`): a step takes no GPU unless it
asks for some (:func:`job_has_gpus`: ``--gres=none`` in a job holding GRES) and exactly the memory the plan gives
it (``--mem``), never the whole job's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from data_designer.slurm.contracts import ExecutionPlan, ImagePlan, InternalError, ReplicaPlan
from data_designer.slurm.planner import escape_braces
from data_designer.slurm.runtime import _launch
from data_designer.slurm.runtime.store import RunLayout
from data_designer.slurm.runtime.supervisor._environment import SetupError

LAUNCHER_FILE = Path(_launch.__file__).resolve()
"""The standalone launcher a pyxis step runs by path with the image's ``python3``."""
CONTAINER_PYTHON = "python3"
"""The interpreter of an image (any Python 3.8 or later runs the launcher)."""
APPTAINER = "apptainer"
APPTAINER_CONTAINER_ENV = "APPTAINER_CONTAINER"
"""Set by apptainer inside a container to the image's path."""
CLIENT_STEP = "client"
"""The ``--job-name`` of the client's ``srun`` step (pyxis)."""
_UNWRITABLE = (",", ":")


class Mount(NamedTuple):
    """One bind mount: the same absolute path inside and out."""

    path: str
    read_only: bool = False


@dataclass(frozen=True)
class ContainerSite:
    """What container command lines need to know about the run: where it lives, and the models' paths."""

    workspace: Path
    run_dir: Path
    model_paths: Mapping[str, str] = field(default_factory=dict)
    """Per deployed alias, its ``model`` when that is an absolute path (mounted for the replica)."""
    launcher: Path = LAUNCHER_FILE


@dataclass(frozen=True)
class StepParts:
    """A replica step's pieces around the server argv template (see :func:`replica_step_parts`)."""

    srun_options: tuple[str, ...]
    """Options for ``srun`` itself (pyxis)."""
    launcher: tuple[str, ...]
    """The launcher's command, before its own options."""
    template_prefix: tuple[str, ...]
    """Words the launcher execs before the server argv (apptainer), braces escaped: the launcher binds them too."""


def container_site(plan: ExecutionPlan, layout: RunLayout) -> ContainerSite:
    """The site of ``plan`` running in ``layout``'s run directory."""
    models = {alias: d.model for alias, d in plan.run.deployments.items() if d.model.startswith("/")}
    return ContainerSite(workspace=layout.root, run_dir=layout.run_dir, model_paths=models)


def image_path(image: ImagePlan, what: str) -> str:
    """The image's resolved path; ``invalid_config`` when the plan left it unresolved."""
    if image.path is None:
        raise SetupError("invalid_config", f"the {what} image {image.reference!r} was never resolved to a path")
    return image.path


def mounts(paths: Sequence[Mount]) -> tuple[Mount, ...]:
    """Absolute paths only, one mount per path (writable wins over read-only), sorted; each path checked."""
    chosen: dict[str, bool] = {}
    for mount in paths:
        if not mount.path.startswith("/"):
            continue
        path = str(Path(mount.path))  # one spelling: no trailing or doubled slashes
        bad = [c for c in _UNWRITABLE if c in path]
        if bad:
            raise SetupError(
                "invalid_config",
                f"the container mount {path!r} holds {bad[0]!r}, which no container runtime's mount syntax can carry",
            )
        chosen[path] = chosen.get(path, True) and mount.read_only
    return tuple(Mount(path, read_only) for path, read_only in sorted(chosen.items()))


def replica_mounts(replica: ReplicaPlan, site: ContainerSite, *, launcher: bool) -> tuple[Mount, ...]:
    """The mounts of a replica's container (the launcher's directory, read-only, when it runs inside)."""
    wanted = [Mount(str(site.workspace))]
    hf_home = replica.environment.get("HF_HOME")
    if hf_home:
        wanted.append(Mount(hf_home))
    model = site.model_paths.get(replica.alias)
    if model:
        wanted.append(Mount(model))
    if launcher:
        wanted.append(Mount(str(site.launcher.parent), read_only=True))
    return mounts(wanted)


def pyxis_options(image: str, binds: Sequence[Mount], workdir: Path) -> tuple[str, ...]:
    """The pyxis ``srun`` options that run a step in ``image``."""
    listed = ",".join(f"{m.path}:{m.path}" + (":ro" if m.read_only else "") for m in binds)
    return (
        f"--container-image={image}",
        f"--container-mounts={listed}",
        f"--container-workdir={workdir}",
        "--no-container-mount-home",
    )


def apptainer_exec(image: str, binds: Sequence[Mount], workdir: Path, *, gpus: bool) -> tuple[str, ...]:
    """``apptainer exec`` with the mounts and working directory, before the command to run in ``image``."""
    listed = ",".join(m.path + (f":{m.path}:ro" if m.read_only else "") for m in binds)
    return (APPTAINER, "exec", *(("--nv",) if gpus else ()), "--bind", listed, "--pwd", str(workdir), image)


def replica_step_parts(
    replica: ReplicaPlan, *, python: str, launch_module: str, site: ContainerSite | None
) -> StepParts:
    """How a replica's step starts: in its image when the plan names one, else the launcher module natively."""
    native = (python, "-m", launch_module)
    image = replica.image
    if image is None:
        return StepParts((), native, ())
    if site is None:
        raise InternalError(
            f"replica {replica.alias}-r{replica.replica} runs in an image: srun_argv needs the run's ContainerSite",
            code="container_site_missing",
        )
    path = image_path(image, f"{replica.alias!r}")
    if image.runtime == "pyxis":
        binds = replica_mounts(replica, site, launcher=True)
        return StepParts(pyxis_options(path, binds, site.run_dir), (CONTAINER_PYTHON, "-I", str(site.launcher)), ())
    words = apptainer_exec(
        path, replica_mounts(replica, site, launcher=False), site.run_dir, gpus=replica.gpus_per_node > 0
    )
    return StepParts((), native, tuple(escape_braces(word) for word in words))


def client_command(
    plan: ExecutionPlan, argv: Sequence[str], *, layout: RunLayout, environ: Mapping[str, str]
) -> list[str]:
    """The client worker's command line: ``argv`` (already bound) as is, in apptainer, or as a pyxis step."""
    client = plan.allocation.client
    if client.image is None:
        return list(argv)
    path = image_path(client.image, "client")
    site = container_site(plan, layout)
    binds = mounts([Mount(str(site.workspace))])
    if client.image.runtime == "apptainer":
        if environ.get(APPTAINER_CONTAINER_ENV) == path:
            return list(argv)  # the supervisor already runs in this image (the profile's compute_python.image)
        return [*apptainer_exec(path, binds, site.run_dir, gpus=False), *argv]
    step = [
        "srun",
        "--exact",
        "--nodes=1",
        "--ntasks=1",
        "--relative=0",
        f"--cpus-per-task={client.cpus}",
        "--export=ALL",
        f"--job-name={CLIENT_STEP}",
        "--kill-on-bad-exit=1",
    ]
    step += step_limits(gpus_per_node=0, memory_mb=client.memory_mb, environ=environ)
    return [*step, *pyxis_options(path, binds, site.run_dir), *argv]


def step_limits(*, gpus_per_node: int, memory_mb: int, environ: Mapping[str, str]) -> list[str]:
    """A step's ``--gres`` (when the job holds GPUs as GRES; ``none`` for a step without) and its planned memory per
    node, ``--mem=<memory_mb>M``.

    The memory is always explicit: srun's default is all of the job's memory on the node (it reads the job's
    ``SLURM_MEM_PER_NODE``), which would make every later step wait for the first. The batch step (the supervisor
    and a client outside pyxis) holds no share the steps must leave: Slurm does not count it against them.
    """
    limits = []
    if job_has_gpus(environ):
        limits.append(f"--gres=gpu:{gpus_per_node}" if gpus_per_node else "--gres=none")
    limits.append(f"--mem={memory_mb}M")
    return limits


def job_has_gpus(environ: Mapping[str, str]) -> bool:
    """Whether the job holds GPUs as Slurm GRES (a whole-node job without ``--gres`` does not)."""
    return bool(environ.get("SLURM_JOB_GPUS") or environ.get("SLURM_GPUS_ON_NODE"))
