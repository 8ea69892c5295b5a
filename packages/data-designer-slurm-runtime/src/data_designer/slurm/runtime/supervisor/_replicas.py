"""Server replicas as ``srun`` steps: the step command line, spawning, probed ports, readiness, stopping.

Each replica is one step with explicit resources (``--exact``, one task per node of the replica, its CPUs,
GPUs and memory per node, ``--relative`` to its first node), so two steps on one node start together on disjoint
Slurm-assigned GPUs. The step runs the launcher (``data_designer.slurm.runtime._launch``), which probes a
free port on its node, publishes it and execs the server; a replica with an image runs in it (``_containers``:
pyxis puts the whole step in the container, apptainer wraps the server argv). Readiness is the replica's health
endpoint answering 200, then ``GET /v1/models`` naming the plan's served name (``_served_models``); a step whose
process ends first fails the attempt at once with its log tail.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from data_designer.slurm.contracts import ReplicaPlan
from data_designer.slurm.contracts.records import PORT_SCHEMA, PortRecord
from data_designer.slurm.runtime import _launch
from data_designer.slurm.runtime._launch import port_record_name
from data_designer.slurm.runtime.store import RecordOk, read_record, run_file
from data_designer.slurm.runtime.supervisor._containers import (
    ContainerSite,
    job_has_gpus,
    replica_step_parts,
    step_limits,
)

LAUNCH_MODULE = _launch.__name__
LOOPBACK = "127.0.0.1"
ALL_INTERFACES = "0.0.0.0"  # replicas beyond node 0 must be reachable from the client there
LOG_TAIL_LINES = 20
_LOG_TAIL_BYTES = 16 * 1024
_HEALTH_TIMEOUT_S = 2.0
# Health checks go straight to the node: a site's http_proxy must not see (or break) them.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def step_name(replica: ReplicaPlan) -> str:
    """The srun ``--job-name`` of a replica's step."""
    return f"{replica.alias}-r{replica.replica}"


def log_step(replica: ReplicaPlan) -> str:
    """The replica's log name (``logs/<this>.log``)."""
    return f"server-{replica.alias}-{replica.replica}"


def nodes_of(replica: ReplicaPlan) -> tuple[int, ...]:
    return replica.node_indices or (0,)


def srun_argv(
    replica: ReplicaPlan,
    *,
    python: str,
    port_dir: Path,
    environ: Mapping[str, str],
    site: ContainerSite | None = None,
    master_addr: str | None = None,
) -> list[str]:
    """The ``srun`` command line of one replica's step (the launcher, then the server's argv template).

    A replica with an image runs in it (``_containers``), which needs ``site``: the run's workspace and directory.
    A replica with rank argvs (one per node: a vLLM replica that spans nodes) hands the launcher all of them
    (``--rank-templates``, JSON), the address of its first node (``master_addr``) and its startup budget as the
    time a rank waits for rank 0.
    """
    parts = replica_step_parts(replica, python=python, launch_module=LAUNCH_MODULE, site=site)
    nodes = nodes_of(replica)
    argv = [
        "srun",
        "--exact",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={replica.cpus}",
        f"--relative={nodes[0]}",
        "--export=ALL",
        f"--job-name={step_name(replica)}",
        "--kill-on-bad-exit=1",
    ]
    argv += step_limits(gpus_per_node=replica.gpus_per_node, memory_mb=replica.memory_mb, environ=environ)
    argv += [*parts.srun_options, *parts.launcher, "--port-dir", str(port_dir)]
    argv += ["--alias", replica.alias, "--replica", str(replica.replica), "--bind-host", bind_host(replica)]
    if not replica.rank_argv:
        return [*argv, "--", *parts.template_prefix, *replica.argv]
    if master_addr is None:
        raise ValueError(f"{step_name(replica)} spans nodes: its step needs the address of its first node")
    ranks = [[*parts.template_prefix, *rank] for rank in replica.rank_argv]
    argv += ["--master-addr", master_addr, "--join-timeout-s", str(replica.startup_timeout_s)]
    return [*argv, "--rank-templates", json.dumps(ranks, ensure_ascii=False, separators=(",", ":"))]


def bind_host(replica: ReplicaPlan) -> str:
    return LOOPBACK if replica.bind == "loopback" else ALL_INTERFACES


def passed_to(environ: Mapping[str, str], named: Collection[str], wanted: Collection[str]) -> dict[str, str]:
    """``environ`` without the job's named variables (``named``, the plan's submission environment) that a step
    does not name (``wanted``): a deployment's token never reaches another deployment or the client."""
    return {k: v for k, v in environ.items() if k not in named or k in wanted}


def step_environment(replica: ReplicaPlan, environ: Mapping[str, str], named: Collection[str] = ()) -> dict[str, str]:
    """The step's environment: the supervisor's (less the named variables the replica does not name), the plan's
    variables, and GPU positions when Slurm has no GRES."""
    env = {**passed_to(environ, named, replica.pass_environment), **replica.environment}
    if replica.gpus_per_node and not job_has_gpus(environ) and replica.gpu_indices is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in replica.gpu_indices)
    return env


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> tuple[str, ...]:
    """The last ``lines`` lines of a log (empty when it cannot be read)."""
    try:
        with run_file(path) as stream:
            stream.seek(0, os.SEEK_END)
            size = stream.tell()
            stream.seek(max(0, size - _LOG_TAIL_BYTES))
            data = stream.read()
    except OSError:
        return ()
    return tuple(data.decode("utf-8", "replace").splitlines()[-lines:])


@dataclass
class ReplicaProcess:
    """One running replica step, and what is known about it so far."""

    plan: ReplicaPlan
    process: subprocess.Popen[bytes]
    log: Path
    nodes: tuple[str, ...]
    address: str
    spawned_at: datetime
    spawned_monotonic: float
    ports: tuple[PortRecord, ...] = ()
    ready_at: datetime | None = None
    startup_s: float | None = None
    readiness_lag_s: float | None = None
    exit_code: int | None = None
    """Set when the step ended while the attempt ran (with ``exited_at``, when the supervisor saw it)."""
    exited_at: datetime | None = None
    _port_files: tuple[Path, ...] = field(default=())

    @property
    def step(self) -> str:
        return step_name(self.plan)

    @property
    def port(self) -> int | None:
        head = next((p for p in self.ports if p.task == 0), None)
        return head.port if head is not None else None

    @property
    def base_url(self) -> str | None:
        port = self.port
        if port is None:
            return None
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{port}/v1"

    def read_ports(self, port_dir: Path) -> bool:
        """Read the launchers' port records; True once every task of the step has published one."""
        tasks = self.plan.ranks
        if len(self.ports) < tasks:
            found = []
            for task in range(tasks):
                result = read_record(port_dir / port_record_name(self.plan.alias, self.plan.replica, task), PORT_SCHEMA)
                if isinstance(result, RecordOk):
                    found.append(result.payload)
            self.ports = tuple(found)
        return len(self.ports) == tasks

    def health(self) -> tuple[bool, float | None]:
        """(answered 200, the server's own ``ready_at`` Unix time when its body reports one)."""
        port = self.port
        if port is None:
            return False, None
        host = f"[{self.address}]" if ":" in self.address else self.address
        try:
            with _OPENER.open(f"http://{host}:{port}{self.plan.health_path}", timeout=_HEALTH_TIMEOUT_S) as answer:
                body = answer.read(64 * 1024)
                ok = answer.status == 200
        except (OSError, urllib.error.URLError, ValueError):
            return False, None
        ready_at = None
        with contextlib.suppress(ValueError, AttributeError):
            value = json.loads(body).get("ready_at")
            ready_at = float(value) if isinstance(value, int | float) else None
        return ok, ready_at


def spawn(argv: Sequence[str], *, env: Mapping[str, str], log: BinaryIO, cwd: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session (so it can be stopped as a group), stdout and stderr into the open ``log``
    (``AttemptWriter.open_log``; the child keeps its own descriptor)."""
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
    )


def stop_processes(processes: Sequence[subprocess.Popen[bytes]], *, grace_s: float) -> None:
    """TERM every process group, wait up to ``grace_s`` for all, then KILL what is left (groups included)."""
    for process in processes:
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
    for process in processes:
        # Also after the leader exited: a server it left behind in the group must not outlive the attempt.
        _signal_group(process, signal.SIGKILL)
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)
