"""The scheduler adapter: idempotent submission, batched observation and confirmed cancellation.

Every Slurm call goes through the injected :class:`CommandRunner`; every output goes through a
pure parser. Costs are bounded by design: :meth:`SlurmScheduler.observe` makes at most one
``squeue`` and one ``sacct`` call for all jobs of a run, and :meth:`SlurmScheduler.submit`
makes one of each to find chunks already accepted (by job name) before it runs ``sbatch`` for
the missing ones only. A lost ``sbatch`` reply is therefore repaired by calling ``submit``
again, from any process.

How squeue and sacct are merged, per array task: squeue is authoritative while a task is
pending or running (sacct lags by seconds); sacct is authoritative once it records a terminal
state (only it knows exit codes); squeue's terminal state is used while sacct lags; sacct is
the only source once a job has left squeue (``MinJobAge``). sacct's ``allocation`` placeholder
rows are never read as a state: they set :attr:`Observation.accounting_lag`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from data_designer.slurm.contracts import (
    TERMINAL_TASK_STATES,
    EvidenceSource,
    InvalidInputError,
    Observation,
    SourceReport,
    SourceStatus,
    SubmissionResult,
    SubmissionUnit,
    SubmittedChunk,
    TaskEvidence,
    UnavailableError,
)
from data_designer.slurm.runtime.polling import poll
from data_designer.slurm.runtime.scheduler._command import (
    DEFAULT_TIMEOUT_S,
    CommandResult,
    CommandRunner,
    SubprocessRunner,
)
from data_designer.slurm.runtime.scheduler._sacct_parse import SACCT_FORMAT, SacctRecords, parse_sacct
from data_designer.slurm.runtime.scheduler._slurm_parse import (
    SACCTMGR_ASSOC_FORMAT,
    SINFO_FORMAT,
    AssociationRow,
    JobRecord,
    PartitionRow,
    SlurmOutputError,
    parse_sacctmgr_associations,
    parse_sbatch,
    parse_scontrol_config,
    parse_sinfo,
)
from data_designer.slurm.runtime.scheduler._squeue_parse import SQUEUE_FORMAT, parse_squeue

_JOB_ID_RE = re.compile(r"[1-9]\d{0,18}", re.ASCII)
_JOB_NAME_RE = re.compile(r"[A-Za-z0-9_.:+=@-]{1,200}", re.ASCII)
_PURGED = "Invalid job id specified"
_ACCOUNTING_DISABLED = "accounting storage is disabled"
_UNREACHABLE_HINTS = ("Unable to contact slurm controller", "Socket timed out", "Connection refused", "Zero Bytes")
_GONE_ON_CANCEL = (_PURGED, "already completing or completed")

TaskKey = tuple[str, int | None]


def utc_now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _sort_key(key: TaskKey) -> tuple[int, str, int]:
    job, index = key
    return (int(job) if job.isdigit() else 0, job, -1 if index is None else index)


def _check_job_ids(job_ids: Iterable[str], operation: str) -> list[str]:
    ids = list(dict.fromkeys(job_ids))
    for job_id in ids:
        if _JOB_ID_RE.fullmatch(job_id) is None:
            raise InvalidInputError(
                f"{job_id!r} is not a Slurm job id", code="bad_job_id", operation=operation, hint="pass numeric job ids"
            )
    return ids


class SubmissionRefused(InvalidInputError):
    """``sbatch`` rejected a chunk (``sbatch_rejected``, exit 2); ``accepted`` holds the chunks of the same unit
    that were submitted or found before it, so the caller records them and says which fix works."""

    def __init__(self, error: InvalidInputError, *, accepted: tuple[SubmittedChunk, ...], sbatch_calls: int) -> None:
        super().__init__(error.info.message, code=error.info.code, operation=error.info.operation, hint=error.info.hint)
        self.accepted = accepted
        self.sbatch_calls = sbatch_calls


class SlurmScheduler:
    """Submit, observe and cancel array jobs through one injected command runner."""

    def __init__(
        self,
        runner: CommandRunner,
        *,
        clock: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], None] = time.sleep,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        sbatch_timeout_s: float = 60.0,
        concurrent: bool | None = None,
    ) -> None:
        self._runner = runner
        # squeue and sacct of one observation run side by side when the runner is a real process runner (each
        # call is its own subprocess); a fake scheduler's state is not shared across threads.
        self._concurrent = isinstance(runner, SubprocessRunner) if concurrent is None else concurrent
        self._clock = clock
        self._sleep = sleep
        self._timeout_s = timeout_s
        self._sbatch_timeout_s = sbatch_timeout_s

    # -- submission -----------------------------------------------------------------------------

    def find_submitted(self, job_names: Sequence[str], *, since: datetime) -> dict[str, SubmittedChunk]:
        """Chunks already accepted, by job name: one ``sacct --name -S`` and one ``squeue --name`` call.

        Raises :class:`UnavailableError` unless both sources answered (a disabled accounting
        counts as answered): absence can only be trusted when every source that could show a
        job was asked.
        """
        if since.tzinfo is None:
            raise InvalidInputError(
                f"since={since.isoformat()!r} has no time zone",
                code="naive_datetime",
                operation="find_submitted",
                hint="pass an aware datetime, e.g. datetime.now(UTC)",
            )
        names = list(dict.fromkeys(job_names))
        for name in names:
            if _JOB_NAME_RE.fullmatch(name) is None:
                raise InvalidInputError(
                    f"job name {name!r} cannot be looked up",
                    code="bad_job_name",
                    operation="find_submitted",
                    hint="use letters, digits and '_.:+=@-' only (no commas or spaces)",
                )
        if not names:
            return {}
        name_list = ",".join(names)
        start = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        squeue = self._run(["squeue", "--noheader", "-t", "all", f"--name={name_list}", "-o", SQUEUE_FORMAT])
        sacct = self._run(
            ["sacct", "--parsable2", "--noheader", "-X", "-S", start, f"--name={name_list}", f"--format={SACCT_FORMAT}"]
        )
        found: dict[str, set[str]] = {}
        squeue_report, squeue_records = self._squeue_answer(squeue)
        sacct_report, sacct_records = self._sacct_answer(sacct)
        if squeue_report.status != "ok" or sacct_report.status not in ("ok", "disabled"):
            raise UnavailableError(
                "cannot tell which chunks were already submitted: "
                f"squeue {squeue_report.status} ({squeue_report.detail or '-'}), "
                f"sacct {sacct_report.status} ({sacct_report.detail or '-'})",
                code="submission_lookup_failed",
                operation="find_submitted",
                hint="nothing was submitted; retry when the scheduler answers",
            )
        for record in (*squeue_records, *sacct_records.records):
            if record.job_name in names:
                found.setdefault(record.job_name, set()).add(record.job_id)
        return {
            name: SubmittedChunk(job_name=name, job_id=min(ids, key=lambda j: (len(j), j)), recovered=True)
            for name, ids in found.items()
        }

    def submit(
        self,
        unit: SubmissionUnit,
        *,
        since: datetime,
        environment: Mapping[str, str] | None = None,
        known: Mapping[str, SubmittedChunk] | None = None,
        after_jobs: Sequence[str] = (),
    ) -> SubmissionResult:
        """Submit the chunks of ``unit`` that are not already known to Slurm by job name.

        ``since`` bounds the accounting lookup (``sacct -S``): pass the time the run was created.
        ``environment`` holds the values of the variables ``unit.environment`` names (read from the submitting
        environment by the caller); they reach ``sbatch`` only as its environment, so the job's
        ``--export=ALL,<names>`` carries them. A named variable missing from it is an
        :class:`InvalidInputError` before any ``sbatch``.
        If ``sbatch`` fails or its reply is lost, :class:`UnavailableError` (or
        :class:`InvalidInputError` for a rejection) is raised; calling ``submit`` again finds
        whatever was accepted and submits only the rest.

        ``known``: the chunks the caller already looked up by name (``find_submitted`` of many units at once, or
        none for a run directory created just now, whose job names cannot exist yet): no lookup is made.
        ``after_jobs``: jobs every chunk of this unit waits for (``--dependency=afterany:...``, beside a chunk's
        own ``after``): a benchmark's dependency lanes, added here so they stay out of the plan.
        """
        passed = job_environment(unit, environment or {})
        lanes = _check_job_ids(after_jobs, "submit")
        existing = (
            dict(known) if known is not None else self.find_submitted([c.job_name for c in unit.chunks], since=since)
        )
        chunks: list[SubmittedChunk] = []
        job_ids: dict[str, str] = {}
        calls = 0
        for chunk in unit.chunks:
            if chunk.job_name in existing:
                chunks.append(existing[chunk.job_name])
                job_ids[chunk.job_name] = existing[chunk.job_name].job_id
                continue
            # The unit's own arguments go first so that ours (name, array, parsable reply) win on repeats.
            argv = ["sbatch", *unit.sbatch_args]
            argv += ["--parsable", f"--job-name={chunk.job_name}", f"--array={chunk.array_spec}"]
            waits = list(lanes)
            if chunk.after is not None:  # the unit's validator guarantees an earlier chunk, so its id is known
                waits.append(job_ids[chunk.after])
            if waits:
                argv.append(f"--dependency=afterany:{':'.join(dict.fromkeys(waits))}")
            calls += 1
            result = self._runner.run(
                argv, timeout_s=self._sbatch_timeout_s, stdin=unit.script, environment=passed or None
            )
            done = f"{calls - 1} chunk(s) were newly submitted before this one"
            if not result.ok:
                error = self._sbatch_error(result, chunk.job_name, done)
                if isinstance(error, InvalidInputError):
                    raise SubmissionRefused(error, accepted=tuple(chunks), sbatch_calls=calls) from None
                raise error
            try:
                reply = parse_sbatch(result.stdout)
            except SlurmOutputError as exc:
                raise UnavailableError(
                    f"sbatch accepted {chunk.job_name!r} but its reply was unreadable: {exc}; {done}",
                    code="sbatch_reply_lost",
                    operation="submit",
                    hint="submit again: chunks already accepted are found by job name",
                ) from exc
            chunks.append(SubmittedChunk(job_name=chunk.job_name, job_id=reply.job_id, cluster=reply.cluster))
            job_ids[chunk.job_name] = reply.job_id
        recovered = sum(1 for c in chunks if c.recovered)
        return SubmissionResult(
            chunks=tuple(chunks), submitted=len(chunks) - recovered, recovered=recovered, sbatch_calls=calls
        )

    @staticmethod
    def _sbatch_error(result: CommandResult, job_name: str, done: str) -> Exception:
        if result.timed_out:
            return UnavailableError(
                f"sbatch for {job_name!r} timed out; it may or may not have been accepted; {done}",
                code="sbatch_reply_lost",
                operation="submit",
                hint="submit again: chunks already accepted are found by job name",
            )
        if result.returncode is None or any(h in result.stderr for h in _UNREACHABLE_HINTS):
            return UnavailableError(
                f"cannot submit {job_name!r}: {result.describe()}; {done}",
                code="scheduler_unreachable",
                operation="submit",
                hint="retry when the Slurm controller answers",
            )
        return InvalidInputError(
            f"sbatch rejected {job_name!r}: {result.describe()}; {done}",
            code="sbatch_rejected",
            operation="submit",
            hint="fix the sbatch options or the profile named in the message",
        )

    # -- observation ----------------------------------------------------------------------------

    def observe(
        self, job_ids: Sequence[str], *, since: datetime | None = None, timeout_s: float | None = None
    ) -> Observation:
        """Evidence for every array task of ``job_ids``: at most one ``squeue`` and one ``sacct`` call.

        ``since`` bounds ``sacct -S`` (sites cap the query range with MaxQueryTimeRange; pass the run's creation
        time minus a slack); ``timeout_s`` bounds each call (a down slurmdbd makes sacct hang). The two calls run
        concurrently with a process runner. Raises :class:`UnavailableError` when neither source answered.
        """
        ids = _check_job_ids(job_ids, "observe")
        if since is not None and since.tzinfo is None:
            raise InvalidInputError(
                f"since={since.isoformat()!r} has no time zone", code="naive_datetime", operation="observe"
            )
        observed_at = _iso(self._clock())
        if not ids:
            idle = "nothing to observe"
            return Observation(
                observed_at=observed_at,
                tasks=(),
                squeue=SourceReport(source="squeue", status="not_run", detail=idle),
                sacct=SourceReport(source="sacct", status="not_run", detail=idle),
                calls=0,
            )
        id_list = ",".join(ids)
        window = [] if since is None else ["-S", since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")]
        squeue_argv = ["squeue", "--noheader", "-t", "all", "-j", id_list, "-o", SQUEUE_FORMAT]
        sacct_argv = [
            "sacct",
            "--parsable2",
            "--noheader",
            "-X",
            "-D",
            *window,
            "-j",
            id_list,
            f"--format={SACCT_FORMAT}",
        ]
        squeue_result, sacct_result = self._run_pair(squeue_argv, sacct_argv, timeout_s)
        squeue_report, squeue_records = self._squeue_answer(squeue_result)
        sacct_report, sacct = self._sacct_answer(sacct_result)
        if squeue_report.status != "ok" and sacct_report.status != "ok":
            raise UnavailableError(
                f"the scheduler cannot be observed: squeue {squeue_report.status} ({squeue_report.detail or '-'}), "
                f"sacct {sacct_report.status} ({sacct_report.detail or '-'})",
                code="scheduler_unavailable",
                operation="observe",
                hint="nothing was changed; retry when Slurm answers (check SLURM_CONF and the controller)",
            )
        wanted = set(ids)
        tasks = _merge(
            [r for r in squeue_records if r.job_id in wanted],
            [r for r in sacct.records if r.job_id in wanted],
            observed_at,
        )
        seen = {t.job_id for t in tasks}
        in_sacct = {r.job_id for r in sacct.records}
        lagging = {j for j in sacct.placeholders if j in wanted}
        if sacct_report.status == "ok":
            lagging |= {r.job_id for r in squeue_records if r.job_id in wanted and r.job_id not in in_sacct}
        return Observation(
            observed_at=observed_at,
            tasks=tasks,
            squeue=squeue_report,
            sacct=sacct_report,
            missing_job_ids=tuple(j for j in ids if j not in seen),
            accounting_lag=bool(lagging),
            calls=2,
        )

    def _run(self, argv: list[str], timeout_s: float | None = None) -> CommandResult:
        return self._runner.run(argv, timeout_s=self._timeout_s if timeout_s is None else timeout_s)

    def _run_pair(
        self, first: list[str], second: list[str], timeout_s: float | None
    ) -> tuple[CommandResult, CommandResult]:
        if not self._concurrent:
            return self._run(first, timeout_s), self._run(second, timeout_s)
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="observe") as pool:
            later = pool.submit(self._run, second, timeout_s)
            return self._run(first, timeout_s), later.result()

    @staticmethod
    def _failed_report(source: EvidenceSource, result: CommandResult) -> SourceReport:
        status: SourceStatus = "timed_out" if result.timed_out else "failed"
        return SourceReport(source=source, status=status, detail=result.describe(), duration_s=result.duration_s)

    def _squeue_answer(self, result: CommandResult) -> tuple[SourceReport, tuple[JobRecord, ...]]:
        if not result.ok:
            # squeue exits 1 for a single purged id: the job is gone from the queue, not squeue.
            if result.returncode == 1 and _PURGED in result.stderr and not result.stdout.strip():
                return SourceReport(source="squeue", status="ok", duration_s=result.duration_s), ()
            return self._failed_report("squeue", result), ()
        try:
            records = parse_squeue(result.stdout)
        except SlurmOutputError as exc:
            return SourceReport(source="squeue", status="failed", detail=str(exc), duration_s=result.duration_s), ()
        return SourceReport(source="squeue", status="ok", duration_s=result.duration_s), records

    def _sacct_answer(self, result: CommandResult) -> tuple[SourceReport, SacctRecords]:
        empty = SacctRecords(records=(), placeholders=())
        if not result.ok:
            if _ACCOUNTING_DISABLED in result.stderr:
                detail = result.describe()
                return SourceReport(
                    source="sacct", status="disabled", detail=detail, duration_s=result.duration_s
                ), empty
            return self._failed_report("sacct", result), empty
        try:
            records = parse_sacct(result.stdout)
        except SlurmOutputError as exc:
            return SourceReport(source="sacct", status="failed", detail=str(exc), duration_s=result.duration_s), empty
        return SourceReport(source="sacct", status="ok", duration_s=result.duration_s), records

    # -- cancellation ---------------------------------------------------------------------------

    def cancel(
        self,
        job_ids: Sequence[str],
        *,
        array_indices: Mapping[str, Sequence[int]] | None = None,
        confirm_timeout_s: float = 30.0,
        poll_s: float = 1.0,
    ) -> Observation:
        """Cancel whole jobs, or only the given array indices of some of them, and confirm it by observation.

        One ``scancel`` call; then :meth:`observe` until no targeted task is pending or running.
        Returns the confirming observation; raises :class:`UnavailableError` when ``scancel``
        fails or the cancellation is not confirmed within ``confirm_timeout_s``.
        """
        selected = {job: sorted(set(indices)) for job, indices in (array_indices or {}).items()}
        ids = _check_job_ids([*job_ids, *selected], "cancel")
        if not ids:
            return self.observe([])
        targets = [f"{job}_{i}" for job in ids if job in selected for i in selected[job]]
        targets += [job for job in ids if job not in selected]
        result = self._run(["scancel", *targets])
        if not result.ok and not any(h in result.stderr for h in _GONE_ON_CANCEL):
            raise UnavailableError(
                f"scancel failed: {result.describe()}",
                code="cancel_failed",
                operation="cancel",
                hint="retry; cancelling is idempotent",
            )
        # the seconds slept count (the sleep is the only seam), at least one poll_s: a second look, however short
        for _ in poll(max(confirm_timeout_s, poll_s), poll_s, clock=None, sleep=self._sleep):
            observation = self.observe(ids)
            live = [
                t
                for t in observation.tasks
                if t.state not in TERMINAL_TASK_STATES
                and (t.job_id not in selected or t.array_index in selected[t.job_id])
            ]
            if not live:
                return observation
        shown = ", ".join(f"{t.job_id}_{t.array_index}:{t.state}" for t in live[:5])
        raise UnavailableError(
            f"cancellation not confirmed after {confirm_timeout_s:g}s; still live: {shown}",
            code="cancel_unconfirmed",
            operation="cancel",
            hint="observe again later; scancel was accepted",
        )

    # -- cluster facts --------------------------------------------------------------------------

    def _checked(self, argv: list[str], operation: str) -> str:
        result = self._run(argv)
        if not result.ok:
            raise UnavailableError(f"{result.describe()}", code="scheduler_unavailable", operation=operation)
        return result.stdout

    def cluster_config(self) -> dict[str, str]:
        """``scontrol show config`` as a key/value mapping (``MaxArraySize``, ``MinJobAge``, ...)."""
        return parse_scontrol_config(self._checked(["scontrol", "show", "config"], "cluster_config"))

    def partitions(self) -> tuple[PartitionRow, ...]:
        return parse_sinfo(self._checked(["sinfo", "--noheader", "-o", SINFO_FORMAT], "partitions"))

    def associations(self, user: str) -> tuple[AssociationRow, ...]:
        argv = ["sacctmgr", "--parsable2", "--noheader", "show", "assoc", f"user={user}"]
        return parse_sacctmgr_associations(self._checked([*argv, f"format={SACCTMGR_ASSOC_FORMAT}"], "associations"))


def _evidence(record: JobRecord, source: EvidenceSource, observed_at: str, restarts: int) -> TaskEvidence:
    return TaskEvidence(
        job_id=record.job_id,
        array_index=record.array_index,
        job_name=record.job_name,
        state=record.state,
        raw_state=record.raw_state,
        exit_code=record.exit_code,
        signal=record.signal,
        reason=record.reason,
        nodes=record.nodes,
        submit_time=record.submit_time,
        start_time=record.start_time,
        end_time=record.end_time,
        restarts=restarts,
        source=source,
        observed_at=observed_at,
    )


def _merge(squeue: Sequence[JobRecord], sacct: Sequence[JobRecord], observed_at: str) -> tuple[TaskEvidence, ...]:
    live: dict[TaskKey, JobRecord] = {(r.job_id, r.array_index): r for r in squeue}
    history: dict[TaskKey, list[JobRecord]] = {}
    for record in sacct:
        history.setdefault((record.job_id, record.array_index), []).append(record)
    tasks: list[TaskEvidence] = []
    for key in sorted(live.keys() | history.keys(), key=_sort_key):
        queued = live.get(key)
        rows = history.get(key, [])
        latest = rows[-1] if rows else None
        restarts = max(0, len(rows) - 1)
        if queued is not None and queued.state not in TERMINAL_TASK_STATES:
            # Live again after incarnations sacct already closed: Slurm requeued it (raw_state stays as printed).
            closed = sum(1 for r in rows if r.state in TERMINAL_TASK_STATES or r.state == "requeued")
            evidence = _evidence(queued, "squeue", observed_at, closed)
            if closed and queued.state == "pending":
                evidence = evidence.model_copy(update={"state": "requeued"})
            tasks.append(evidence)
        elif latest is not None and latest.state in TERMINAL_TASK_STATES:
            tasks.append(_evidence(latest, "sacct", observed_at, restarts))
        elif queued is not None:
            tasks.append(_evidence(queued, "squeue", observed_at, restarts))
        elif latest is not None:
            tasks.append(_evidence(latest, "sacct", observed_at, restarts))
    return tuple(tasks)


def job_environment(unit: SubmissionUnit, environment: Mapping[str, str]) -> dict[str, str]:
    """The values of the variables ``unit`` names, from ``environment``; unset or empty ones are an input error."""
    missing = [name for name in unit.environment if not environment.get(name)]
    if missing:
        raise InvalidInputError(
            f"the run names the environment variable(s) {', '.join(missing)}, unset or empty where it is submitted",
            code="environment_unset",
            operation="submit",
            hint=f"export {missing[0]}=... in the shell that submits (values travel by environment only)",
        )
    return {name: environment[name] for name in unit.environment}
