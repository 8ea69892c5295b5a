"""``plan.json``: the one loader of a run's immutable plan, read and digest-checked in one place.

``execute`` writes the plan as its plain canonical JSON (the plan carries its own ``digest``; dry runs write the
same bytes). Every reader (the supervisor, the client worker, the run reader behind ``status``) loads it here:
the bytes must parse as an :class:`ExecutionPlan`, whose digest recomputed from its fields equals the one it
carries (and the run record's, when the caller knows it). A ``plan`` record envelope around the same payload is
accepted too (checksummed like every record).

The digest is checked on the bytes first: a plain plan file as ``execute`` writes it is the canonical JSON of the
plan, so the file without its top-level ``"digest"`` member is exactly the bytes the digest was computed over, and
hashing them proves what re-encoding the parsed plan would (``runs ls`` loads a thousand plans). A file that is
not in that form (reformatted, edited) takes the full check, :func:`digest_problem`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import ValidationError

from data_designer.slurm.contracts import ConflictError, ExecutionPlan, NotFoundError, UnavailableError
from data_designer.slurm.contracts.records import RecordSchema
from data_designer.slurm.planner import plan_digest
from data_designer.slurm.runtime.store._layout import RunLayout
from data_designer.slurm.runtime.store._record_io import DEFAULT_MAX_RECORD_BYTES, RecordOk, decode_record
from data_designer.slurm.runtime.store._run_files import RunFileRefused, read_run_file

PLAN_SCHEMA: RecordSchema[ExecutionPlan] = RecordSchema("plan", 1, ExecutionPlan)
_OPERATION = "store.load_plan"
MAX_PLAN_BYTES = DEFAULT_MAX_RECORD_BYTES


def load_plan(layout: RunLayout, *, expected_digest: str | None = None) -> ExecutionPlan:
    """The run's plan; ``expected_digest`` (the run record's) must match when given."""
    return load_plan_file(layout.plan_record, expected_digest=expected_digest)


def digest_problem(plan: ExecutionPlan) -> str | None:
    """Why ``plan`` is not what its ``digest`` says (None when it is): the one digest check of a loaded plan."""
    actual = plan_digest(plan)
    if actual == plan.digest:
        return None
    return f"does not match its digest (edited or corrupt): the plan says {plan.digest}, its content hashes to {actual}"


def load_plan_file(path: Path, *, expected_digest: str | None = None, verify_digest: bool = True) -> ExecutionPlan:
    """The plan at ``path``, checked against its own digest (``verify_digest=False``: the caller checks it later
    with :func:`digest_problem`, as the supervisor does once it knows which attempt's status to write).

    Raises NotFoundError ``plan_not_found`` (no file), UnavailableError ``filesystem_unavailable`` (the
    filesystem refused), ConflictError ``plan_mismatch`` (not a plan, edited, or another run's digest).
    """
    try:
        data = read_run_file(path, MAX_PLAN_BYTES)
    except FileNotFoundError as exc:
        raise NotFoundError(
            f"the run's plan {str(path)!r} is missing", code="plan_not_found", operation=_OPERATION, file=str(path)
        ) from exc
    except RunFileRefused as exc:
        raise _mismatch(path, f"is {exc.kind}, not a regular file") from exc
    except OSError as exc:
        raise UnavailableError(
            f"cannot read the plan {str(path)!r}: {exc.strerror}",
            code="filesystem_unavailable",
            operation=_OPERATION,
            file=str(path),
        ) from exc
    if len(data) > MAX_PLAN_BYTES:
        raise _mismatch(path, f"is larger than {MAX_PLAN_BYTES} bytes: not a plan this project wrote")
    plan = _decode(data, path)
    problem = None
    if verify_digest and not _canonical_bytes_match(data, plan.digest):
        problem = digest_problem(plan)
    if problem is not None:
        raise _mismatch(path, problem)
    if expected_digest is not None and plan.digest != expected_digest:
        raise _mismatch(path, f"has digest {plan.digest}, not the run record's {expected_digest}")
    return plan


def _canonical_bytes_match(data: bytes, digest: str) -> bool:
    """``data`` with one ``"digest":"<digest>"`` member removed hashes to ``digest``: the file is the canonical JSON
    the digest was computed over plus the digest itself. (Removing a member anywhere but at the top level would
    leave a plan without its digest, which did not parse.) False for anything else, including a plan record."""
    member = b'"digest":"' + digest.encode("utf-8", "replace") + b'"'
    start = data.find(member)
    while start != -1:
        end = start + len(member)
        if data[end : end + 1] == b",":
            body = data[:start] + data[end + 1 :]
        elif data[start - 1 : start] == b",":
            body = data[: start - 1] + data[end:]
        else:
            body = data[:start] + data[end:]
        if hashlib.sha256(body).hexdigest() == digest:
            return True
        start = data.find(member, end)
    return False


def _decode(data: bytes, path: Path) -> ExecutionPlan:
    try:
        # A record's canonical JSON starts with its first sorted key; a plain plan's never is "checksum".
        if data.startswith(b'{"checksum":'):
            found = decode_record(data, PLAN_SCHEMA, path=path)
            if not isinstance(found, RecordOk):
                raise _mismatch(path, f"is a plan record that is {found.status.replace('_', ' ')}")
            return found.payload
        return ExecutionPlan.model_validate_json(data)
    except ValidationError as exc:
        raise _mismatch(path, f"is not a valid plan: {exc.error_count()} problem(s)") from exc


def _mismatch(path: Path, what: str) -> ConflictError:
    return ConflictError(
        f"the run's plan {str(path)!r} {what}",
        code="plan_mismatch",
        operation=_OPERATION,
        file=str(path),
        hint="the run directory was modified; submit the run file again as a new run",
    )
