"""What the client worker reads before it imports the host: argv, the plan, its shard, endpoints, timings.

Argv (``planner._argv.client_argv``, bound by the supervisor): ``--plan plan.json --shard N --attempt M``,
run in the run directory (the plan's directory is the run directory). Environment from the supervisor:
``DDSLURM_ATTEMPT_DIR`` (must be this shard's attempt directory of the layout) and ``DDSLURM_ENDPOINTS``
(the ``endpoints.json`` record; default: the one in the attempt directory).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

from data_designer.slurm.contracts import ExecutionPlan, InvalidInputError, ShardPlan, SlurmExtensionError
from data_designer.slurm.contracts.records import (
    ATTEMPT_SCHEMA,
    ENDPOINTS_SCHEMA,
    ENV_ATTEMPT_DIR,
    ENV_ENDPOINTS,
    INPUTS_SCHEMA,
    AliasEndpoints,
    AttemptRecord,
    IndexRange,
)
from data_designer.slurm.runtime.store import (
    AttemptWriter,
    RecordOk,
    RunLayout,
    load_plan_file,
    read_record,
    read_submissions,
)


class WorkerInputError(Exception):
    """The worker was started wrongly (argv, plan, layout, endpoints): a client error, not a config error."""


@dataclass(frozen=True)
class WorkerArgs:
    plan: Path
    shard: int
    attempt: int


@dataclass(frozen=True)
class WorkerInputs:
    """Everything the worker needs, checked against each other."""

    plan: ExecutionPlan
    layout: RunLayout
    shard: ShardPlan
    attempt: int
    endpoints: dict[str, AliasEndpoints]
    ranges: tuple[IndexRange, ...]

    @property
    def writer(self) -> AttemptWriter:
        return AttemptWriter(self.layout, self.shard.shard, self.attempt)

    @property
    def concurrency(self) -> dict[str, int]:
        return {endpoint.alias: endpoint.concurrency for endpoint in self.plan.allocation.client.endpoints}

    @property
    def records(self) -> int:
        return sum(item.records for item in self.ranges)

    @property
    def drain_grace_s(self) -> float:
        return float(self.plan.allocation.drain_grace_s)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise WorkerInputError(f"bad worker arguments: {message}")


def parse_args(argv: Sequence[str]) -> WorkerArgs:
    parser = _Parser(prog="python -m data_designer.slurm.runtime.worker", add_help=False)
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--shard", type=int, required=True)
    parser.add_argument("--attempt", type=int, required=True)
    args = parser.parse_args(list(argv))
    return WorkerArgs(plan=args.plan, shard=args.shard, attempt=args.attempt)


def load_inputs(args: WorkerArgs, env: Mapping[str, str]) -> WorkerInputs:
    plan = _load_plan(args.plan)
    try:
        layout = RunLayout.of_run_dir(args.plan.resolve().parent)
    except InvalidInputError as exc:
        raise WorkerInputError(f"the plan {str(args.plan)!r} is not in a run directory: {exc.info.message}") from exc
    try:
        attempt_dir = layout.attempt_dir(args.shard, args.attempt)
    except Exception as exc:  # InvalidInputError from the layout: a bad shard or attempt number
        raise WorkerInputError(str(exc)) from exc
    shards = [shard for shard in plan.shards if shard.shard == args.shard]
    if not shards:
        raise WorkerInputError(f"shard {args.shard} is not in the plan (it has {len(plan.shards)} shards)")
    given = env.get(ENV_ATTEMPT_DIR)
    if given is not None and Path(given).resolve() != attempt_dir.resolve():
        raise WorkerInputError(
            f"${ENV_ATTEMPT_DIR} is {given!r}, but shard {args.shard} attempt {args.attempt} "
            f"lives in {str(attempt_dir)!r}"
        )
    endpoints_path = Path(env.get(ENV_ENDPOINTS) or layout.endpoints(args.shard, args.attempt))
    endpoints = _load_endpoints(endpoints_path, plan)
    shard = shards[0]
    return WorkerInputs(
        plan=plan,
        layout=layout,
        shard=shard,
        attempt=args.attempt,
        endpoints=endpoints,
        ranges=_assigned_ranges(layout, shard, args.attempt),
    )


def _assigned_ranges(layout: RunLayout, shard: ShardPlan, attempt: int) -> tuple[IndexRange, ...]:
    """The ranges the supervisor assigned this attempt (``attempt.json``), checked to lie in the shard."""
    path = layout.attempt_record(shard.shard, attempt)
    found = read_record(path, ATTEMPT_SCHEMA)
    if not isinstance(found, RecordOk):
        raise WorkerInputError(f"no valid attempt record at {str(path)!r}: {found.status}")
    assigned = found.payload.assigned
    if not assigned:
        raise WorkerInputError(f"the attempt record {str(path)!r} assigns no record ranges")
    previous = shard.start
    for item in assigned:
        if item.start < previous or item.stop > shard.stop or item.start >= item.stop:
            raise WorkerInputError(
                f"the attempt record {str(path)!r} assigns [{item.start}, {item.stop}), which is not a sorted "
                f"disjoint part of shard {shard.shard}'s range [{shard.start}, {shard.stop})"
            )
        previous = item.stop
    return assigned


def _load_plan(path: Path) -> ExecutionPlan:
    """The plan as ``execute`` writes it, read and digest-checked by ``store.load_plan_file``."""
    try:
        plan = load_plan_file(path)
    except SlurmExtensionError as exc:
        raise WorkerInputError(exc.info.message) from exc
    if plan.run.data_designer.inline is None:
        raise WorkerInputError("the plan does not hold the Data Designer config inline")
    return plan


def _load_endpoints(path: Path, plan: ExecutionPlan) -> dict[str, AliasEndpoints]:
    found = read_record(path, ENDPOINTS_SCHEMA)
    if not isinstance(found, RecordOk):
        raise WorkerInputError(f"no valid endpoints record at {str(path)!r}: {found.status}")
    endpoints = dict(found.payload.aliases)
    for planned in plan.allocation.client.endpoints:
        given = endpoints.get(planned.alias)
        if given is None or not given.base_urls:
            raise WorkerInputError(f"the endpoints record has no base URL for model alias {planned.alias!r}")
        if given.kind != planned.kind:
            raise WorkerInputError(f"model alias {planned.alias!r} is {planned.kind} in the plan, {given.kind} here")
    return endpoints


def config_mapping(inputs: WorkerInputs) -> dict[str, Any]:
    """The plan's inline config, with a local seed dataset pointed at the run's snapshot when there is one."""
    inline = inputs.plan.run.data_designer.inline
    assert inline is not None  # checked by _load_plan
    found = read_record(inputs.layout.inputs_manifest, INPUTS_SCHEMA)
    if not isinstance(found, RecordOk) or found.payload.seed is None:
        return dict(inline)
    rewrite = found.payload.seed
    keys = rewrite.key_path.split(".")
    config: dict[str, Any] = dict(inline)
    if "data_designer" in config and keys[0] != "data_designer":
        keys = ["data_designer", *keys]
    node = config
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            raise WorkerInputError(f"the snapshot's seed rewrite names {rewrite.key_path!r}, absent from the config")
        node[key] = child = dict(child)
        node = child
    if node.get(keys[-1]) != rewrite.original:
        raise WorkerInputError(f"the config's {rewrite.key_path!r} is not {rewrite.original!r} as snapshotted")
    node[keys[-1]] = str(inputs.layout.run_dir / rewrite.snapshot)
    return config


@dataclass(frozen=True)
class EarlierTimings:
    queue_wait_s: float | None
    server_start_s: float | None


def earlier_timings(inputs: WorkerInputs) -> EarlierTimings:
    """Queue wait and server start from the run's records, where they are known (never fails)."""
    found = read_record(inputs.layout.attempt_record(inputs.shard.shard, inputs.attempt), ATTEMPT_SCHEMA)
    if not isinstance(found, RecordOk):
        return EarlierTimings(None, None)
    attempt: AttemptRecord = found.payload
    server_start = None
    if attempt.servers_spawned_at is not None and attempt.servers_ready_at is not None:
        server_start = max((attempt.servers_ready_at - attempt.servers_spawned_at).total_seconds(), 0.0)
    queue_wait = None
    if inputs.attempt == 1:
        submitted = _latest_submission(inputs.layout, before=attempt.supervisor_started_at)
        if submitted is not None:
            queue_wait = max((attempt.supervisor_started_at - submitted).total_seconds(), 0.0)
    return EarlierTimings(queue_wait, server_start)


def _latest_submission(layout: RunLayout, *, before: datetime) -> datetime | None:
    try:
        submissions = read_submissions(layout)
    except Exception:  # unreadable: the timing is unknown, nothing else depends on it
        return None
    return max((s.submitted_at for s in submissions if s.submitted_at <= before), default=None)
