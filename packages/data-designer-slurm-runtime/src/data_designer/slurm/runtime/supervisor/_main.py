"""``python -m data_designer.slurm.runtime.supervisor --plan plan.json``: one shard's allocation, start to end.

In order: read the plan, find this task's shard and attempt, claim the attempt directory, then run it
(:class:`~data_designer.slurm.runtime.supervisor._attempt.Supervisor`): check the plan's digest, this
environment and its registered images' bytes (``supervisor._images``), start every server replica as an ``srun``
step, wait for each to be healthy, publish the endpoints, run the client worker, and end with exactly one
classified status (``status.json``) and exit code (:data:`EXIT_CODES`). Whatever happens, every step and the client are stopped before the supervisor
exits. SIGUSR1 (the time-limit warning), SIGTERM and SIGINT make it drain the client and end classified
(``supervisor._stopping``).

Which attempt: the plan binds each array index to (shard, attempt 1). A requeued task (same job, higher
``SLURM_RESTART_COUNT``) whose earlier run holds that attempt takes the next free number; a retry submission
sets ``DDSLURM_ATTEMPT=next`` (``sbatch --export=ALL,DDSLURM_ATTEMPT=next``) and always takes the next free
number. Either way the new attempt generates only what earlier attempts did not publish.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import FrameType

from data_designer.slurm.contracts.records import (
    EXIT_CODES,
    EXIT_NOT_OURS,
)
from data_designer.slurm.planner import RETRY_ATTEMPT_ENV
from data_designer.slurm.runtime.scheduler import CommandRunner, SubprocessRunner
from data_designer.slurm.runtime.store import (
    PRIVATE_MODES,
    AlreadyClaimed,
    AttemptWriter,
    Clock,
    RunLayout,
    apply_umask,
    claim_next_attempt,
    modes_for,
    owner_from_environment,
    system_clock,
)
from data_designer.slurm.runtime.supervisor._attempt import DEFAULT_POLL_S, DEFAULT_STOP_GRACE_S, Supervisor
from data_designer.slurm.runtime.supervisor._environment import (
    SetupError,
    TaskIdentity,
    identify_task,
    load_plan,
    run_layout,
)
from data_designer.slurm.runtime.supervisor._heartbeat import DEFAULT_HEARTBEAT_S
from data_designer.slurm.runtime.supervisor._server_metrics import SCRAPE_INTERVAL_S

"""The attempt is claimed by someone else: this process writes nothing into it."""


class AttemptTaken(Exception):
    """Another claimant holds the planned attempt."""


def claim_attempt(layout: RunLayout, task: TaskIdentity, environ: Mapping[str, str], clock: Clock) -> TaskIdentity:
    """Claim the planned attempt; a requeued task whose earlier run holds it takes the next attempt number.

    Raises AttemptTaken when another claimant (not an earlier run of this very task) holds it.
    """
    owner = owner_from_environment(environ, clock=clock)
    if environ.get(RETRY_ATTEMPT_ENV) == "next":  # a retry submission (planner.bind_retry)
        return replace(task, attempt=claim_next_attempt(layout, task.shard, owner).number)
    result = AttemptWriter(layout, task.shard, task.attempt).claim(owner)
    if not isinstance(result, AlreadyClaimed):
        return task
    held = result.owner
    requeued = (
        held is not None
        and held.job_id == owner.job_id
        and held.array_task == owner.array_task
        and held.restart_count < owner.restart_count
    )
    if not requeued:
        raise AttemptTaken(f"attempt {task.attempt} of shard {task.shard} is already claimed by {held}")
    return replace(task, attempt=claim_next_attempt(layout, task.shard, owner).number)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m data_designer.slurm.runtime.supervisor")
    parser.add_argument("--plan", type=Path, required=True, help="the execution plan (plan.json in the run directory)")
    parser.add_argument("--poll-interval-s", type=float, default=DEFAULT_POLL_S, help="readiness and exit polling")
    parser.add_argument("--heartbeat-interval-s", type=float, default=DEFAULT_HEARTBEAT_S)
    parser.add_argument("--stop-grace-s", type=float, default=DEFAULT_STOP_GRACE_S, help="TERM to KILL")
    parser.add_argument(
        "--metrics-interval-s", type=float, default=SCRAPE_INTERVAL_S, help="seconds between /metrics scrapes"
    )
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
    clock: Clock = system_clock,
) -> int:
    """Run this allocation's attempt; the exit code is :data:`EXIT_CODES` of its status."""
    args = _parser().parse_args(argv)
    env = dict(os.environ if environ is None else environ)
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
        signal.signal(signum, on_signal)
    previous_umask = apply_umask(PRIVATE_MODES)  # until the plan names the workspace's sharing
    try:
        return _run(args, env, runner, clock, stop, received)
    finally:
        os.umask(previous_umask)


def _run(
    args: argparse.Namespace,
    env: dict[str, str],
    runner: CommandRunner | None,
    clock: Clock,
    stop: threading.Event,
    received: list[str],
) -> int:
    try:
        plan = load_plan(args.plan)
        modes = modes_for(plan.allocation.workspace_sharing)
        # Files the supervisor, its steps and libraries create get the workspace's modes; srun hands a step
        # SLURM_UMASK (set by sbatch from the submitter's umask), not this process's umask.
        apply_umask(modes)
        env["SLURM_UMASK"] = f"{modes.umask:04o}"
        layout = run_layout(Path.cwd())
        task = claim_attempt(layout, identify_task(plan, env), env, clock)
    except SetupError as exc:
        print(f"supervisor: {exc.status}: {exc}", file=sys.stderr)
        return EXIT_CODES[exc.status]
    except AttemptTaken as exc:
        print(f"supervisor: not started: {exc}", file=sys.stderr)
        return EXIT_NOT_OURS
    supervisor = Supervisor(
        plan,
        layout,
        task,
        environ=env,
        runner=runner or SubprocessRunner(env=env),
        clock=clock,
        stop=stop,
        received=received,
        poll_s=args.poll_interval_s,
        heartbeat_s=args.heartbeat_interval_s,
        stop_grace_s=args.stop_grace_s,
        metrics_interval_s=args.metrics_interval_s,
    )
    return supervisor.run()
