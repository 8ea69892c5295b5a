"""``classify(snapshot, observation, now) -> RunStatus``: the pure rules that turn a run's records plus one
scheduler observation into shard and run states. The rules are the table in ``docs/architecture/status.md``;
every row has a named test (``test_runtime_status_classify.py``). No I/O, no clock, no environment.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime

from data_designer.slurm.contracts import (
    TERMINAL_TASK_STATES,
    AttemptState,
    AttemptStatus,
    DegradedSource,
    Observation,
    RunState,
    RunStatus,
    SchedulerEvidence,
    ShardState,
    ShardStatus,
    TaskEvidence,
    redact,
)
from data_designer.slurm.contracts.records import EXIT_CODES, EXIT_NOT_OURS
from data_designer.slurm.planner import count_indices, missing_ranges
from data_designer.slurm.runtime.status._merge_state import merge_status
from data_designer.slurm.runtime.store import (
    AttemptSnapshot,
    RetrySnapshot,
    RunSnapshot,
    ShardSnapshot,
    TaskRef,
    format_timestamp,
    parse_timestamp,
)

DEFAULT_GRACE_S = 60.0
"""How long a terminal task may lack ``status.json`` before it is inconsistent (shared filesystems cache
attributes), and how long after submission a job may be absent from both sources (accounting lag)."""
DEFAULT_STALE_BEATS = 4
"""Missed heartbeat intervals after which a running attempt is stale."""
DEFAULT_RETRY_GRACE_S = 300.0
"""How long a retry intent may lack its submission record before its shards are missing (``retry_unsubmitted``):
longer than its ``sbatch`` calls can take (60 s each)."""
PREFLIGHT_EXIT = EXIT_CODES["environment_mismatch"]
"""The batch script's own exit when the compute Python cannot import the runtime (before any attempt exists)."""
_IMPORT_FAILURE = "No module named 'data_designer"
"""What the batch script's import check prints when the compute Python lacks the runtime."""

_PARTIAL_ENDINGS = frozenset({"time_limit", "preempted"})
_SCHEDULER_DECIDED = frozenset({"pending", "running", "stale", "scheduler_inconsistent", "missing"})
"""States only a live observation can give: with cached evidence they become unknown (the last one is shown)."""
_RECORD_REASONS = frozenset({"no_submission", "manifest_invalid", "retry_submitting", "retry_unsubmitted"})
"""Reasons of those states that the records alone decide (rows S3, E1): they stand without the scheduler."""


@dataclass(frozen=True)
class Rules:
    """The tunable thresholds of classification (the table's defaults)."""

    grace_s: float = DEFAULT_GRACE_S
    stale_beats: int = DEFAULT_STALE_BEATS
    retry_grace_s: float = DEFAULT_RETRY_GRACE_S


@dataclass(frozen=True)
class _Verdict:
    state: ShardState
    reason: str | None = None
    message: str | None = None
    last_log_line: str | None = None
    phase: str | None = None
    live_records: int = 0


def classify(
    snapshot: RunSnapshot,
    observation: Observation | None,
    now: datetime,
    *,
    evidence: SchedulerEvidence,
    rules: Rules = Rules(),
    scheduler_calls: int = 0,
    asked: bool = True,
    scheduler_error: str | None = None,
) -> RunStatus:
    """The run's status from its snapshot and one observation (None: the scheduler could not be asked and no
    observation was ever recorded). ``evidence`` says whether ``observation`` is live or the last recorded one;
    ``asked=False`` (``status --no-refresh``): nobody tried to ask the scheduler, so a cached observation's states
    are shown as they were instead of becoming unknown (row C1)."""
    tasks = _evidence_index(observation)
    shards = tuple(
        _classify_shard(shard, snapshot, tasks, observation, now, rules, evidence == "cached" and asked)
        for shard in snapshot.shards
    )
    counts = Counter(shard.state for shard in shards)
    records_total = sum(shard.records_total for shard in shards)
    records_done = sum(shard.records_done for shard in shards)
    rate = _rate(snapshot, {shard.shard for shard in shards if shard.state == "running"})
    remaining = records_total - records_done
    observed_at = observation.observed_at if observation is not None else None
    return RunStatus(
        run_id=snapshot.run.run_id,
        run_dir=str(snapshot.layout.run_dir),
        name=snapshot.run.name,
        cluster=snapshot.run.cluster,
        state=_run_state(counts, snapshot),
        records_total=records_total,
        records_done=records_done,
        shards_total=len(shards),
        counts={state: counts[state] for state in sorted(counts)},
        shards=shards,
        checked_at=format_timestamp(now),
        evidence=evidence,
        observed_at=observed_at,
        evidence_age_s=None if observed_at is None else max(0.0, (now - parse_timestamp(observed_at)).total_seconds()),
        squeue=observation.squeue if observation is not None else None,
        sacct=observation.sacct if observation is not None else None,
        scheduler_calls=scheduler_calls,
        scheduler_error=scheduler_error,
        files_read=snapshot.stats.files_read,
        eta_s=remaining / rate if rate and remaining > 0 else (0.0 if remaining == 0 else None),
        records_per_s=rate,
        submission_error=snapshot.submission_error,
        merge=merge_status(
            snapshot, observation, now, grace_s=rules.grace_s, evidence=evidence, asked=asked
        ),  # rows M1-M10
        degraded=_degraded(observation, evidence, shards),
    )


_HIDES = {
    "sacct": "jobs that ended and left squeue (their end, exit code and node) cannot be seen",
    "squeue": "pending reasons, and jobs that sacct has not recorded yet, cannot be seen",
}


def _degraded(
    observation: Observation | None, evidence: SchedulerEvidence, shards: tuple[ShardStatus, ...]
) -> tuple[DegradedSource, ...]:
    """Row O1: one source failed while the other answered: live but partial evidence, and the shards it leaves
    unknown (their verdict depends on the missing source)."""
    if observation is None or evidence != "live":
        return ()
    depends = tuple(s.shard for s in shards if s.state == "unknown" and s.reason == "scheduler_unavailable")
    found = []
    for report in (observation.squeue, observation.sacct):
        if report.status in ("ok", "not_run"):
            continue
        found.append(
            DegradedSource(
                source=report.source,
                status=report.status,
                detail=report.detail,
                hides=_HIDES[report.source],
                shards=depends,
            )
        )
    return tuple(found)


def _classify_shard(
    shard: ShardSnapshot,
    snapshot: RunSnapshot,
    tasks: dict[tuple[str, int], TaskEvidence],
    observation: Observation | None,
    now: datetime,
    rules: Rules,
    outage: bool,
) -> ShardStatus:
    anomalies: list[str] = []
    attempts = tuple(_attempt_status(a, shard, tasks, now) for a in shard.attempts)
    if shard.overlap:
        anomalies.append(f"attempts overlap on {count_indices(shard.overlap)} record(s); the lowest attempt keeps them")
    for attempt in shard.attempts:
        anomalies.extend(f"attempt {attempt.number}: {problem}" for problem in attempt.problems)
    live = [ref for ref in shard.tasks if not _superseded(ref, shard, tasks, anomalies)]
    latest = live[-1] if live else (shard.tasks[-1] if shard.tasks else None)
    ev = tasks.get((latest.job_id, latest.array_task)) if latest is not None else None
    verdict = _verdict(shard, snapshot, latest, ev, observation, now, rules, anomalies)
    if verdict.state == "cancelled":
        verdict = _cancelled_by_user(verdict, shard, snapshot, latest)
    if outage and verdict.state in _SCHEDULER_DECIDED and verdict.reason not in _RECORD_REASONS and observation:
        # The scheduler could not be asked now: what only it can tell is unknown; the last known state is shown.
        age = max(0.0, (now - parse_timestamp(observation.observed_at)).total_seconds())
        verdict = replace(
            verdict,
            state="unknown",
            reason="scheduler_unavailable",
            message=f"the scheduler could not be asked; last known: {verdict.state} ({age:.0f}s ago)",
        )
    done = shard.records_done
    if shard.damaged and verdict.state != "damaged":
        anomalies.extend(f"part {d.path}: {d.detail}; retry regenerates its records" for d in shard.damaged)
    return ShardStatus(
        shard=shard.plan.shard,
        state=verdict.state,
        records_total=shard.plan.records,
        records_done=min(shard.plan.records, done + verdict.live_records),
        missing=shard.missing,
        reason=verdict.reason,
        message=_redacted(verdict.message),
        last_log_line=_redacted(verdict.last_log_line),
        phase=verdict.phase,  # type: ignore[arg-type]  # a heartbeat Phase or None
        job_id=latest.job_id if latest is not None else None,
        array_task=latest.array_task if latest is not None else None,
        attempts=attempts,
        anomalies=tuple(anomalies),
        damaged=shard.damaged,
    )


def _redacted(text: str | None) -> str | None:
    """A line from a job log or ``slurm-*.err`` (or a message quoting one) as a status shows it, human and JSON:
    secrets redacted as the records redact them (``contracts.redact``)."""
    return None if text is None else redact(text)


def _verdict(
    shard: ShardSnapshot,
    snapshot: RunSnapshot,
    latest: TaskRef | None,
    ev: TaskEvidence | None,
    observation: Observation | None,
    now: datetime,
    rules: Rules,
    anomalies: list[str],
) -> _Verdict:
    # Row D: every index is published but some parts are lost or corrupt, and no retry has set them aside yet.
    if shard.damaged and _only_damage(shard):
        return _damaged(shard, snapshot)
    # Row 1: valid manifests cover the whole range. Nothing else can make a shard succeeded.
    if not shard.missing:
        if ev is not None and ev.state in TERMINAL_TASK_STATES and ev.state != "completed":
            anomalies.append(f"Slurm reports {ev.raw_state} (exit {ev.exit_code}) but the manifests are complete")
        return _Verdict("succeeded")
    held = _held_by_retry(shard, snapshot, latest)
    if held is not None:
        # Row 0: a retry took this shard and its submission is not recorded yet (being submitted, or orphaned).
        return _retry_verdict(held, now, rules)
    if latest is None and shard.attempts:
        # Row S2a: no submission record holds the shard's task, but an allocation wrote its attempt records: it was
        # submitted (sbatch's reply was lost, or execute stopped before recording it). Attempt evidence wins.
        return _unrecorded(shard, snapshot)
    if latest is None:
        # Row 2: nothing was ever submitted for this shard.
        error = snapshot.submission_error
        if error is not None or not any(s.jobs for s in snapshot.submissions):
            return _Verdict("not_submitted", reason="not_submitted", message=error)
        return _Verdict("missing", reason="no_submission", message="no submission record holds this shard's task")
    own = _attempt_of(shard, latest, ev)
    if ev is not None and ev.state in ("pending", "requeued"):
        return _Verdict("pending", reason=ev.reason if ev.reason not in (None, "None") else None)
    if own is not None and own.status is not None:
        # The attempt's classified ending is final, even while Slurm still completes the job or the evidence is an
        # older (cached) observation that saw it running; Slurm's own terminal state may say more (row N1).
        return _ended(shard, own, ev, snapshot)
    if ev is not None and ev.state == "running":
        return _running(shard, own, latest, ev, now, rules)
    ended = _latest_status(shard)
    if ended is not None and ended.number >= shard.attempts[-1].number and not _claimed_by_a_task(ended, shard):
        # The newest attempt ended but its claim names none of the shard's tasks (unreadable): its ending stands.
        # One claimed by an earlier task speaks for that task only, never for a later (retry) task unseen now.
        return _ended(shard, ended, None, snapshot)
    if ev is not None and ev.state == "unknown":  # a well-formed Slurm state this code does not know
        return _Verdict("unknown", reason="unknown_task_state", message=f"Slurm reports the state {ev.raw_state!r}")
    if ev is not None:  # terminal in Slurm, and the task's own attempt wrote no status.json
        return _terminal_without_status(shard, snapshot, own, latest, ev, now, rules)
    return _unseen(shard, own, latest, observation, now, rules)


def _unrecorded(shard: ShardSnapshot, snapshot: RunSnapshot) -> _Verdict:
    """Row S2a: the newest attempt's ending when it wrote one, else unknown: its job is not observed (no submission
    record names it), so only ``execute --run-id``, which finds the run's jobs by name and records them, can tell."""
    newest = shard.attempts[-1]
    if newest.status is not None:
        return _ended(shard, newest, None, snapshot)
    claim = newest.claim
    by = f" by job {claim.job_id}_{claim.array_task} on {claim.host}" if claim is not None and claim.job_id else ""
    return _Verdict(
        "unknown",
        reason="submission_record_missing",
        message=f"attempt {newest.number} was claimed{by}, but no submission record holds the shard's task "
        "(sbatch's reply was lost, or execute stopped before recording it): 'data-designer slurm execute RUN_FILE "
        f"--run-id {snapshot.run.run_id}' finds its jobs by name and records them",
        last_log_line=newest.last_log_line,
        phase=newest.heartbeat.phase if newest.heartbeat is not None else None,
    )


def _held_by_retry(shard: ShardSnapshot, snapshot: RunSnapshot, latest: TaskRef | None) -> RetrySnapshot | None:
    """The newest retry generation whose intent names the shard and has no submission record, unless a task of that
    generation (or a later one) is already known."""
    number = shard.plan.shard
    for retry in reversed(snapshot.unsubmitted_retries()):
        if number in retry.shards and (latest is None or latest.generation < retry.generation):
            return retry
    return None


def _retry_verdict(retry: RetrySnapshot, now: datetime, rules: Rules) -> _Verdict:
    since = retry.held_since
    who = retry.resumes[-1].requested_by if retry.resumes else retry.intent.requested_by
    holder = f"{who.user}@{who.host} (pid {who.pid})"
    age = (now - since).total_seconds() if since is not None else None
    if age is not None and age <= rules.retry_grace_s:
        return _Verdict(
            "pending",
            reason="retry_submitting",
            message=f"retry generation {retry.generation} is being submitted by {holder} ({age:.0f}s ago)",
        )
    when = format_timestamp(since) if since is not None else "an unknown time"
    return _Verdict(
        "missing",
        reason="retry_unsubmitted",
        message=f"retry generation {retry.generation} by {holder} at {when} has no submission record; "
        "run 'data-designer slurm retry RUN' again: it finds its jobs by name, or submits them",
    )


def _cancelled_by_user(
    verdict: _Verdict, shard: ShardSnapshot, snapshot: RunSnapshot, latest: TaskRef | None
) -> _Verdict:
    """Row C2: a cancelled shard that a ``cancel`` record covers (made after its task was submitted) was cancelled by
    that user."""
    for cancellation in reversed(snapshot.cancellations):
        if not cancellation.covers(shard.plan.shard):
            continue
        made = cancellation.written_at or cancellation.record.requested_by.time
        if latest is not None and made < latest.submitted_at:
            return verdict  # cancelled before this task existed: Slurm's own reason stands
        who = cancellation.record.requested_by
        message = f"cancelled by {who.user}@{who.host} at {format_timestamp(made)} (data-designer slurm cancel)"
        return replace(verdict, state="cancelled", reason="cancelled_by_user", message=message)
    return verdict


def _running(
    shard: ShardSnapshot, own: AttemptSnapshot | None, latest: TaskRef, ev: TaskEvidence, now: datetime, rules: Rules
) -> _Verdict:
    started = parse_timestamp(ev.start_time) if ev.start_time else latest.submitted_at
    interval = own.record.heartbeat_interval_s if own is not None and own.record is not None else None
    beat = own.heartbeat_written_at if own is not None else None
    last = max(started, beat) if beat is not None else started
    allowed = rules.stale_beats * interval if interval is not None else max(rules.grace_s, 0.0)
    age = (now - last).total_seconds()
    phase = own.heartbeat.phase if own is not None and own.heartbeat is not None else None
    line = own.last_log_line if own is not None else None
    if age > allowed:
        return _Verdict(
            "stale",
            reason="no_heartbeat",
            message=f"no heartbeat for {age:.0f}s (allowed {allowed:.0f}s) while Slurm says {ev.raw_state}",
            last_log_line=line,
            phase=phase,
        )
    progress = own.progress.records_done if own is not None and own.progress is not None else 0
    return _Verdict("running", phase=phase or "starting", last_log_line=line, live_records=progress)


def _ended(shard: ShardSnapshot, attempt: AttemptSnapshot, ev: TaskEvidence | None, snapshot: RunSnapshot) -> _Verdict:
    status = attempt.status
    assert status is not None
    line = _last_own_line(status.log_tail) or attempt.last_log_line
    done = shard.records_done
    cause = _slurm_cause(ev, snapshot) if ev is not None and status.status != "succeeded" else None
    if status.status == "node_fail" or (cause is not None and cause.reason == "node_fail"):
        # Row N1: a node of the allocation failed or was set DOWN: a failure (retry takes it), never a user's cancel.
        message = status.message if status.status == "node_fail" else None
        if cause is not None and (message is None or (ev is not None and ev.nodes and ev.nodes not in message)):
            message = f"{cause.message}" + (f"; the supervisor said: {message}" if message else "")
        return _Verdict("failed", reason="node_fail", message=message, last_log_line=line)
    if cause is not None and cause.reason == "out_of_memory":
        # Row N2: the kernel's OOM killer ended a process of the job: Slurm says OUT_OF_MEMORY, whatever it broke.
        return _Verdict(
            "failed",
            reason="out_of_memory",
            message=f"{cause.message}; the supervisor said: {status.status}: {status.message}",
            last_log_line=line,
        )
    if status.status == "preempted" and ev is not None and ev.restarts:
        # Row N3: a preemption with its requeue evidence.
        requeued = f"{status.message} (Slurm requeued the job {ev.restarts} time(s), state {ev.raw_state})"
        state: ShardState = "partial" if done else "failed"
        return _Verdict(state, reason="preempted", message=requeued, last_log_line=line)
    if status.status == "succeeded":
        reason = "manifest_invalid"
        message = "status.json says succeeded but no valid result manifest covers the range (missing or corrupt)"
        return _Verdict("partial" if done else "missing", reason=reason, message=message, last_log_line=line)
    if status.status == "cancelled":
        return _Verdict("cancelled", reason="cancelled", message=status.message, last_log_line=line)
    if status.status in _PARTIAL_ENDINGS and done:
        return _Verdict("partial", reason=status.status, message=status.message, last_log_line=line)
    return _Verdict("failed", reason=status.status, message=status.message, last_log_line=line)


@dataclass(frozen=True)
class _Cause:
    reason: str
    message: str


def _slurm_cause(ev: TaskEvidence, snapshot: RunSnapshot) -> _Cause | None:
    """What Slurm's terminal state says that an attempt's own ending cannot: a node failure, or the OOM killer."""
    where = f" on {ev.nodes}" if ev.nodes and ev.nodes not in ("None", "(null)") else ""
    detail = f"Slurm: {ev.raw_state}" + (f", reason {ev.reason}" if ev.reason not in (None, "None") else "")
    if ev.state == "node_fail":
        node = f"node {ev.nodes}" if where else "a node of the allocation"
        return _Cause(
            "node_fail",
            f"{node} failed or was set DOWN ({detail}); 'data-designer slurm retry RUN' runs the shard again",
        )
    if ev.state == "out_of_memory":
        return _Cause("out_of_memory", f"the job ran out of memory{where} ({detail}; {_memory_asked(snapshot)})")
    return None


def _memory_asked(snapshot: RunSnapshot) -> str:
    allocation = snapshot.plan.allocation
    if allocation.exclusive:
        return "it asked for all of each node's memory (--mem=0, exclusive); raise the deployments' memory or use larger nodes"
    if allocation.memory_mb_per_node is not None:
        return (
            f"it asked for --mem={allocation.memory_mb_per_node}M per node; raise client.memory_gb or the "
            "deployments' memory_gb_per_replica"
        )
    return "its memory request is unknown"


def _only_damage(shard: ShardSnapshot) -> bool:
    """Every index the shard misses is in a damaged part: the damage alone keeps it from succeeded."""
    covered = [item for ranges in shard.kept.values() for item in ranges]
    covered += [damage.range for damage in shard.damaged]
    return not missing_ranges(shard.plan.range, covered)


def _damaged(shard: ShardSnapshot, snapshot: RunSnapshot) -> _Verdict:
    first = shard.damaged[0]
    more = f" (+{len(shard.damaged) - 1} more damaged part(s))" if len(shard.damaged) > 1 else ""
    records = f"records {first.range.start}-{first.range.stop - 1}"
    message = (
        f"part {first.path} ({records}): {first.detail}{more}; run 'data-designer slurm retry "
        f"{snapshot.run.run_id} --shard {shard.plan.shard}' to set it aside and generate its records again"
    )
    return _Verdict("damaged", reason=f"part_{first.problem}", message=message)


def _last_own_line(log_tail: tuple[str, ...]) -> str | None:
    """The last line the step itself wrote: srun appends its own ``srun: error: ... Exited with exit code N`` and
    ``srun: ... Terminating StepId=...`` lines after a failing step's output, which never say why it failed."""
    own = [line for line in log_tail if not line.startswith("srun: ")]
    return own[-1] if own else (log_tail[-1] if log_tail else None)


def _preflight_failed(shard: ShardSnapshot) -> bool:
    """Slurm's stderr of the shard's task shows the batch script's import check failing."""
    lines = shard.batch_errors[-1].lines if shard.batch_errors else ()
    return any(_IMPORT_FAILURE in line for line in lines)


def _terminal_without_status(
    shard: ShardSnapshot,
    snapshot: RunSnapshot,
    own: AttemptSnapshot | None,
    latest: TaskRef,
    ev: TaskEvidence,
    now: datetime,
    rules: Rules,
) -> _Verdict:
    # this incarnation never claimed: the preflight failed (the exit code is in sacct; squeue alone prints none,
    # but Slurm's own stderr of the task shows the import check failing)
    if own is None and (ev.exit_code == PREFLIGHT_EXIT or _preflight_failed(shard)):
        lines = shard.batch_errors[-1].lines if shard.batch_errors else ()
        cause = next((line for line in reversed(lines) if "Error" in line), lines[-1] if lines else None)
        return _Verdict(
            "failed",
            reason="environment_mismatch",
            message=cause or "the batch script could not import the runtime in the compute Python (exit 6)",
            last_log_line=lines[-1] if lines else None,
        )
    if ev.state == "cancelled":
        return _Verdict("cancelled", reason="cancelled", message=f"Slurm: {ev.raw_state}")
    ended_at = parse_timestamp(ev.end_time) if ev.end_time else None
    # squeue prints no end time: while only it shows the end (sacct lags), the grace cannot have passed
    unproven = ended_at is None and ev.source == "squeue"
    if unproven or (ended_at is not None and (now - ended_at).total_seconds() < rules.grace_s):
        return _Verdict("running", phase="stopping", message=f"Slurm: {ev.raw_state}; waiting for status.json")
    slurm = _slurm_cause(ev, snapshot)
    if slurm is not None:  # rows N1, N2 without status.json: the node died with the supervisor, or OOM killed it
        own_line = own.last_log_line if own is not None else None
        return _Verdict("failed", reason=slurm.reason, message=slurm.message, last_log_line=own_line)
    detail = f"Slurm says {ev.raw_state}" + (f" (exit {ev.exit_code})" if ev.exit_code is not None else "")
    if own is None and shard.batch_errors:  # it ended before claiming: Slurm's own stderr says why
        line: str | None = shard.batch_errors[-1].lines[-1]
        message = f"{detail} before it claimed an attempt"
    else:
        line = own.last_log_line if own is not None else None
        message = f"{detail} but the attempt wrote no status.json"
    return _Verdict("scheduler_inconsistent", reason="no_status_record", message=message, last_log_line=line)


def _unseen(
    shard: ShardSnapshot,
    own: AttemptSnapshot | None,
    latest: TaskRef,
    observation: Observation | None,
    now: datetime,
    rules: Rules,
) -> _Verdict:
    line = own.last_log_line if own is not None else None
    if observation is None or observation.sacct.status != "ok":
        why = "the scheduler could not be asked" if observation is None else f"sacct {observation.sacct.status}"
        return _Verdict(
            "unknown", reason="scheduler_unavailable", message=f"no scheduler evidence ({why})", last_log_line=line
        )
    if (now - latest.submitted_at).total_seconds() < rules.grace_s or observation.accounting_lag:
        return _Verdict("pending", reason="accounting_lag")
    return _Verdict(
        "missing", reason="no_evidence", message="neither squeue nor sacct knows the job", last_log_line=line
    )


def _attempt_status(
    attempt: AttemptSnapshot, shard: ShardSnapshot, tasks: dict[tuple[str, int], TaskEvidence], now: datetime
) -> AttemptStatus:
    claim = attempt.claim
    ev = (
        tasks.get((claim.job_id, claim.array_task)) if claim and claim.job_id and claim.array_task is not None else None
    )
    published = count_indices(shard.kept.get(attempt.number, ()))
    status = attempt.status
    state: AttemptState
    if status is None and attempt.manifest is not None and attempt.manifest.complete:
        state = "succeeded"  # read as its complete manifest alone
    elif status is not None:
        state = (
            "succeeded"
            if status.status == "succeeded" and attempt.manifest and attempt.manifest.complete
            else ("partial" if published else ("cancelled" if status.status == "cancelled" else "failed"))
        )
    elif ev is not None and claim is not None and ev.restarts > claim.restart_count:
        state = "failed"  # this incarnation was requeued away before it wrote a status
    elif ev is not None and ev.state == "running":
        state = "running"
    elif ev is not None and ev.state in ("pending", "requeued"):
        state = "pending"
    elif ev is not None:
        state = "scheduler_inconsistent"
    else:
        state = "unknown"
    beat = attempt.heartbeat_written_at
    return AttemptStatus(
        attempt=attempt.number,
        state=state,
        job_id=claim.job_id if claim else None,
        array_task=claim.array_task if claim else None,
        restart_count=claim.restart_count if claim else None,
        scheduler_state=ev.raw_state if ev is not None else None,
        final_status=status.status if status else None,
        exit_code=status.exit_code if status else None,
        message=status.message if status else None,
        phase=attempt.heartbeat.phase if attempt.heartbeat else None,
        heartbeat_age_s=max(0.0, (now - beat).total_seconds()) if beat is not None else None,
        records_done=attempt.progress.records_done if attempt.progress else None,
        records_published=published if attempt.manifest is not None else None,
        problems=attempt.problems,
    )


def _superseded(
    ref: TaskRef, shard: ShardSnapshot, tasks: dict[tuple[str, int], TaskEvidence], notes: list[str]
) -> bool:
    """A task that exited 4 (another process held its attempt's claim) and owns no attempt: a late duplicate."""
    ev = tasks.get((ref.job_id, ref.array_task))
    if ev is None or ev.state not in TERMINAL_TASK_STATES or ev.exit_code != EXIT_NOT_OURS:
        return False
    if any(a.claim and a.claim.job_id == ref.job_id and a.claim.array_task == ref.array_task for a in shard.attempts):
        return False
    notes.append(f"task {ref.job_id}_{ref.array_task} was superseded (exit {EXIT_NOT_OURS}: its attempt was taken)")
    return True


def _attempt_of(shard: ShardSnapshot, ref: TaskRef, ev: TaskEvidence | None) -> AttemptSnapshot | None:
    """The attempt of the task's current incarnation: the newest attempt claimed by this task (job id, array task),
    None when the evidence counts more restarts than its claim (the requeued incarnation has not claimed yet).

    The evidence's restart count is a lower bound (squeue alone counts none, sacct may lag a requeue), so a claim
    with more restarts than the evidence shows is still the current one.
    """
    mine = [
        a
        for a in shard.attempts
        if a.claim is not None and a.claim.job_id == ref.job_id and a.claim.array_task == ref.array_task
    ]
    if not mine:
        return None
    newest = mine[-1]
    if ev is not None and newest.claim is not None and newest.claim.restart_count < ev.restarts:
        return None
    return newest


def _claimed_by_a_task(attempt: AttemptSnapshot, shard: ShardSnapshot) -> bool:
    claim = attempt.claim
    return claim is not None and any(
        ref.job_id == claim.job_id and ref.array_task == claim.array_task for ref in shard.tasks
    )


def _latest_status(shard: ShardSnapshot) -> AttemptSnapshot | None:
    ended = [a for a in shard.attempts if a.status is not None]
    return ended[-1] if ended else None


def _run_state(counts: Counter[ShardState], snapshot: RunSnapshot) -> RunState:
    total = sum(counts.values())
    if counts["not_submitted"] == total:
        return "not_submitted"
    if counts["succeeded"] == total:
        return "succeeded"
    if counts["running"]:
        return "running"
    if counts["pending"]:
        return "pending"
    if counts["unknown"]:
        return "unknown"
    for state in ("failed", "cancelled", "partial", "damaged"):
        if counts[state]:
            return state
    return "attention"


def _rate(snapshot: RunSnapshot, running: set[int]) -> float | None:
    """Records per second over the running shards' live attempts (progress since each client started)."""
    done = 0
    seconds = 0.0
    for shard in snapshot.shards:
        if shard.plan.shard not in running:
            continue
        for attempt in shard.attempts:
            if attempt.status is not None or attempt.progress is None or attempt.record is None:
                continue
            start = attempt.record.client_started_at
            if start is None or attempt.progress_written_at is None:
                continue
            elapsed = (attempt.progress_written_at - start).total_seconds()
            if elapsed > 0 and attempt.progress.records_done:
                done += attempt.progress.records_done
                seconds = max(seconds, elapsed)
    return done / seconds if seconds > 0 else None


def _evidence_index(observation: Observation | None) -> dict[tuple[str, int], TaskEvidence]:
    if observation is None:
        return {}
    return {(t.job_id, t.array_index): t for t in observation.tasks if t.array_index is not None}
