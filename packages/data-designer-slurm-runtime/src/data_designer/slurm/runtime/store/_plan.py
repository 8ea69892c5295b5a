"""``plan.json``: the one loader of a run's immutable plan, read and digest-checked in one place.

``execute`` writes the plan as its plain canonical JSON (the plan carries its own ``digest``; dry runs write the
same bytes). Every reader (the supervisor, the client worker, the run reader behind ``status``) loads it here:
the bytes must parse as an :class:`ExecutionPlan`, whose digest recomputed from its fields equals the one it
carries (and the run record's, when the caller knows it). A ``plan`` record envelope around the same payload is
accepted too (checksummed like every record).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from data_designer.slurm.contracts import ConflictError, ExecutionPlan, NotFoundError, UnavailableError
from data_designer.slurm.contracts.records import RecordSchema
from data_designer.slurm.planner import plan_digest
from data_designer.slurm.runtime.store._layout import RunLayout
from data_designer.slurm.runtime.store._record_io import RecordOk, decode_record

PLAN_SCHEMA: RecordSchema[ExecutionPlan] = RecordSchema("plan", 1, ExecutionPlan)
_OPERATION = "store.load_plan"


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
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise NotFoundError(
            f"the run's plan {str(path)!r} is missing", code="plan_not_found", operation=_OPERATION, file=str(path)
        ) from exc
    except OSError as exc:
        raise UnavailableError(
            f"cannot read the plan {str(path)!r}: {exc.strerror}",
            code="filesystem_unavailable",
            operation=_OPERATION,
            file=str(path),
        ) from exc
    plan = _decode(data, path)
    problem = digest_problem(plan) if verify_digest else None
    if problem is not None:
        raise _mismatch(path, problem)
    if expected_digest is not None and plan.digest != expected_digest:
        raise _mismatch(path, f"has digest {plan.digest}, not the run record's {expected_digest}")
    return plan


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
