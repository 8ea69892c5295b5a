"""Validate a strict document against a contract, collecting every problem at once."""

from __future__ import annotations

import types
import typing
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from data_designer.slurm.contracts import (
    MAX_REPORTED_PROBLEMS,
    InvalidInputError,
    KeyPath,
    Problem,
    excerpt,
    format_key_path,
    hint_of,
)
from data_designer.slurm.planner._document import Document
from data_designer.slurm.planner._secrets import find_secret_literals

ModelT = TypeVar("ModelT", bound=BaseModel)

_TYPE_HINTS = {
    "string_type": "write a string (quote it in YAML)",
    "int_type": "write a whole number",
    "bool_type": "write true or false",
    "float_type": "write a number",
    "dict_type": "write a mapping of keys to values",
    "model_type": "write a mapping of keys to values",
    "literal_error": "use one of the values the message names",
    "tuple_type": "write a list",
    "list_type": "write a list",
    "greater_than": "write a larger number",
    "greater_than_equal": "write a larger number",
    "less_than_equal": "write a smaller number",
    "too_short": "add at least one entry",
    "string_too_short": "write a non-empty value",
    "finite_number": "use a finite number; NaN and infinities are not allowed",
}


_KEY_ONLY_TYPES = frozenset({"extra_forbidden", "missing"})
"""Validation errors whose problems (``unknown_key``, ``missing_key``) name only a key, so they are reported even
where a secret literal is."""
_KINDS = {"RunSpec": "run file", "BenchmarkSpec": "benchmark file", "Profile": "cluster profile"}


def document_kind(model: type[BaseModel]) -> str:
    """What a document of ``model`` is called in messages: ``run file``, ``benchmark file``, ``cluster profile``."""
    return _KINDS.get(model.__name__, model.__name__)


def validate_document(model: type[ModelT], document: Document, *, operation: str) -> ModelT:
    """Validate ``document`` as ``model``; raise one :class:`InvalidInputError` naming every problem.

    Messages show values only through :func:`~data_designer.slurm.contracts.excerpt`; a file that is not a
    mapping is named with its kind, never echoed; at a key path holding a secret literal only the secret problem
    and problems naming just the key (unknown or missing) are reported, so no other message can show the value.
    At most ``MAX_REPORTED_PROBLEMS`` are reported, in file order, then one saying how many more there are; the
    validation errors past those are counted, never turned into problems.
    """
    problems = list(document.problems)
    secrets = find_secret_literals(document)
    problems.extend(secrets)
    unbuilt = 0
    result: ModelT | None = None
    if document.data is None and not document.problems:
        problems.append(
            Problem(code="empty_document", message="the file is empty", file=document.file, hint="write the document")
        )
    elif document.data is not None and not isinstance(document.data, dict):
        kind = document_kind(model)
        problems.append(
            Problem(
                code="not_a_document",
                message=f"the file is not a {kind}: it holds {_article(document.data)}, not a mapping of keys",
                file=document.file,
                hint=f"name a {kind} (a YAML or JSON mapping with 'schema_version' at the top)",
            )
        )
    elif document.data is not None:
        try:
            result = model.model_validate(document.data)
        except ValidationError as exc:
            hidden = {p.key_path for p in secrets}
            shown = [
                (path, errors)
                for path, errors in sorted(_errors_by_path(exc, document).items(), key=lambda i: _order(document, i[0]))
                if errors[0]["type"] in _KEY_ONLY_TYPES or not _under(path, hidden)
            ]
            # Only the first MAX_REPORTED_PROBLEMS in file order can be reported: build those, count the rest.
            unbuilt = max(0, len(shown) - MAX_REPORTED_PROBLEMS)
            problems.extend(_problem(path, errors, document, model) for path, errors in shown[:MAX_REPORTED_PROBLEMS])
    if problems or result is None:
        ordered = sorted(_dedupe(problems), key=lambda p: (p.line or 0, format_key_path(p.key_path or ())))
        raise InvalidInputError.from_problems(
            capped_problems(ordered, unbuilt, file=document.file),
            operation=operation,
            file=document.file,
            total=len(ordered) + unbuilt,
        )
    return result


def capped_problems(problems: list[Problem], unbuilt: int = 0, *, file: str | None = None) -> list[Problem]:
    """The first ``MAX_REPORTED_PROBLEMS`` of ``problems`` and, when there are more (or ``unbuilt`` more were only
    counted), one ``over_limit`` problem saying how many more there are."""
    more = len(problems) - MAX_REPORTED_PROBLEMS + unbuilt
    if more <= 0:
        return problems
    return [
        *problems[:MAX_REPORTED_PROBLEMS],
        Problem(
            code="over_limit",
            message=f"and {more:,} more problems: at most {MAX_REPORTED_PROBLEMS} are reported for one file",
            file=file,
            hint="fix the problems above and check the file again",
        ),
    ]


def _order(document: Document, path: KeyPath) -> tuple[int, str]:
    """Where the problem :func:`_problem` makes at ``path`` sorts among a file's problems (line, then key path)."""
    return document.line_of(path) or 0, format_key_path(path)


def _article(data: object) -> str:
    names = {str: "a string", list: "a list", bool: "a boolean", int: "a number", float: "a number"}
    return names.get(type(data), "a value")


def _under(key_path: KeyPath | None, hidden: set[KeyPath | None]) -> bool:
    """Whether ``key_path`` is one of ``hidden`` or lies inside one."""
    if key_path in hidden:
        return True
    return key_path is not None and any(h is not None and key_path[: len(h)] == h for h in hidden)


def problems_from_validation(exc: ValidationError, document: Document, model: type[BaseModel]) -> list[Problem]:
    """One problem per offending key path; alternatives of a union are merged into one message."""
    return [_problem(path, errors, document, model) for path, errors in _errors_by_path(exc, document).items()]


def _errors_by_path(exc: ValidationError, document: Document) -> dict[KeyPath, list[dict[str, Any]]]:
    """The validation errors grouped by the key path of the data they are about (tags of unions resolved)."""
    by_path: dict[KeyPath, list[dict[str, Any]]] = {}
    for raw in exc.errors(include_url=False):
        error = _tag_error(dict(raw))
        path = _data_path(document.data, tuple(error["loc"]), error["type"])
        by_path.setdefault(path, []).append(error)
    return by_path


def _tag_error(error: dict[str, Any]) -> dict[str, Any]:
    """A discriminated union's tag error as an error at the tag's key: a missing tag is a missing key.

    ``deployments.writer`` without ``engine`` becomes ``deployments.writer.engine``, missing, reported at the
    line of ``writer``; an unknown tag is reported at the tag's own line with the tags allowed."""
    kind = error["type"]
    if kind not in ("union_tag_not_found", "union_tag_invalid") or not isinstance(error.get("input"), dict):
        return error
    ctx = error.get("ctx") or {}
    name = str(ctx.get("discriminator", "")).strip("'")
    if not name.isidentifier():
        return error  # a callable discriminator: no key to point at
    loc = (*error["loc"], name)
    if kind == "union_tag_not_found":
        return {"type": "missing", "loc": loc, "msg": "Field required", "input": error["input"]}
    expected = ctx.get("expected_tags", "")
    return {
        "type": "literal_error",
        "loc": loc,
        "msg": f"{name} {excerpt(ctx.get('tag'))} is not one of {expected}",
        "input": ctx.get("tag"),
        "ctx": {"hint": f"use one of: {expected}"},
    }


def _problem(path: KeyPath, errors: list[dict[str, Any]], document: Document, model: type[BaseModel]) -> Problem:
    first = errors[0]
    kind = str(first["type"])
    if kind == "extra_forbidden":
        allowed = allowed_keys(model, path[:-1])
        hint = "remove it or fix its spelling"
        if allowed:
            hint += f"; keys allowed here: {', '.join(allowed)}"
        return document.problem_at(path, code="unknown_key", message=f"unknown key {excerpt(path[-1])}", hint=hint)
    if kind == "missing":
        return document.problem_at(
            path, code="missing_key", message=f"required key {path[-1]!r} is missing", hint=f"add '{path[-1]}'"
        )
    custom = [e for e in errors if hint_of(e)]
    chosen = custom[0] if custom else first
    message = (
        chosen["msg"] if len(errors) == 1 or custom else " or ".join(dict.fromkeys(_lower(e["msg"]) for e in errors))
    )
    if not custom and "input" in chosen and not isinstance(chosen["input"], dict | list):
        message = f"{message} (got {excerpt(chosen['input'])})"
    return document.problem_at(
        path,
        code=str(chosen["type"]),
        message=_lower(message),
        hint=hint_of(chosen)
        or (_TYPE_HINTS.get(str(chosen["type"])) if len(errors) == 1 else "write one of the accepted forms"),
    )


def _lower(message: str) -> str:
    return message[:1].lower() + message[1:]


def _data_path(data: Any, loc: tuple[Any, ...], kind: str) -> KeyPath:
    """Keep the parts of a pydantic location that exist in the data (dropping union-branch tags)."""
    out: list[str | int] = []
    current = data
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        if (isinstance(current, dict) and part in current) or (
            isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        ):
            out.append(part)
            current = current[part]
        elif last and kind == "missing":
            out.append(part)
    return tuple(out)


def allowed_keys(model: type[BaseModel], path: KeyPath) -> list[str]:
    """The keys a mapping at ``path`` accepts, following the model's field annotations."""
    node: Any = model
    for part in path:
        node = _step(node, part)
        if node is None:
            return []
    models = list(_models_in(node))
    keys: list[str] = []
    for m in models:
        keys.extend(f.alias or name for name, f in m.model_fields.items())
    return sorted(dict.fromkeys(keys))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    return []


def _step(annotation: Any, part: str | int) -> Any:
    for m in _models_in(annotation):
        field = m.model_fields.get(str(part))
        if field is not None:
            return field.annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _step(typing.get_args(annotation)[0], part)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _step(arg, part)
            if found is not None:
                return found
        return None
    if origin is dict:
        return typing.get_args(annotation)[1]
    if origin in (tuple, list):
        args = typing.get_args(annotation)
        return args[0] if args else None
    return None


def _dedupe(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))
