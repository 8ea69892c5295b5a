"""A fake Slurm: a :class:`CommandRunner` that answers sbatch/squeue/sacct/scancel/scontrol/sinfo/sacctmgr.

It prints what Slurm 22.05 prints in the formats the adapter asks for (pending array ranges such
as ``1000_[3-5%2]``, ``CANCELLED by 0``, ``allocation`` placeholder rows, ``.batch`` steps,
``ID;cluster`` replies when ``cluster_reply`` is set, exit status 1 for a single purged job id),
so the adapter and its parsers run unchanged against it. Failures are injectable per command
(:meth:`FakeSlurm.fail`) and sbatch replies can be lost after the job was accepted
(:meth:`FakeSlurm.lose_sbatch_replies`). Time is virtual: :meth:`FakeSlurm.advance` (or
:meth:`FakeSlurm.sleep`, for injection) moves it on; ids are deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from data_designer.slurm.contracts import parse_time_limit
from data_designer.slurm.planner import format_indices
from data_designer.slurm.runtime.scheduler import (
    SACCT_FORMAT,
    SACCTMGR_ASSOC_FORMAT,
    SINFO_FORMAT,
    SLURM_COMMANDS,
    SQUEUE_FORMAT,
    CommandResult,
    SlurmOutputError,
    expand_indices,
)
from data_designer.slurm.runtime.testing._fake_state import TERMINAL, Behaviour, FakeCluster, FakeJob, FakeTask

SLURM_VERSION = "22.05.8"
FailureMode = Literal["error", "timeout", "not_found", "disabled", "garbage", "rejected"]
_UNREACHABLE = "error: Unable to contact slurm controller (connect failure)"
_REJECTED = (
    "error: CPU count per node can not be satisfied\n"
    "sbatch: error: Batch job submission failed: Requested node configuration is not available"
)


@dataclass(slots=True)
class _Failure:
    mode: FailureMode
    remaining: int | None


class FakeSlurm(FakeCluster):
    """A stateful fake Slurm cluster that is also a command runner."""

    def __init__(
        self,
        *,
        cluster_name: str = "fakeslurm",
        cluster_reply: bool = False,
        accounts: Sequence[str] = ("ddtest",),
        first_job_id: int = 1000,
        nodes: int = 4,
        min_job_age_s: float = 10.0,
        accounting_lag_s: float = 2.0,
        requeue_delay_s: float = 2.0,
        max_array_size: int = 11,
        node_cpus: int = 64,
        node_memory_mb: int = 256_000,
        node_gpus: int = 2,
        partitions: Mapping[str, str] | None = None,
    ) -> None:
        """``node_*`` is the shape of every node (as sinfo prints it); ``partitions`` maps each partition (the first is
        the default) to its MaxTime as sinfo prints it (``infinite``, ``30:00``); default ``cpu`` and ``gpu``."""
        super().__init__(
            first_job_id=first_job_id,
            nodes=nodes,
            min_job_age_s=min_job_age_s,
            accounting_lag_s=accounting_lag_s,
            requeue_delay_s=requeue_delay_s,
            max_array_size=max_array_size,
        )
        self.cluster_name = cluster_name
        self.cluster_reply = cluster_reply
        self.accounts = tuple(accounts)
        self.node_cpus = node_cpus
        self.node_memory_mb = node_memory_mb
        self.node_gpus = node_gpus
        self.partitions = dict(partitions if partitions is not None else {"cpu": "infinite", "gpu": "infinite"})
        self.calls: list[tuple[str, ...]] = []
        self.environments: list[tuple[str, ...]] = []
        """Per call, the names (never the values) of the variables the caller added."""
        self._failures: dict[str, _Failure] = {}
        self._lost_replies = 0

    # -- injection ------------------------------------------------------------------------------

    def fail(self, command: str, mode: FailureMode = "error", *, times: int | None = None) -> None:
        """Make ``command`` fail the next ``times`` calls (``None``: until :meth:`heal`)."""
        self._failures[command] = _Failure(mode, times)

    def heal(self, command: str | None = None) -> None:
        if command is None:
            self._failures.clear()
        else:
            self._failures.pop(command, None)

    def lose_sbatch_replies(self, count: int) -> None:
        """The next ``count`` sbatch calls accept their job but the reply never arrives (a timeout)."""
        self._lost_replies = count

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def set_state(
        self, job_id: str | int, index: int | None, state: str, *, exit_code: int = 0, signal: int = 0
    ) -> None:
        """Force one task into any Slurm state (terminal states stamp an end time)."""
        task = self.jobs[int(job_id)].tasks[index]
        if state in TERMINAL:
            if task.start is None:
                task.start = self.now
            self.finish(task, state, exit_code, signal)
        else:
            task.state, task.end = state, None
            if state == "RUNNING" and task.start is None:
                task.start, task.node = self.now, self.nodes[0]

    def count_calls(self, command: str) -> int:
        return sum(1 for argv in self.calls if argv and argv[0] == command)

    # -- the CommandRunner protocol ---------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        stdin: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> CommandResult:
        args = tuple(argv)
        self.calls.append(args)
        self.environments.append(tuple(sorted(environment or {})))
        name = Path(args[0]).name if args else ""
        if name not in SLURM_COMMANDS:
            return CommandResult(args, None, "", f"{name!r}: not found", 0.0, not_found=True)
        failure = self._failures.get(name)
        if failure is not None:
            if failure.remaining is not None:
                failure.remaining -= 1
                if failure.remaining <= 0:
                    del self._failures[name]
            return self._failed(args, name, failure.mode, timeout_s)
        if "--version" in args[1:]:
            return CommandResult(args, 0, f"slurm {SLURM_VERSION}\n", "", 0.01)
        handler = {
            "sbatch": self._sbatch,
            "squeue": self._squeue,
            "sacct": self._sacct,
            "scancel": self._scancel,
            "scontrol": self._scontrol,
            "sinfo": self._sinfo,
            "sacctmgr": self._sacctmgr,
        }[name]
        rc, out, err = handler(args[1:], stdin)
        if name == "sbatch" and rc == 0 and self._lost_replies > 0:
            self._lost_replies -= 1
            return CommandResult(args, None, "", "", timeout_s, timed_out=True)
        return CommandResult(args, rc, out, err, 0.01)

    def _failed(self, args: tuple[str, ...], name: str, mode: FailureMode, timeout_s: float) -> CommandResult:
        if mode == "timeout":
            return CommandResult(args, None, "", "", timeout_s, timed_out=True)
        if mode == "not_found":
            return CommandResult(args, None, "", f"[Errno 2] No such file or directory: {name!r}", 0.0, not_found=True)
        if mode == "disabled":
            return CommandResult(args, 1, "", f"{name}: error: Slurm accounting storage is disabled\n", 0.01)
        if mode == "garbage":
            return CommandResult(args, 0, "<html>502 Bad Gateway</html>\n", "", 0.01)
        if mode == "rejected":  # the controller answered and refused the request (as sbatch does for resources)
            return CommandResult(args, 1, "", f"{name}: {_REJECTED}\n", 0.01)
        return CommandResult(args, 1, "", f"{name}: {_UNREACHABLE}\n", 0.01)

    # -- commands -------------------------------------------------------------------------------

    @staticmethod
    def _options(args: Sequence[str]) -> tuple[dict[str, str], list[str]]:
        """``--key=value``, ``-k value`` and flags; short options listed here take a value."""
        takes_value = {"-t", "-j", "-o", "-S", "-E", "-p", "-A", "-J", "-a", "-u", "-n"}
        options: dict[str, str] = {}
        positional: list[str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg.startswith("--"):
                key, sep, value = arg.partition("=")
                options[key] = value if sep else ""
            elif arg in takes_value and i + 1 < len(args):
                options[arg] = args[i + 1]
                i += 1
            elif arg.startswith("-") and len(arg) > 1:
                options[arg] = ""
            else:
                positional.append(arg)
            i += 1
        return options, positional

    def _sbatch(self, args: Sequence[str], stdin: str | None) -> tuple[int, str, str]:
        options, positional = self._options(args)
        script = Path(positional[0]).read_text(encoding="utf-8") if positional else (stdin or "")
        if not script.startswith("#!"):
            return 1, "", "sbatch: error: This does not look like a batch script.\n"
        account = options.get("--account", options.get("-A"))
        if account is not None and account not in self.accounts:
            return (
                1,
                "",
                "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified\n",
            )
        indices: tuple[int, ...] | None = None
        throttle: int | None = None
        spec = options.get("--array", options.get("-a"))
        if spec is not None:
            try:
                indices = expand_indices(spec, command="sbatch", line=1)
            except SlurmOutputError:
                indices = ()
            if not indices or max(indices) >= self.max_array_size:
                return 1, "", "sbatch: error: Batch job submission failed: Invalid job array specification\n"
            throttle = int(spec.partition("%")[2]) if "%" in spec else None
        limit = options.get("--time", options.get("-t"))
        limit_s = None if limit is None else parse_time_limit(limit)
        if limit is not None and limit_s is None:
            return 1, "", "sbatch: error: Invalid time limit specification\n"
        try:
            Behaviour.from_script(script)
        except ValueError as exc:
            return 1, "", f"sbatch: error: bad '# fake-slurm:' directive: {exc}\n"
        dependency = options.get("--dependency", options.get("-d"))
        after: tuple[int, ...] = ()
        if dependency is not None:  # afterany:<id>[:<id>...]; a job gone from the controller is refused, as Slurm does
            kind, _, targets = dependency.partition(":")
            ids = targets.split(":")
            if (
                kind != "afterany"
                or not all(t.isdigit() for t in ids)
                or any(int(t) not in self.jobs or self.jobs[int(t)].left_queue for t in ids)
            ):
                return 1, "", "sbatch: error: Batch job submission failed: Job dependency problem\n"
            after = tuple(int(t) for t in ids)
        job = self.add_job(
            name=options.get("--job-name", options.get("-J", "sbatch")),
            script=script,
            indices=indices,
            throttle=throttle,
            time_limit_s=None if limit_s is None else float(limit_s),
            requeue="--no-requeue" not in options,
        )
        job.after = after
        reply = f"{job.job_id};{self.cluster_name}" if self.cluster_reply else str(job.job_id)
        return 0, (reply + "\n") if "--parsable" in options else f"Submitted batch job {job.job_id}\n", ""

    def _selected(self, options: dict[str, str]) -> tuple[list[FakeJob], bool]:
        """Jobs picked by ``-j`` or ``--name``; the flag says whether a single purged id was asked for."""
        jobs = list(self.jobs.values())
        if "-j" in options:
            ids = [int(x) for x in options["-j"].split(",") if x.isdigit()]
            jobs = [self.jobs[i] for i in ids if i in self.jobs]
            return jobs, len(ids) == 1
        if "--name" in options:
            names = set(options["--name"].split(","))
            jobs = [j for j in jobs if j.name in names]
        return jobs, False

    def _squeue(self, args: Sequence[str], _stdin: str | None) -> tuple[int, str, str]:
        options, _ = self._options(args)
        if options.get("-o") != SQUEUE_FORMAT:
            return 1, "", "squeue: error: the fake supports only the adapter's -o format\n"
        jobs, single = self._selected(options)
        jobs = [j for j in jobs if not j.left_queue]
        if single and not jobs:
            return 1, "", "slurm_load_jobs error: Invalid job id specified\n"
        show_all = options.get("-t") == "all"
        lines: list[str] = []
        for job in jobs:
            pending = [t for t in job.tasks.values() if t.state == "PENDING"]
            for task in job.tasks.values():
                if task.state == "PENDING" and job.is_array:
                    continue
                if task.state in TERMINAL and not show_all:
                    continue
                task_col = "N/A" if task.index is None else str(task.index)
                printed = str(job.job_id) if task.index is None else f"{job.job_id}_{task.index}"
                lines.append(self._squeue_line(job, task, task_col, printed))
            if job.is_array and pending:
                spec = format_indices([t.index for t in pending if t.index is not None])
                spec += f"%{job.throttle}" if job.throttle is not None else ""
                lines.append(self._squeue_line(job, pending[0], spec, f"{job.job_id}_[{spec}]"))
        return 0, "".join(line + "\n" for line in lines), ""

    def _squeue_line(self, job: FakeJob, task: FakeTask, task_col: str, printed: str) -> str:
        state = "CANCELLED" if task.state.startswith("CANCELLED") else task.state
        start = "N/A" if task.start is None else self.format_time(task.start)
        fields = [str(job.job_id), task_col, printed, state, task.reason, task.node or "", self.format_time(job.submit)]
        return "|".join([*fields, start, job.name])

    def _sacct(self, args: Sequence[str], _stdin: str | None) -> tuple[int, str, str]:
        options, _ = self._options(args)
        if options.get("--format") != SACCT_FORMAT or "--parsable2" not in options:
            return 1, "", "sacct: error: the fake supports only the adapter's --parsable2 --format\n"
        jobs, _ = self._selected(options)
        if "--name" in options and "-j" not in options:
            since = self.parse_time(options["-S"]) if "-S" in options else float("inf")
            jobs = [j for j in jobs if j.submit >= since]
        lines: list[str] = []
        for job in jobs:
            if self.now - job.submit < self.accounting_lag_s:
                if "-j" in options:
                    first = next(iter(job.tasks.values()))
                    lines.append(self._sacct_line(str(job.job_id), first.state, first, job, "allocation"))
                continue
            lines.extend(self._sacct_job(job, duplicates="-D" in options, steps="-X" not in options))
        return 0, "".join(line + "\n" for line in lines), ""

    def _sacct_job(self, job: FakeJob, *, duplicates: bool, steps: bool) -> list[str]:
        lines: list[str] = []
        pending: list[int] = []
        for task in job.tasks.values():
            printed = str(job.job_id) if task.index is None else f"{job.job_id}_{task.index}"
            if task.state == "PENDING" and job.is_array and not task.history and task.index is not None:
                pending.append(task.index)
                continue
            if duplicates:
                for old in task.history:
                    lines.append(
                        self._sacct_row(
                            printed, old.state, f"{old.exit_code}:{old.signal}", old.node, old.start, old.end, job
                        )
                    )
            lines.append(self._sacct_line(printed, task.state, task, job, job.name))
            if steps and task.start is not None:
                lines.append(self._sacct_line(printed + ".batch", task.state, task, job, "batch"))
        if pending:
            spec = format_indices(pending) + (f"%{job.throttle}" if job.throttle is not None else "")
            first = job.tasks[pending[0]]
            lines.append(self._sacct_line(f"{job.job_id}_[{spec}]", "PENDING", first, job, job.name))
        return lines

    def _sacct_line(self, printed: str, state: str, task: FakeTask, job: FakeJob, name: str) -> str:
        exit_code = f"{task.exit_code}:{task.signal}"
        return self._sacct_row(printed, state, exit_code, task.node, task.start, task.end, job, name=name)

    def _sacct_row(
        self,
        printed: str,
        state: str,
        exit_code: str,
        node: str | None,
        start: float | None,
        end: float | None,
        job: FakeJob,
        *,
        name: str | None = None,
    ) -> str:
        raw = str(job.job_id) + (".batch" if printed.endswith(".batch") else "")
        fields = [printed, raw, state, exit_code, "None", node or "None assigned", self.format_time(job.submit)]
        return "|".join([*fields, self.format_time(start), self.format_time(end), job.name if name is None else name])

    def _scancel(self, args: Sequence[str], _stdin: str | None) -> tuple[int, str, str]:
        errors: list[str] = []
        for target in args:
            job_text, _, index_text = target.partition("_")
            job = self.jobs.get(int(job_text)) if job_text.isdigit() else None
            if job is None or job.left_queue:
                errors.append(f"scancel: error: Kill job error on job id {target}: Invalid job id specified\n")
                continue
            keys = [int(index_text)] if index_text.isdigit() else list(job.tasks)
            for key in keys:
                task = job.tasks.get(key)
                if task is not None and task.state not in TERMINAL:
                    if task.start is None:
                        task.start = self.now
                    self.finish(task, "CANCELLED by 0", 0, 0)
        return (1 if errors else 0), "", "".join(errors)

    def _scontrol(self, args: Sequence[str], _stdin: str | None) -> tuple[int, str, str]:
        if list(args[:2]) == ["show", "config"]:
            stamp = self.format_time(self.now)
            lines = [
                f"Configuration data as of {stamp}",
                f"ClusterName             = {self.cluster_name}",
                f"MaxArraySize            = {self.max_array_size}",
                "MaxJobCount             = 10000",
                f"MinJobAge               = {int(self.min_job_age_s)} sec",
                f"SLURM_VERSION           = {SLURM_VERSION}",
            ]
            return 0, "\n".join(lines) + "\n", ""
        if len(args) == 2 and args[0] == "requeue":
            for target in args[1].split(","):
                job = self.jobs.get(int(target)) if target.isdigit() else None
                if job is None:
                    return 1, "", f"Requeue of job {target} failed: Invalid job id specified\n"
                for task in job.tasks.values():
                    if task.state in ("RUNNING", "PENDING"):
                        self.requeue_task(task, "REQUEUED")
            return 0, "", ""
        return 1, "", f"scontrol: error: the fake does not support {' '.join(args)!r}\n"

    def _sinfo(self, args: Sequence[str], _stdin: str | None) -> tuple[int, str, str]:
        options, _ = self._options(args)
        if options.get("-o") != SINFO_FORMAT:
            return 1, "", "sinfo: error: the fake supports only the adapter's -o format\n"
        nodes = f"node[1-{len(self.nodes)}]"
        gres = f"gpu:{self.node_gpus}" if self.node_gpus else "(null)"
        shape = f"{self.node_cpus}|{self.node_memory_mb}|{gres}"
        lines = [
            f"{name}{'*' if i == 0 else ''}|up|{max_time}|{len(self.nodes)}|idle|{nodes}|{shape}"
            for i, (name, max_time) in enumerate(self.partitions.items())
        ]
        return 0, "\n".join(lines) + "\n", ""

    def _sacctmgr(self, args: Sequence[str], _stdin: str | None) -> tuple[int, str, str]:
        if f"format={SACCTMGR_ASSOC_FORMAT}" not in args:
            return 1, "", "sacctmgr: error: the fake supports only the adapter's association query\n"
        user = next((a.partition("=")[2] for a in args if a.startswith("user=")), "root")
        return 0, "".join(f"{self.cluster_name}|{a}|{user}|\n" for a in self.accounts), ""
