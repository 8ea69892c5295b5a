"""What the login-side commands write into a run directory: the verbs of ``execute``, ``retry``, ``cancel`` and
``status`` (``docs/architecture/run-directory.md`` names the verb of every file).

Each verb keeps its file's protocol (``_record_io``). The run directory is created exclusively; the inputs, the
plan, the benchmark link and the run record are written once (False: something is already there); submissions,
cancellations and observations are appended (many writers, none lost); a retry generation and each resume claim
are taken write-once (False: another process holds it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from data_designer.slurm.contracts import ExecutionPlan
from data_designer.slurm.contracts.records import (
    BENCHMARK_CHILD_SCHEMA,
    CANCELLATION_SCHEMA,
    INPUTS_SCHEMA,
    OBSERVATION_SCHEMA,
    RESUME_SCHEMA,
    RETRY_SCHEMA,
    RUN_SCHEMA,
    SUBMISSION_SCHEMA,
    BenchmarkLink,
    CancellationRecord,
    InputsManifest,
    ObservationRecord,
    RecordSchema,
    ResumeClaim,
    RetryIntent,
    RunRecord,
    SubmissionRecord,
    SubmittedJob,
)
from data_designer.slurm.planner import FileModes, canonical_json, make_directories, modes_of_directory
from data_designer.slurm.runtime.store._layout import RunLayout
from data_designer.slurm.runtime.store._record_io import (
    Clock,
    RecordAppended,
    RecordConflict,
    RecordOk,
    append_record,
    publish_bytes_once,
    read_record,
    sequence_numbers,
    write_record_once,
)

M = TypeVar("M", bound=BaseModel)


def create_run_directory(layout: RunLayout, modes: FileModes) -> None:
    """Make the run directory (and any missing parent) with ``modes``: every file written into it follows them.
    FileExistsError when it exists already; OSError when it cannot be made."""
    make_directories(layout.run_dir, modes, exclusive=True)


def write_input(layout: RunLayout, name: Sequence[str], data: bytes, *, mode: int, operation: str) -> bool:
    """Snapshot one input as ``inputs/<name...>`` with ``mode``, written once."""
    return publish_bytes_once(layout.input_file(*name), data, operation=operation, mode=mode)


def write_inputs_manifest(layout: RunLayout, manifest: InputsManifest, *, clock: Clock, operation: str) -> bool:
    return write_once(layout.inputs_manifest, INPUTS_SCHEMA, manifest, clock, operation)


def write_plan(layout: RunLayout, plan: ExecutionPlan, *, operation: str) -> bool:
    """``plan.json``: the plan's canonical JSON (``load_plan`` checks it against the run record's digest)."""
    return publish_bytes_once(layout.plan_record, canonical_json(plan.model_dump(mode="json")), operation=operation)


def write_benchmark_link(layout: RunLayout, link: BenchmarkLink, *, clock: Clock, operation: str) -> bool:
    """A benchmark child's ``benchmark.json`` (written before its run record)."""
    return write_once(layout.benchmark_record, BENCHMARK_CHILD_SCHEMA, link, clock, operation)


def write_run_record(layout: RunLayout, record: RunRecord, *, clock: Clock, operation: str) -> bool:
    return write_once(layout.run_record, RUN_SCHEMA, record, clock, operation)


def record_submission(
    layout: RunLayout,
    jobs: tuple[SubmittedJob, ...],
    *,
    sbatch_calls: int,
    clock: Clock,
    operation: str,
    generation: int = 0,
    error: str | None = None,
) -> RecordAppended:
    """Append one submission call to ``submissions/``: its jobs (those found by name count as recovered), the
    ``sbatch`` calls it made, its generation (0: execute; n: retry n) and the scheduler's refusal, if any."""
    recovered = sum(1 for job in jobs if job.recovered)
    record = SubmissionRecord(
        submitted_at=clock(),
        generation=generation,
        jobs=jobs,
        submitted=len(jobs) - recovered,
        recovered=recovered,
        sbatch_calls=sbatch_calls,
        error=error,
    )
    return append_record(layout.submissions_dir, SUBMISSION_SCHEMA, record, clock=clock, operation=operation)


def read_submissions(layout: RunLayout) -> tuple[SubmissionRecord, ...]:
    """The valid submission records, oldest first (the others prove nothing and are skipped)."""
    found = (
        read_record(layout.submission_record(n), SUBMISSION_SCHEMA) for n in sequence_numbers(layout.submissions_dir)
    )
    return tuple(read.payload for read in found if isinstance(read, RecordOk))


def record_cancellation(
    layout: RunLayout, record: CancellationRecord, *, clock: Clock, operation: str
) -> RecordAppended:
    return append_record(layout.cancellations_dir, CANCELLATION_SCHEMA, record, clock=clock, operation=operation)


def record_observation(layout: RunLayout, record: ObservationRecord, *, clock: Clock, operation: str) -> None:
    append_record(layout.observations_dir, OBSERVATION_SCHEMA, record, clock=clock, operation=operation)


def discard_observations(layout: RunLayout, *, keep: int) -> None:
    """Delete the observations numbered above ``keep`` (the benchmarks time ``status`` over the same records)."""
    for number in sequence_numbers(layout.observations_dir):
        if number > keep:
            os.unlink(layout.observations_dir / f"{number:04d}.json")


def take_retry_generation(layout: RunLayout, intent: RetryIntent, *, clock: Clock, operation: str) -> bool:
    """Write ``retries/NNNN.json`` for the intent's generation once; False: another retry took that generation."""
    return write_once(layout.retry_intent(intent.generation), RETRY_SCHEMA, intent, clock, operation)


def set_aside(layout: RunLayout, intent: RetryIntent) -> tuple[str, ...]:
    """Move each damaged part the intent sets aside to its ``moved_to`` (before the retry's ``sbatch``, so its
    attempts see the range missing); idempotent, so a resumer finishes what a crashed retry began. A part already
    moved, or with no file to move, is left; nothing is ever deleted or overwritten. Returns what was moved now."""
    moved: list[str] = []
    run_dir = layout.run_dir
    modes = modes_of_directory(run_dir)
    for shard in intent.shards:
        for item in shard.set_aside:
            if item.moved_to is None:
                continue
            source, target = run_dir / item.damage.path, run_dir / item.moved_to
            if not os.path.lexists(source) or os.path.lexists(target):
                continue
            make_directories(target.parent, modes)
            try:
                os.link(source, target, follow_symlinks=False)  # never replaces a file that appeared meanwhile
            except FileExistsError:
                continue
            except OSError:
                os.rename(source, target)  # a file system without hard links: the check above stands
                moved.append(item.damage.path)
                continue
            os.unlink(source)
            moved.append(item.damage.path)
    return tuple(moved)


def claim_retry_resume(layout: RunLayout, claim: ResumeClaim, *, clock: Clock, operation: str) -> bool:
    """Take the claim's ``retries/NNNN.resume-K`` once; False: another process is resuming that intent."""
    path = layout.resume_claim(claim.generation, claim.resume)
    return write_once(path, RESUME_SCHEMA, claim, clock, operation)


def discard_run_directory(layout: RunLayout) -> None:
    """Delete a run directory that holds no run record (nothing of it was submitted), ignoring what is gone."""
    shutil.rmtree(layout.run_dir, ignore_errors=True)


def write_once(path: Path, schema: RecordSchema[M], payload: M, clock: Clock, operation: str) -> bool:
    """:func:`write_record_once`, False when a record was there already (the store's own, not on its face)."""
    return not isinstance(write_record_once(path, schema, payload, clock=clock, operation=operation), RecordConflict)
