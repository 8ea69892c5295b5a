"""The one reader of a run directory: ``read_run(layout) -> RunSnapshot`` reads every record of a run once.

``status`` (and later ``retry``, ``merge``, ``benchmark analyze``) consume its snapshot; nobody reads a run's
records another way. Cost is linear in shards: one listing of ``shards/`` and of the run directory, one of each
shard's ``attempts/``, and per attempt its result manifest; unless that is valid and complete (nothing else can
then change what the attempt contributes), also its ``status.json``, claim and ``attempt.json``, and while it has
no successful ``status.json`` its heartbeat, progress and last log line. Slurm's own
``slurm-<job>_<task>.err`` is read only for a shard without any attempt; ``merge/`` (its job records and newest
manifest) only when the run lists it. Only ``RecordOk`` that matches this run
counts; anything else is named in ``problems`` and proves nothing.

Memory is linear in shards too, and kept small: the attempts' records go through one :class:`Interner` per read,
so what they repeat (a manifest's columns, model usage, digests, versions; pydantic's field-name sets) is held
once for the run, not once per shard.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from data_designer.slurm.contracts import (
    ChunkLayout,
    NotFoundError,
    PartDamage,
    ShardPlan,
    SlurmExtensionError,
    UnavailableError,
)
from data_designer.slurm.contracts.records import (
    ATTEMPT_SCHEMA,
    CANCELLATION_SCHEMA,
    CLAIM_SCHEMA,
    HEARTBEAT_SCHEMA,
    MANIFEST_SCHEMA,
    MERGE_JOB_SCHEMA,
    OBSERVATION_SCHEMA,
    PROGRESS_SCHEMA,
    REQUESTS_SCHEMA,
    RESUME_SCHEMA,
    RETRY_SCHEMA,
    RUN_SCHEMA,
    SERVER_METRICS_SCHEMA,
    STATUS_SCHEMA,
    SUBMISSION_SCHEMA,
    IndexRange,
    ObservationRecord,
    OutputManifest,
    RecordSchema,
    RequestEvidence,
    RunRecord,
    ServerSamplesRecord,
    SetAsidePart,
    SubmissionRecord,
)
from data_designer.slurm.runtime.scheduler import expand_indices
from data_designer.slurm.runtime.store._coverage import coverage_from, manifest_matches, part_refs
from data_designer.slurm.runtime.store._interner import Interner
from data_designer.slurm.runtime.store._layout import (
    ATTEMPT_RECORD,
    ATTEMPTS_DIR,
    CANCELLATIONS_DIR,
    CLAIM_FILE,
    HEARTBEAT_RECORD,
    LOGS_DIR,
    MANIFEST,
    MERGE_DIR,
    OUTPUT_DIR,
    PROGRESS_RECORD,
    REQUESTS_RECORD,
    RETRIES_DIR,
    SERVER_METRICS_RECORD,
    STATUS_RECORD,
    RunLayout,
    format_attempt,
    format_shard,
    parse_attempt,
    parse_shard,
)
from data_designer.slurm.runtime.store._merges import (
    MergeFound,
    MergeJobSnapshot,
    find_latest_merge,
    merge_job_error_file,
    merge_jobs_dir,
    read_merge,
)
from data_designer.slurm.runtime.store._parts import PartRef, check_part, looks_intact
from data_designer.slurm.runtime.store._plan import load_plan
from data_designer.slurm.runtime.store._record_io import Clock, RecordOk, read_record, sequence_numbers, system_clock
from data_designer.slurm.runtime.store._run_files import run_file
from data_designer.slurm.runtime.store._snapshot import (
    AttemptSnapshot,
    BatchError,
    CancellationSnapshot,
    ReadStats,
    RetrySnapshot,
    RunSnapshot,
    ShardSnapshot,
    TaskRef,
)

M = TypeVar("M", bound=BaseModel)

LOG_TAIL_BYTES = 4096
"""How much of a log's end is read for its last line."""
MAX_LOG_LINE = 300
_LOG_STEPS = ("client", "supervisor")
_OPERATION = "store.read_run"
_MANIFEST_NAME = f"{OUTPUT_DIR}/{MANIFEST}"


class _Counter:
    def __init__(self) -> None:
        self.files = 0
        self.listings = 0
        self.parts = 0


def read_run(layout: RunLayout, *, clock: Clock = system_clock, attempt_records: bool = False) -> RunSnapshot:
    """Read the run's records once. NotFoundError ``run_not_found`` when it has no run record; UnavailableError
    when its run record or plan cannot be read (a run that cannot be identified cannot be classified).
    ``attempt_records``: read the attempt and status records of every attempt, also of those their manifest alone
    tells (what ``benchmark analyze`` measures)."""
    count = _Counter()
    problems: list[str] = []
    count.files += 1
    run = read_run_record(layout)
    plan = load_plan(layout, expected_digest=run.plan_digest)
    count.files += 1
    submissions = list(_read_appended(layout.submissions_dir, SUBMISSION_SCHEMA, count, problems))
    newest = _read_appended(layout.observations_dir, OBSERVATION_SCHEMA, count, problems, newest_first=True)
    observations: tuple[ObservationRecord | None, datetime | None] = next(newest, (None, None))
    tasks = _tasks_by_shard(run, submissions, plan_chunks={c.chunk: c for c in plan.submission.chunks})
    run_names = set(_list(layout.run_dir, count))
    # Most runs were never retried or cancelled: their directories are looked for only when the run lists them (a
    # listing that lags another writer's new intent is safe: a retry that misses it loses the write-once link).
    retries, highest_retry = (
        _read_retries(layout, {record.generation for record, _ in submissions}, count, problems)
        if RETRIES_DIR in run_names
        else ((), 0)
    )
    cancellations = (
        tuple(
            CancellationSnapshot(record, written_at)
            for record, written_at in _read_appended(layout.cancellations_dir, CANCELLATION_SCHEMA, count, problems)
        )
        if CANCELLATIONS_DIR in run_names
        else ()
    )
    merge_jobs, merge = _read_merges(layout, count, problems) if MERGE_DIR in run_names else ((), None)
    set_aside = _set_aside(retries)
    present = _list(layout.shards_dir, count)
    shard_dirs = {number for number in map(parse_shard, present) if number is not None}
    shards_root = str(layout.shards_dir)
    interner = Interner()
    shards = []
    for shard in plan.shards:
        attempts: list[AttemptSnapshot] = []
        if shard.shard in shard_dirs:
            # plain strings in this loop: one path parse per record file, not one per join (10,000 shards)
            attempts_dir = f"{shards_root}/{format_shard(shard.shard)}/{ATTEMPTS_DIR}"
            for number in _attempt_numbers(attempts_dir, count):
                directory = f"{attempts_dir}/{format_attempt(number)}"
                attempts.append(
                    _read_attempt(
                        layout, directory, shard.shard, number, run.plan_digest, count, interner, attempt_records
                    )
                )
        shard_tasks = tasks.get(shard.shard, ())
        errors = () if attempts else _batch_errors(layout, shard_tasks, run_names, count)
        shards.append(
            shard_snapshot(shard, tuple(attempts), shard_tasks, set_aside.get(shard.shard, ()), batch_errors=errors)
        )
    observation, observed_at = observations
    return RunSnapshot(
        layout=layout,
        run=run,
        plan=plan,
        submissions=tuple(record for record, _ in submissions),
        shards=tuple(shards),
        read_at=clock(),
        last_observation=observation,
        last_observation_at=observed_at,
        problems=tuple(problems),
        stats=ReadStats(files_read=count.files, directories_listed=count.listings, parts_checked=count.parts),
        retries=retries,
        cancellations=cancellations,
        highest_retry_file=highest_retry,
        merge_jobs=merge_jobs,
        merge=merge,
    )


def _set_aside(retries: tuple[RetrySnapshot, ...]) -> dict[int, tuple[SetAsidePart, ...]]:
    """shard -> the parts retry intents set aside (first intent naming a part wins)."""
    found: dict[int, dict[tuple[int, str], SetAsidePart]] = {}
    for retry in retries:
        for item in retry.intent.shards:
            for part in item.set_aside:
                found.setdefault(part.damage.shard, {}).setdefault((part.damage.attempt, part.damage.path), part)
    return {shard: tuple(parts.values()) for shard, parts in found.items()}


def shard_snapshot(
    shard: ShardPlan,
    attempts: tuple[AttemptSnapshot, ...],
    tasks: tuple[TaskRef, ...],
    set_aside: tuple[SetAsidePart, ...],
    *,
    batch_errors: tuple[BatchError, ...] = (),
    verified: tuple[PartDamage, ...] = (),
) -> ShardSnapshot:
    """One shard's snapshot from its attempts (pure): coverage less the ranges of damaged parts (the cheap check's,
    plus ``verified``: what hashing found) and of parts a retry set aside; damage a retry set aside is not
    damage any more."""
    aside = {(part.damage.attempt, part.damage.path): part for part in set_aside}
    damaged = [d for a in attempts for d in a.damaged if (d.attempt, d.path) not in aside]
    damaged += [d for d in verified if (d.attempt, d.path) not in aside]
    lost: dict[int, list[IndexRange]] = {}
    for item in (*damaged, *(part.damage for part in set_aside)):
        lost.setdefault(item.attempt, []).append(item.range)
    manifests = {a.number: a.manifest for a in attempts if a.manifest is not None}
    coverage = coverage_from(shard, manifests, lost)
    return ShardSnapshot(
        plan=shard,
        attempts=attempts,
        tasks=tasks,
        kept=coverage.kept,
        overlap=coverage.overlap,
        missing=coverage.missing,
        batch_errors=batch_errors,
        damaged=tuple(damaged),
        set_aside=set_aside,
        lost={number: tuple(ranges) for number, ranges in lost.items()},
    )


def with_verified(snapshot: RunSnapshot, damages: Sequence[PartDamage]) -> RunSnapshot:
    """``snapshot`` with the damage hashing found (``store.verify_parts``) counted as the cheap check's is."""
    if not damages:
        return snapshot
    by_shard: dict[int, list[PartDamage]] = {}
    for item in damages:
        by_shard.setdefault(item.shard, []).append(item)
    shards = tuple(
        shard_snapshot(
            s.plan,
            s.attempts,
            s.tasks,
            s.set_aside,
            batch_errors=s.batch_errors,
            verified=(*(d for d in by_shard[s.plan.shard] if d not in s.damaged),),
        )
        if s.plan.shard in by_shard
        else s
        for s in snapshot.shards
    )
    return dataclasses.replace(snapshot, shards=shards)


def contributing_parts(snapshot: RunSnapshot) -> tuple[PartRef, ...]:
    """The parts that hold a record the shards count (their attempt keeps a range they overlap), not already
    damaged or set aside: what ``status --verify`` hashes."""
    refs: list[PartRef] = []
    for shard in snapshot.shards:
        excluded = {(d.attempt, d.path) for d in shard.damaged} | {
            (p.damage.attempt, p.damage.path) for p in shard.set_aside
        }
        for attempt in shard.attempts:
            kept = shard.kept.get(attempt.number, ())
            if not kept or attempt.manifest is None:
                continue
            for ref in part_refs(shard.plan.shard, attempt.number, attempt.manifest):
                if (attempt.number, ref.path) in excluded:
                    continue
                first, stop = ref.range
                if any(item[0] < stop and first < item[1] for item in kept):
                    refs.append(ref)
    return tuple(refs)


def _read_merges(
    layout: RunLayout, count: _Counter, problems: list[str]
) -> tuple[tuple[MergeJobSnapshot, ...], MergeFound | None]:
    """The merge job records and the merge the newest job writes (its ``--output``, else the newest numbered merge);
    the end of the newest job's stderr while no manifest newer than its record exists (it may have failed)."""
    jobs = [
        MergeJobSnapshot(record, written_at)
        for record, written_at in _read_appended(merge_jobs_dir(layout), MERGE_JOB_SCHEMA, count, problems)
    ]
    newest = jobs[-1] if jobs else None
    count.listings += 1
    count.files += 1
    if newest is not None and newest.record.output is not None:
        merge = read_merge(Path(newest.record.output))
    else:
        merge = find_latest_merge(layout.merge_dir)
    if newest is not None and not _newer(merge, newest):
        line = last_line(merge_job_error_file(layout, newest.record.job_name), count_read=lambda: _bump(count))
        jobs[-1] = MergeJobSnapshot(newest.record, newest.written_at, last_error_line=line)
    return tuple(jobs), merge


def _newer(merge: MergeFound | None, job: MergeJobSnapshot) -> bool:
    return merge is not None and merge.written_at is not None and merge.written_at >= job.record.submitted_at


def read_run_record(layout: RunLayout, *, operation: str = _OPERATION, not_found_hint: str | None = None) -> RunRecord:
    """The run's ``run.json``: NotFoundError ``run_not_found`` when absent, UnavailableError
    ``run_record_unreadable`` when it is corrupt, of another schema or of another run (it proves nothing)."""
    found = read_record(layout.run_record, RUN_SCHEMA)
    if isinstance(found, RecordOk):
        if found.payload.run_id != str(layout.run_id):
            raise UnavailableError(
                f"the run record {str(layout.run_record)!r} names run {found.payload.run_id!r}",
                code="run_record_unreadable",
                operation=operation,
                file=str(layout.run_record),
                hint="the run directory was copied or modified; it cannot be classified",
            )
        return found.payload
    if found.status == "missing":
        raise NotFoundError(
            f"run {str(layout.run_id)!r} has no run record at {str(layout.run_record)!r}",
            code="run_not_found",
            operation=operation,
            file=str(layout.run_record),
            hint=not_found_hint
            or "check the run id and the profile's workspace (--profile, --cluster); 'execute' prints the run id",
        )
    raise UnavailableError(
        f"the run record {str(layout.run_record)!r} is {found.status.replace('_', ' ')}",
        code="run_record_unreadable",
        operation=operation,
        file=str(layout.run_record),
        hint="inspect the run directory; a run whose record cannot be read cannot be classified",
    )


def _read_appended(
    directory: Path, schema: RecordSchema[M], count: _Counter, problems: list[str], *, newest_first: bool = False
) -> Iterator[tuple[M, datetime | None]]:
    """The valid appended records of ``directory`` (``NNNN.json``), oldest first unless ``newest_first``; a record
    that is not valid is named in ``problems`` and skipped. Lazy: a caller that stops early reads no more."""
    count.listings += 1
    numbers = sequence_numbers(directory)
    for number in reversed(numbers) if newest_first else numbers:
        path = directory / f"{number:04d}.json"
        count.files += 1
        result = read_record(path, schema)
        if isinstance(result, RecordOk):
            yield result.payload, result.written_at
        else:
            problems.append(f"{path.name} in {directory.name}/ is {result.status.replace('_', ' ')}")


_RETRY_NAME = re.compile(r"([0-9]{4,})\.json")
_RESUME_NAME = re.compile(r"([0-9]{4,})\.resume-([1-9][0-9]*)")


def _read_retries(
    layout: RunLayout, submitted: set[int], count: _Counter, problems: list[str]
) -> tuple[tuple[RetrySnapshot, ...], int]:
    """Every retry intent (``retries/NNNN.json``) with its resume claims, by generation, and the highest intent number
    present. An intent that is not valid, or names another generation than its file, is a problem (its number
    stays taken)."""
    intents: dict[int, str] = {}
    resumes: dict[int, list[tuple[int, str]]] = {}
    for name in _list(layout.retries_dir, count):
        if (match := _RETRY_NAME.fullmatch(name)) and f"{int(match.group(1)):04d}" == match.group(1):
            intents[int(match.group(1))] = name
        elif (match := _RESUME_NAME.fullmatch(name)) and f"{int(match.group(1)):04d}" == match.group(1):
            resumes.setdefault(int(match.group(1)), []).append((int(match.group(2)), name))
    found = []
    for generation in sorted(intents):
        count.files += 1
        result = read_record(layout.retries_dir / intents[generation], RETRY_SCHEMA)
        if not isinstance(result, RecordOk) or result.payload.generation != generation:
            what = "names another generation" if isinstance(result, RecordOk) else result.status.replace("_", " ")
            problems.append(f"{intents[generation]} in retries/ {what}")
            continue
        claims = []
        resumed_at = None
        for _, name in sorted(resumes.get(generation, [])):
            count.files += 1
            claim_read = read_record(layout.retries_dir / name, RESUME_SCHEMA)
            if isinstance(claim_read, RecordOk) and claim_read.payload.generation == generation:
                claims.append(claim_read.payload)
                resumed_at = claim_read.written_at
            else:
                problems.append(f"{name} in retries/ is not a valid resume claim")
        found.append(
            RetrySnapshot(
                intent=result.payload,
                written_at=result.written_at,
                resumes=tuple(claims),
                resumed_at=resumed_at,
                submitted=generation in submitted,
            )
        )
    return tuple(found), max(intents, default=0)


def _tasks_by_shard(
    run: RunRecord,
    submissions: list[tuple[SubmissionRecord, datetime | None]],
    *,
    plan_chunks: dict[int, ChunkLayout],
) -> dict[int, tuple[TaskRef, ...]]:
    """shard -> every submitted array task that runs it: (chunk, array index) through the plan's chunk bindings."""
    by_shard: dict[int, list[TaskRef]] = {}
    seen: set[tuple[str, int]] = set()
    for record, _ in sorted(submissions, key=lambda item: item[0].submitted_at):
        for job in record.jobs:
            chunk = plan_chunks.get(job.chunk)
            if chunk is None:
                continue
            wanted = _array_indices(job.array_spec)
            for task in chunk.tasks:
                if wanted is not None and task.index not in wanted:
                    continue
                key = (job.job_id, task.index)
                if key in seen:
                    continue
                seen.add(key)
                by_shard.setdefault(task.shard, []).append(
                    TaskRef(
                        job_id=job.job_id,
                        job_name=job.job_name,
                        array_task=task.index,
                        chunk=job.chunk,
                        generation=job.generation,
                        submitted_at=record.submitted_at,
                    )
                )
    return {shard: tuple(refs) for shard, refs in by_shard.items()}


def _array_indices(spec: str) -> frozenset[int] | None:
    """The indices an ``--array`` spec names (``0-9%4``, ``1,3,5-7``); None when it cannot be read."""
    try:
        return frozenset(expand_indices(spec, command="sbatch", line=0))
    except SlurmExtensionError:
        return None


def _attempt_numbers(attempts_dir: str, count: _Counter) -> list[int]:
    """The attempt numbers under a shard's ``attempts/`` (ascending; strays skipped), as ``attempt_numbers``."""
    return sorted(number for number in map(parse_attempt, _list(attempts_dir, count)) if number is not None)


def _read_attempt(
    layout: RunLayout,
    directory: str,
    shard: int,
    number: int,
    plan_digest: str,
    count: _Counter,
    interner: Interner,
    attempt_records: bool = False,
) -> AttemptSnapshot:
    """One attempt's records. An attempt whose valid manifest produced all it was assigned is told by that record
    alone: its status, claim, attempt record, heartbeat, progress and logs are not read (nothing they hold can
    change what it contributes, and the shard's state follows from the manifests). Any other attempt's status,
    claim and attempt record are read, and while it has no successful status also its heartbeat, progress and last
    log line. Every record read is shared through ``interner``. With ``attempt_records`` its ``requests.json`` is
    read too (the analysis's request evidence; a missing or invalid one is None, never a problem of the attempt)."""
    problems: list[str] = []

    def read(name: str, schema: RecordSchema[M]) -> RecordOk[M] | None:
        count.files += 1
        result = read_record(Path(f"{directory}/{name}"), schema)
        if isinstance(result, RecordOk):
            return RecordOk(result.path, interner.record(result.payload), result.header)
        if result.status != "missing":
            problems.append(f"{name} is {result.status.replace('_', ' ')}")
        return None

    def evidence() -> RequestEvidence | None:
        if not attempt_records:
            return None
        count.files += 1
        found = read_record(Path(f"{directory}/{REQUESTS_RECORD}"), REQUESTS_SCHEMA)
        if not isinstance(found, RecordOk) or (found.payload.shard, found.payload.attempt) != (shard, number):
            return None
        return found.payload

    def server_samples() -> ServerSamplesRecord | None:
        """With ``attempt_records``: ``server-metrics.json`` (missing, invalid or another attempt's: None)."""
        if not attempt_records:
            return None
        count.files += 1
        found = read_record(Path(f"{directory}/{SERVER_METRICS_RECORD}"), SERVER_METRICS_SCHEMA)
        if not isinstance(found, RecordOk) or (found.payload.shard, found.payload.attempt) != (shard, number):
            return None
        return found.payload

    manifest = _valid_manifest(read(_MANIFEST_NAME, MANIFEST_SCHEMA), layout, plan_digest, shard, number, problems)
    damaged = (
        _damaged_parts(str(layout.run_dir), directory, shard, number, manifest, count) if manifest is not None else ()
    )
    if manifest is not None and manifest.complete and manifest.ranges == manifest.assigned:
        if not attempt_records:
            return AttemptSnapshot(number=number, manifest=manifest, damaged=damaged)
        done, ended = read(ATTEMPT_RECORD, ATTEMPT_SCHEMA), read(STATUS_RECORD, STATUS_SCHEMA)
        return AttemptSnapshot(
            number=number,
            manifest=manifest,
            record=done.payload if done else None,
            status=ended.payload if ended else None,
            server_metrics=server_samples(),
            damaged=damaged,
            requests=evidence(),
        )
    status = read(STATUS_RECORD, STATUS_SCHEMA)
    succeeded = status is not None and status.payload.status == "succeeded"
    claim = read(CLAIM_FILE, CLAIM_SCHEMA)
    record = read(ATTEMPT_RECORD, ATTEMPT_SCHEMA)
    heartbeat = progress = None
    last_line = None
    if not succeeded:
        heartbeat = read(HEARTBEAT_RECORD, HEARTBEAT_SCHEMA)
        progress = read(PROGRESS_RECORD, PROGRESS_SCHEMA)
        last_line = _last_log_line(Path(directory) / LOGS_DIR, count)
    return AttemptSnapshot(
        number=number,
        claim=claim.payload if claim else None,
        record=record.payload if record else None,
        heartbeat=heartbeat.payload if heartbeat else None,
        heartbeat_written_at=heartbeat.written_at if heartbeat else None,
        progress=progress.payload if progress else None,
        progress_written_at=progress.written_at if progress else None,
        manifest=manifest,
        status=status.payload if status else None,
        last_log_line=last_line,
        problems=tuple(problems),
        server_metrics=server_samples(),
        damaged=damaged,
        requests=evidence(),
    )


def _damaged_parts(
    run_dir: str, directory: str, shard: int, number: int, manifest: OutputManifest, count: _Counter
) -> tuple[PartDamage, ...]:
    """The cheap check of every part the manifest lists (one ``lstat`` each; a reason only for a failing one)."""
    count.parts += len(manifest.parts)
    output = f"{directory}/{OUTPUT_DIR}"
    if all(looks_intact(output, part) for part in manifest.parts):
        return ()
    found = (check_part(run_dir, ref) for ref in part_refs(shard, number, manifest))
    return tuple(item for item in found if item is not None)


def _valid_manifest(
    found: RecordOk[OutputManifest] | None,
    layout: RunLayout,
    plan_digest: str,
    shard: int,
    number: int,
    problems: list[str],
) -> OutputManifest | None:
    if found is None:
        return None
    if not manifest_matches(found.payload, layout, plan_digest=plan_digest, shard=shard, attempt=number):
        problems.append("output/manifest.json belongs to another run, plan, shard or attempt")
        return None
    return found.payload


def _last_log_line(logs: Path, count: _Counter) -> str | None:
    for step in _LOG_STEPS:
        line = last_line(logs / f"{step}.log", count_read=lambda: _bump(count))
        if line is not None:
            return line
    return None


def _bump(count: _Counter) -> None:
    count.files += 1


def last_line(path: Path, *, count_read: Callable[[], None] | None = None) -> str | None:
    """The last non-blank line of a text file (from its last few KiB), at most ``MAX_LOG_LINE`` characters."""
    lines = tail_lines(path, 1, count_read=count_read)
    return lines[-1] if lines else None


def tail_lines(path: Path, n: int, *, count_read: Callable[[], None] | None = None) -> tuple[str, ...]:
    """The last ``n`` non-blank lines of a text file (from its last ``LOG_TAIL_BYTES``), each shortened."""
    try:
        with run_file(path) as handle:
            if count_read is not None:
                count_read()
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            data = handle.read(LOG_TAIL_BYTES)
    except OSError:
        return ()
    text = data.decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return tuple(line if len(line) <= MAX_LOG_LINE else line[: MAX_LOG_LINE - 3] + "..." for line in lines[-n:])


def _batch_errors(
    layout: RunLayout, tasks: tuple[TaskRef, ...], run_names: set[str], count: _Counter
) -> tuple[BatchError, ...]:
    errors = []
    for task in tasks:
        name = f"slurm-{task.job_name}_{task.array_task}.err"
        if name not in run_names:
            continue
        path = layout.run_dir / name
        lines = tail_lines(path, 5, count_read=lambda: _bump(count))
        if lines:
            errors.append(BatchError(job_name=task.job_name, array_task=task.array_task, path=str(path), lines=lines))
    return tuple(errors)


def _list(directory: Path | str, count: _Counter) -> list[str]:
    count.listings += 1
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UnavailableError(
            f"cannot list {str(directory)!r}: {exc.strerror}",
            code="filesystem_unavailable",
            operation=_OPERATION,
            file=str(directory),
        ) from exc
