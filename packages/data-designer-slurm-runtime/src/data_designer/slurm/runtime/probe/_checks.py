"""``profile validate --probe``: check one profile cluster against the real Slurm cluster.

Checks, in order (each ``ok``, ``failed`` or ``not_run`` with the reason; see
:mod:`data_designer.slurm.contracts._probe`):

1. ``slurm_commands``: ``sinfo squeue sacct scontrol sbatch scancel`` can be started.
2. ``controller``: ``scontrol show config`` answers (cluster name, Slurm version).
3. ``gpu_partition`` / ``cpu_partition``: ``sinfo`` lists the profile's partitions, and they are up.
4. ``account``: ``sacctmgr`` shows an association of the user with the profile's account, valid on
   both partitions.
5. ``gpus_per_node``: the GPU count of the GPU partition's nodes (GRES ``gpu``); resolves ``auto``,
   fails when a number in the profile differs from it or the nodes disagree.
6. ``workspace``: ``workspace_root`` is a directory the login node can write (``.probe/<id>``).
7. ``probe_job``, ``shared_workspace``, ``compute_runtime``: a one-task job on the CPU partition,
   with the profile's account and extra sbatch options, writes a token under
   ``workspace_root/.probe/<id>`` (read back here: the compute nodes see the shared workspace) and
   runs the compute Python to import the runtime and print its version (compared with ours). The
   job is polled with backoff through the scheduler adapter and cancelled when the probe times out.

Slurm that cannot be reached at all (neither ``scontrol`` nor ``sinfo`` answers) raises
:class:`UnavailableError`; every other finding is a check in the returned :class:`ProbeReport`.
"""

from __future__ import annotations

import getpass
import os
import re
import secrets
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from data_designer.slurm.contracts import (
    ClusterProfile,
    ProbeCheckName,
    ProbeReport,
    SlurmExtensionError,
    UnavailableError,
    __version__,
)
from data_designer.slurm.planner import make_directories, modes_for
from data_designer.slurm.runtime.probe._job import ProbeState, check_job_evidence, run_probe_job
from data_designer.slurm.runtime.scheduler import (
    DEFAULT_TIMEOUT_S,
    AssociationRow,
    CommandRunner,
    PartitionRow,
    SlurmOutputError,
    parse_scontrol_config,
    utc_now,
)

PROBE_COMMANDS: tuple[str, ...] = ("sinfo", "squeue", "sacct", "scontrol", "sbatch", "scancel")
"""The commands the probe (and every run) needs; ``sacctmgr`` is the account check's own business."""
DEFAULT_PROBE_TIMEOUT_S = 180.0
_GRES_ITEM_RE = re.compile(r"([A-Za-z0-9_]+)((?::[A-Za-z0-9_.-]+)*)")


def gpus_in_gres(gres: str | None) -> int:
    """GPUs in one node's GRES string (``gpu:2``, ``gpu:a100:4(S:0-1)``, ``gpu:a:2,gpu:b:2,shard:8``).

    Raises :class:`ValueError` for text that is not a GRES list.
    """
    if gres is None or gres.strip() in ("", "(null)"):
        return 0
    items: list[str] = []
    depth, current = 0, ""
    for char in gres.strip():
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    items.append(current)
    total = 0
    for item in items:
        match = _GRES_ITEM_RE.fullmatch(re.sub(r"\(.*\)$", "", item.strip()))
        if match is None:
            raise ValueError(f"{item!r} is not a GRES item")
        if match.group(1) != "gpu":
            continue
        fields = [f for f in match.group(2).split(":") if f]
        if not fields or not fields[-1].isdigit():
            total += 1  # 'gpu' or 'gpu:TYPE' alone is one GPU
        else:
            total += int(fields[-1])
    return total


def _default_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name and no passwd entry: ask Slurm about the numeric uid
        return str(os.getuid())


class _Probe(ProbeState):
    """The checks of cluster facts: commands, controller, partitions, account, GPUs and workspace."""

    def check_commands(self) -> None:
        missing: list[str] = []
        hung: list[str] = []
        versions: set[str] = set()
        for command in PROBE_COMMANDS:
            result = self.runner.run([command, "--version"], timeout_s=self.command_timeout_s)
            if result.timed_out:
                hung.append(command)
            elif result.returncode is None:
                missing.append(command)
            elif result.ok and result.stdout.strip():
                versions.add(result.stdout.strip().splitlines()[0])
        if missing or hung:
            parts = [f"not found on PATH: {', '.join(missing)}"] if missing else []
            parts += (
                [f"did not answer '--version' within {self.command_timeout_s:g}s: {', '.join(hung)}"] if hung else []
            )
            self.record(
                "slurm_commands",
                "failed",
                "; ".join(parts),
                hint="install the Slurm client commands on this node and put them on PATH",
            )
            return
        shown = f" ({', '.join(sorted(versions))})" if versions else ""
        self.record("slurm_commands", "ok", f"{', '.join(PROBE_COMMANDS)} answer{shown}")

    def check_controller(self) -> tuple[str | None, bool]:
        """``scontrol show config``: why it failed (None when it answered) and whether it timed out."""
        result = self.runner.run(["scontrol", "show", "config"], timeout_s=self.command_timeout_s)
        config: dict[str, str] = {}
        error = None if result.ok else result.describe()
        if error is None:
            try:
                config = parse_scontrol_config(result.stdout)
            except SlurmOutputError as exc:
                error = str(exc)
        if error is not None:
            self.record(
                "controller",
                "failed",
                f"scontrol show config: {error}",
                hint="check SLURM_CONF and that slurmctld answers ('scontrol ping')",
            )
            return error, result.timed_out
        self.slurm_cluster = config.get("ClusterName") or None
        self.slurm_version = config.get("SLURM_VERSION") or None
        self.record(
            "controller",
            "ok",
            f"cluster {self.slurm_cluster or '(unnamed)'}, Slurm {self.slurm_version or '(version not reported)'}",
        )
        return None, False

    def check_partitions(self, rows: Sequence[PartitionRow] | None, sinfo_error: str | None) -> None:
        known = sorted({r.name for r in rows or ()})
        for role in ("gpu", "cpu"):
            check: ProbeCheckName = "gpu_partition" if role == "gpu" else "cpu_partition"
            wanted = getattr(self.cluster.partitions, role)
            key = ("partitions", role)
            if rows is None:
                self.record(check, "failed", f"sinfo failed: {sinfo_error}", hint="retry when sinfo answers", key=key)
                continue
            mine = [r for r in rows if r.name == wanted]
            if not mine:
                self.record(
                    check,
                    "failed",
                    f"partition {wanted!r} does not exist (partitions: {', '.join(known) or 'none'})",
                    hint=f"set {key} to one of: {', '.join(known) or '(none listed by sinfo)'}",
                    key=key,
                )
                continue
            nodes = sum(r.nodes for r in mine)
            availability = sorted({r.available for r in mine})
            if "up" not in availability:
                self.record(
                    check,
                    "failed",
                    f"partition {wanted!r} is {'/'.join(availability)}, not up",
                    hint="ask the cluster administrators, or choose another partition",
                    key=key,
                )
                continue
            self.record(check, "ok", f"partition {wanted!r} is up with {nodes} node(s)")

    def check_account(self, partitions: Sequence[PartitionRow] | None) -> None:
        account = self.cluster.account
        if account is None:
            self.record("account", "ok", f"no account in the profile: jobs of {self.user!r} use their default account")
            return
        try:
            rows = self.scheduler.associations(self.user)
        except SlurmExtensionError as exc:
            self.record(
                "account",
                "failed",
                f"cannot read the associations of user {self.user!r}: {exc}",
                hint="sacctmgr must answer (it needs slurmdbd); or remove 'account' to use your default",
                key=("account",),
            )
            return
        on_cluster = [r for r in rows if self._same_cluster(r) and r.user == self.user]
        mine = [r for r in on_cluster if r.account.lower() == account.lower()]
        if not mine:
            others = ", ".join(sorted({r.account for r in on_cluster})) or "none"
            where = f" on cluster {self.slurm_cluster!r}" if self.slurm_cluster else ""
            self.record(
                "account",
                "failed",
                f"user {self.user!r} may not use account {account!r}{where}: the account does not exist or the "
                f"user is not associated with it (the user's accounts: {others})",
                hint=f"set account to one of: {others}; or ask the administrators to add {self.user!r} to {account!r}",
                key=("account",),
            )
            return
        existing = {r.name for r in partitions or ()}
        wanted = dict.fromkeys(p for p in (self.cluster.partitions.gpu, self.cluster.partitions.cpu) if p in existing)
        allowed = {r.partition for r in mine}
        denied = [p for p in wanted if None not in allowed and p not in allowed]
        if denied:
            self.record(
                "account",
                "failed",
                f"account {account!r} of user {self.user!r} is not valid on partition(s) {', '.join(denied)} "
                f"(only on: {', '.join(sorted(p for p in allowed if p))})",
                hint="choose partitions the association allows, or ask the administrators",
                key=("account",),
            )
            return
        scope = "all partitions" if None in allowed else ", ".join(sorted(p for p in allowed if p))
        self.record("account", "ok", f"user {self.user!r} may use account {account!r} ({scope})")

    def _same_cluster(self, row: AssociationRow) -> bool:
        return self.slurm_cluster is None or row.cluster.lower() == self.slurm_cluster.lower()

    def check_gpus(self, rows: Sequence[PartitionRow] | None) -> None:
        blocked = self.blocked_by("gpu_partition")
        if blocked is not None or rows is None:
            self.record("gpus_per_node", "not_run", f"{blocked or 'sinfo failed'}: no nodes to read GRES from")
            return
        partition = self.cluster.partitions.gpu
        counts: dict[int, list[str]] = {}
        for row in rows:
            if row.name != partition:
                continue
            try:
                gpus = gpus_in_gres(row.gres)
            except ValueError as exc:
                self.record(
                    "gpus_per_node",
                    "failed",
                    f"cannot read the GRES {row.gres!r} of nodes {row.node_list}: {exc}",
                    hint="set gpus_per_node to a number",
                    key=("gpus_per_node",),
                )
                return
            counts.setdefault(gpus, []).append(row.node_list)
        seen = ", ".join(f"{n} on {','.join(nodes)}" for n, nodes in sorted(counts.items()))
        configured = self.cluster.gpus_per_node
        if set(counts) == {0}:
            self.record(
                "gpus_per_node",
                "failed",
                f"the nodes of partition {partition!r} have no GPU GRES ({seen})",
                hint="set partitions.gpu to a partition whose nodes have GRES gpu",
                key=("partitions", "gpu"),
            )
            return
        if len(counts) > 1:
            self.record(
                "gpus_per_node",
                "failed",
                f"the nodes of partition {partition!r} differ in GPUs per node: {seen}",
                hint="use a partition (or a --constraint in sbatch_options) whose nodes have the same GPU count",
                key=("gpus_per_node",),
            )
            return
        resolved = next(iter(counts))
        if configured != "auto" and configured != resolved:
            self.record(
                "gpus_per_node",
                "failed",
                f"the profile says {configured} GPUs per node, GRES of partition {partition!r} says {resolved}",
                hint=f"set gpus_per_node to {resolved} (or 'auto')",
                key=("gpus_per_node",),
            )
            return
        self.gpus = resolved
        source = "resolved 'auto'" if configured == "auto" else "matches the profile"
        self.record("gpus_per_node", "ok", f"{resolved} GPUs per node in partition {partition!r} ({source})")

    # -- the shared workspace and the probe job --------------------------------------------------

    def check_workspace(self) -> None:
        root = Path(self.cluster.workspace_root)
        hint = "workspace_root must be a writable directory on the filesystem shared by login and compute nodes"
        if not root.exists():
            self.record(
                "workspace",
                "failed",
                f"{str(root)!r} does not exist",
                hint=f"create it (mkdir -p {root}) on the shared filesystem, or fix workspace_root",
                key=("workspace_root",),
            )
            return
        if not root.is_dir():
            self.record("workspace", "failed", f"{str(root)!r} is not a directory", hint=hint, key=("workspace_root",))
            return
        target = root / ".probe" / self.probe_id
        try:  # with the workspace's modes, like a run directory
            make_directories(target, modes_for(self.cluster.workspace_sharing), exclusive=True)
        except OSError as exc:
            self.record(
                "workspace",
                "failed",
                f"cannot create {str(target)!r}: {exc.strerror or exc}",
                hint=hint,
                key=("workspace_root",),
            )
            return
        self.probe_dir = target
        self.record("workspace", "ok", f"{str(root)!r} is writable from this node ({str(target)!r} created)")


def probe_cluster(
    name: str,
    cluster: ClusterProfile,
    *,
    runner: CommandRunner,
    clock: Callable[[], datetime] = utc_now,
    sleep: Callable[[float], None] = time.sleep,
    probe_id: str | None = None,
    user: str | None = None,
    timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
    command_timeout_s: float = DEFAULT_TIMEOUT_S,
) -> ProbeReport:
    """Run every probe check of profile cluster ``name`` against the cluster ``runner`` reaches.

    ``timeout_s`` bounds the wait for the probe job (it is cancelled when it runs out). Raises
    :class:`UnavailableError` when Slurm cannot be reached at all.
    """
    start = clock()
    probe = _Probe(
        name,
        cluster,
        runner=runner,
        clock=clock,
        sleep=sleep,
        probe_id=probe_id or f"{start:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}",
        user=user or _default_user(),
        timeout_s=timeout_s,
        command_timeout_s=command_timeout_s,
    )
    probe.check_commands()
    controller_error, hung = probe.check_controller()
    partitions: tuple[PartitionRow, ...] | None = None
    sinfo_error: str | None = "not asked: scontrol timed out" if hung else None
    if not hung:  # a controller that lets scontrol time out lets sinfo time out too: one wait is enough
        try:
            partitions = probe.scheduler.partitions()
        except SlurmExtensionError as exc:
            sinfo_error = str(exc)
    if controller_error is not None and partitions is None:
        raise UnavailableError(
            f"Slurm cannot be reached: scontrol show config: {controller_error}; sinfo: {sinfo_error}",
            code="slurm_unreachable",
            operation="profile.probe",
            hint="run this on a login node with the Slurm client commands on PATH; check SLURM_CONF and slurmctld",
        )
    probe.check_partitions(partitions, sinfo_error)
    probe.check_account(partitions)
    probe.check_gpus(partitions)
    probe.check_workspace()
    last = run_probe_job(probe)
    check_job_evidence(probe, last)
    probe.clean_up()
    return ProbeReport(
        cluster=name,
        slurm_cluster=probe.slurm_cluster,
        slurm_version=probe.slurm_version,
        checks=tuple(probe.checks.values()),
        gpus_per_node_resolved=probe.gpus,
        job_id=probe.job_id,
        probe_dir=None if probe.probe_dir is None else str(probe.probe_dir),
        expected_runtime_version=__version__,
        started_at=start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        duration_s=round(max(0.0, (clock() - start).total_seconds()), 3),
    )
