"""``retries/NNNN.json`` and ``cancellations/NNNN.json``: what ``retry`` and ``cancel`` decided, by whom, when.

A retry takes its generation by writing ``retries/<generation:04d>.json`` once (``link(2)``: of two retries
that chose the same number exactly one wins); the record is its intent: the shards, the ranges each was
missing, and the bound submission unit, written *before* any ``sbatch``. Its submission is then appended to
``submissions/`` with the same generation. An intent without such a submission (a crash, a lost ``sbatch``
reply) is resumed by a later ``retry``, which first asks Slurm for the intent's jobs by name
(``sacct -S <intent time>``), so it never submits twice. Whoever resumes an intent first takes
``retries/<generation:04d>.resume-<k>`` (write-once), so two resumers never both submit.

A cancellation is appended after ``scancel`` was accepted (and, when it could be, confirmed by observation):
it names who cancelled which shards; nobody writes into another attempt's directory.
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._part_damage import PartDamage
from data_designer.slurm.contracts._ranges import IndexRange
from data_designer.slurm.contracts._scheduler import SubmissionUnit
from data_designer.slurm.contracts._types import FROZEN, PrintableText
from data_designer.slurm.contracts.records._schema import RecordSchema


class Requester(BaseModel):
    """Who asked, from where, and when: the login-node process behind a retry or a cancellation."""

    model_config = FROZEN

    user: PrintableText
    host: PrintableText
    pid: PositiveInt
    time: AwareDatetime = Field(description="When it asked, by its clock.")


class SetAsidePart(BaseModel):
    """A damaged part a retry took out of its attempt's ``output/``: what was wrong and where it went."""

    model_config = FROZEN

    damage: PartDamage
    moved_to: PrintableText | None = Field(
        default=None,
        description="Where the part was moved, relative to the run directory (None: there was no file to move).",
    )


class RetryShard(BaseModel):
    """One shard a retry generation takes: its state when selected and the record ranges it was missing."""

    model_config = FROZEN

    shard: NonNegativeInt
    state: PrintableText = Field(description="The shard's state when the retry selected it (failed, partial, ...).")
    reason: PrintableText | None = None
    ranges: tuple[IndexRange, ...] = Field(strict=False, description="The record indices no valid manifest covered.")
    set_aside: tuple[SetAsidePart, ...] = Field(
        default=(),
        strict=False,
        description="Damaged parts this retry set aside (moved, never deleted) so that their ranges are generated "
        "again; readers count a part named here for nothing, wherever its file is.",
    )


class RetryIntent(BaseModel):
    """A retry generation: written once, before its ``sbatch``; its submission record carries the same generation."""

    model_config = FROZEN

    generation: PositiveInt
    requested_by: Requester
    shards: tuple[RetryShard, ...] = Field(strict=False, min_length=1)
    unit: SubmissionUnit = Field(description="The bound submission (job names dd-<run id>-r<generation>-c<chunk>).")
    forced: bool = Field(default=False, description="--force: shards that ended invalid_config were included.")


class ResumeClaim(BaseModel):
    """``retries/NNNN.resume-<k>``: the k-th process that took over an intent whose submission was never recorded."""

    model_config = FROZEN

    generation: PositiveInt
    resume: PositiveInt
    requested_by: Requester


class CancellationRecord(BaseModel):
    """One ``cancel``: the shards (every shard when ``whole_run``), the scancel targets, whether it was confirmed."""

    model_config = FROZEN

    requested_by: Requester
    whole_run: bool
    shards: tuple[NonNegativeInt, ...] = Field(strict=False)
    targets: tuple[PrintableText, ...] = Field(strict=False, description="What scancel was given: job ids, job_task.")
    generations: tuple[NonNegativeInt, ...] = Field(strict=False, description="Generations whose jobs were targeted.")
    confirmed: bool = Field(description="Slurm was seen to have ended every targeted task before this was written.")


RETRY_SCHEMA: RecordSchema[RetryIntent] = RecordSchema("retry", 1, RetryIntent)
RESUME_SCHEMA: RecordSchema[ResumeClaim] = RecordSchema("retry-resume", 1, ResumeClaim)
CANCELLATION_SCHEMA: RecordSchema[CancellationRecord] = RecordSchema("cancellation", 1, CancellationRecord)
