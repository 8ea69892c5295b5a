"""The probe's bookkeeping and its job: a one-task CPU job that proves the shared workspace and the compute Python.

The job runs :func:`probe_script` on the profile's CPU partition with its account and extra sbatch
options (a :class:`~data_designer.slurm.runtime.jobs.CpuJob`, as the merge job). The script writes ``token``
(the probe id, the node and the job id) under ``workspace_root/.probe/<id>``, then runs the compute Python to import the runtime and print its
version into ``runtime.out`` (``runtime.err``, ``runtime.rc`` beside it). It always exits 0: the
job's state says whether it ran, the files say what it saw. The login side polls the job through
the scheduler adapter with backoff, cancels it when the probe times out, and reads the files back.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from data_designer.slurm.contracts import (
    TERMINAL_TASK_STATES,
    ClusterProfile,
    KeyPath,
    ProbeCheck,
    ProbeCheckName,
    ProbeStatus,
    SlurmExtensionError,
    TaskEvidence,
    __version__,
)
from data_designer.slurm.runtime.jobs import CpuJob, submit_cpu_job
from data_designer.slurm.runtime.polling import poll
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.store import read_run_file

PROBE_JOB_TIME_MINUTES = 2
_MAX_OUTPUT_BYTES = 1 << 20
"""The most of one probe output file read (they hold a few lines)."""
"""The probe job's ``--time``: it runs for seconds; a short limit lets the scheduler backfill it."""
TOKEN_GRACE_S = 10.0
"""How long a finished job's files may take to appear on the login node (NFS attribute caches)."""
FIRST_POLL_S = 0.5
MAX_POLL_S = 5.0
RUNTIME_CODE = (
    "import data_designer.slurm.runtime, importlib.metadata as m; print(m.version('data-designer-slurm-runtime'))"
)


def shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def probe_script(probe_dir: str, probe_id: str, interpreter: str | None) -> str:
    """The probe job's batch script: write the token, then (if that worked) run the compute Python."""
    q = shell_quote
    lines = [
        "#!/bin/bash",
        f"# data-designer-slurm profile probe {probe_id}: shared workspace and compute Python.",
        f"dir={q(probe_dir)}",
        f'printf \'%s %s %s\\n\' {q(probe_id)} "$(uname -n)" "${{SLURM_JOB_ID:-unknown}}" '
        '> "$dir/token.tmp" 2>/dev/null && mv -f "$dir/token.tmp" "$dir/token" || exit 0',
    ]
    if interpreter is not None:
        lines += [
            f'{q(interpreter)} -c {q(RUNTIME_CODE)} > "$dir/runtime.out" 2> "$dir/runtime.err"',
            'printf \'%s\\n\' "$?" > "$dir/runtime.rc"',
        ]
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


def _tail(text: str, lines: int = 1) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


def _read(path: Path) -> str | None:
    try:
        return read_run_file(path, _MAX_OUTPUT_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


class ProbeState:
    """One probe run: its inputs, the checks recorded so far (in order) and the facts they found."""

    def __init__(
        self,
        name: str,
        cluster: ClusterProfile,
        *,
        runner: CommandRunner,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None],
        probe_id: str,
        user: str,
        timeout_s: float,
        command_timeout_s: float,
    ) -> None:
        self.name = name
        self.cluster = cluster
        self.runner = runner
        self.clock = clock
        self.sleep = sleep
        self.probe_id = probe_id
        self.user = user
        self.timeout_s = timeout_s
        self.command_timeout_s = command_timeout_s
        self.scheduler = SlurmScheduler(runner, clock=clock, sleep=sleep, timeout_s=command_timeout_s)
        self.checks: dict[ProbeCheckName, ProbeCheck] = {}
        self.slurm_cluster: str | None = None
        self.slurm_version: str | None = None
        self.gpus: int | None = None
        self.job_id: str | None = None
        self.probe_dir: Path | None = None
        self._mark = clock()

    def record(
        self,
        name: ProbeCheckName,
        status: ProbeStatus,
        detail: str,
        *,
        hint: str | None = None,
        key: KeyPath | None = None,
    ) -> None:
        """Record one check; ``key`` is the profile key below ``clusters.<name>`` it is about."""
        now = self.clock()
        elapsed = max(0.0, (now - self._mark).total_seconds())
        self._mark = now
        self.checks[name] = ProbeCheck(
            name=name,
            status=status,
            detail=detail,
            hint=hint,
            key_path=None if key is None else ("clusters", self.name, *key),
            duration_s=round(elapsed, 3),
        )

    def blocked_by(self, *names: ProbeCheckName) -> str | None:
        """Why a dependent check cannot run: the first of ``names`` that is not ok (None when all are)."""
        for name in names:
            check = self.checks.get(name)
            if check is None or check.status != "ok":
                state = "did not run" if check is None or check.status == "not_run" else "failed"
                return f"the {name} check {state}"
        return None

    def clean_up(self) -> None:
        """Remove the probe directory unless it holds evidence of a failure (a job ran and a check did not pass)."""
        passed = all(c.status == "ok" for c in self.checks.values())
        if self.probe_dir is not None and (passed or self.job_id is None):
            shutil.rmtree(self.probe_dir, ignore_errors=True)


def run_probe_job(state: ProbeState) -> TaskEvidence | None:
    """Submit the probe job and wait for it; records ``probe_job`` and returns the job's final evidence."""
    blocked = state.blocked_by("slurm_commands", "cpu_partition", "account", "workspace")
    if blocked is not None or state.probe_dir is None:
        state.record("probe_job", "not_run", f"{blocked or 'no probe directory'}: no job was submitted")
        return None
    cluster = state.cluster
    job = CpuJob(
        job_name=f"ddslurm-probe-{state.probe_id}",
        script=probe_script(str(state.probe_dir), state.probe_id, cluster.compute_python.interpreter),
        workdir=str(state.probe_dir),
        time_limit=str(PROBE_JOB_TIME_MINUTES),
    )
    started = state.clock()
    try:
        submitted = submit_cpu_job(state.scheduler, cluster, job, since=started, operation="probe")
    except SlurmExtensionError as exc:
        state.record(
            "probe_job",
            "failed",
            f"the probe job was not submitted: {exc}",
            hint=exc.info.hint,
            key=("sbatch_options",) if cluster.sbatch_options else None,
        )
        return None
    job_id = state.job_id = submitted.job_id
    try:
        return _wait(state, job_id, started)
    except KeyboardInterrupt:  # never leave the probe job behind when the user gives up on it
        with contextlib.suppress(SlurmExtensionError):
            state.scheduler.cancel([job_id], confirm_timeout_s=5.0)
        raise


def _wait(state: ProbeState, job_id: str, started: datetime) -> TaskEvidence | None:
    """Poll with backoff until the job ends; cancel it when the probe times out."""
    last: TaskEvidence | None = None
    trouble: str | None = None
    polls = poll(
        state.timeout_s,
        FIRST_POLL_S,
        clock=state.clock,
        sleep=state.sleep,
        since=started,
        backoff=2.0,
        max_interval_s=MAX_POLL_S,
    )
    for check in polls:
        if check == 1:  # the job was just submitted: the first look is after the first interval
            continue
        try:
            observation = state.scheduler.observe([job_id])
        except SlurmExtensionError as exc:  # a passing outage: keep polling until the deadline
            trouble = str(exc)
            continue
        trouble = None
        last = next((t for t in observation.tasks if t.job_id == job_id), last)
        if last is not None and last.state in TERMINAL_TASK_STATES:
            break
    if last is None or last.state not in TERMINAL_TASK_STATES:
        _give_up(state, job_id, last, trouble)
        return None
    took = (state.clock() - started).total_seconds()
    where = f" on {last.nodes}" if last.nodes else ""
    if last.state == "completed":
        state.record("probe_job", "ok", f"job {job_id} ran{where} and completed within {took:.1f}s of submission")
    else:
        code = f" (exit code {last.exit_code})" if last.exit_code else ""
        reason = f", reason {last.reason}" if last.reason else ""
        state.record(
            "probe_job",
            "failed",
            f"job {job_id} ended {last.state}{code}{where}{reason}",
            hint=f"see 'sacct -j {job_id}' and the slurmd log of the node",
        )
    return last


def _give_up(state: ProbeState, job_id: str, last: TaskEvidence | None, trouble: str | None) -> None:
    seen: str = "not seen by squeue or sacct" if last is None else last.state
    if last is not None and last.reason:
        seen += f" ({last.reason})"
    try:
        state.scheduler.cancel([job_id])
        cancelled = "it was cancelled"
    except SlurmExtensionError as exc:
        cancelled = f"cancelling it failed: {exc}"
    error = f"; last observation error: {trouble}" if trouble else ""
    state.record(
        "probe_job",
        "failed",
        f"job {job_id} did not finish within {state.timeout_s:g}s (still {seen}); {cancelled}{error}",
        hint=f"partition {state.cluster.partitions.cpu!r} may be busy: retry with a longer probe timeout",
    )


def check_job_evidence(state: ProbeState, last: TaskEvidence | None) -> None:
    """Record ``shared_workspace`` and ``compute_runtime`` from the files the job wrote."""
    blocked = state.blocked_by("probe_job")
    if blocked is not None or state.probe_dir is None or last is None:
        reason = blocked or "no job ran"
        state.record("shared_workspace", "not_run", f"{reason}: no token to read back")
        state.record("compute_runtime", "not_run", f"{reason}: the compute Python was not run")
        return
    token_path = state.probe_dir / "token"
    token = _read_eventually(state, token_path)
    node = last.nodes or "the compute node"
    if token is None or token.split()[:1] != [state.probe_id]:
        seen = "is missing" if token is None else f"holds {token.strip()[:80]!r}, not this probe's token"
        state.record(
            "shared_workspace",
            "failed",
            f"job {state.job_id} ran on {node} but its token {str(token_path)!r} {seen} on this node",
            hint="workspace_root must be on a filesystem mounted at the same path on login and compute nodes",
            key=("workspace_root",),
        )
        state.record("compute_runtime", "not_run", "the shared_workspace check failed: the job's results are unseen")
        return
    fields = token.split()
    host = f" (host {fields[1]})" if len(fields) > 1 else ""
    state.record(
        "shared_workspace", "ok", f"job {state.job_id} on {node}{host} wrote {str(token_path)!r}; read back here"
    )
    _check_runtime(state, state.probe_dir)


def _check_runtime(state: ProbeState, probe_dir: Path) -> None:
    python = state.cluster.compute_python
    if python.interpreter is None:
        state.record(
            "compute_runtime",
            "not_run",
            f"compute_python is the image {python.image!r}: the probe runs interpreters only",
            hint="name an interpreter (compute_python.interpreter) to have it probed",
            key=("compute_python", "image"),
        )
        return
    interpreter = python.interpreter
    key = ("compute_python", "interpreter")
    fix = f"install data-designer-slurm=={__version__} into the environment of {interpreter}"
    rc_text = (_read(probe_dir / "runtime.rc") or "").strip()
    out = (_read(probe_dir / "runtime.out") or "").strip()
    err = _read(probe_dir / "runtime.err") or ""
    if not rc_text.isdigit():
        state.record("compute_runtime", "failed", "the job wrote no runtime result", hint=fix, key=key)
        return
    if rc_text != "0":
        missing = rc_text in ("126", "127")
        what = "was not found or is not executable" if missing else f"exited {rc_text}"
        state.record(
            "compute_runtime",
            "failed",
            f"{interpreter} {what} on the compute node: {_tail(err) or '(no stderr)'}",
            hint=f"point {key} at a Python that exists on the compute nodes; {fix}" if missing else fix,
            key=key,
        )
        return
    found = out.splitlines()[-1].strip() if out else ""
    if found != __version__:
        state.record(
            "compute_runtime",
            "failed",
            f"{interpreter} imports data-designer-slurm-runtime {found or '(no version printed)'}, expected {__version__}",
            hint=fix,
            key=key,
        )
        return
    state.record("compute_runtime", "ok", f"{interpreter} imports data_designer.slurm.runtime {found}")


def _read_eventually(state: ProbeState, path: Path) -> str | None:
    for _ in poll(TOKEN_GRACE_S, 1.0, clock=None, sleep=state.sleep):  # the seconds slept count, not the clock
        text = _read(path)
        if text is not None:
            break
    return text
