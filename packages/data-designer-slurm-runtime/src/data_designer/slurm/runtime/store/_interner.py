"""Equal immutable values shared among the records of one read (``read_run``): one instance, not one per shard.

The records of a run's attempts repeat most of what they hold: every result manifest lists the same columns, the
same model aliases and URLs, the run id, the plan and config digests, the versions. Validated one by one, each
record holds its own copy of all of it, and each of its pydantic models its own set of field names (most of a
manifest's ~13 KiB). :class:`Interner` makes a validated record share with the records before it: its str
fields, every nested model equal to one seen before (a column, a part, a replica's counts: the model becomes that
one), and one set of field names per model class and fields given.

Sharing is exact, never approximate: a model is shared only when its class's annotations say each field holds
values that are equal only when they are the same (str, int, bool, Literal, None, tuples and NamedTuples of those,
one type per field: ``1 == True``) and its nested models are shared; one with a float (``0.0 == -0.0``), a
datetime (``==`` ignores its offset) or a dict (mutable) keeps its own instance, its nested models shared. The
contracts are strict (a field holds exactly the types its annotation names) and frozen (a shared instance cannot
change under another reader; pydantic never mutates a frozen model's field set, ``model_copy`` copies it). What a
reader concludes from a record is the same, shared or not. What the first few instances of a class never share
(a part's sha256, the part itself) is not looked up any more (:data:`_TRIAL`). Cost: about half of the record's
validation (1,000 manifests: 14.4 KiB a shard down to 5.9, ~15 ms).

An interner lives as long as one read: dropped with it, it keeps nothing alive.
"""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_UNSHARED = object()
"""The key of a part that is never shared (its container is not shared either)."""


_TRIAL = 16
"""Instances of a class looked up before its plan is pruned: a field or a model none of them shared with an earlier
one (a part's sha256, a part, a replica's counts) is not looked up again in this read (fewer keys, less time)."""


@dataclass(slots=True)
class _Plan:
    """How the fields of one model class are shared, from their annotations: the contracts are strict, so a field
    holds exactly the types its annotation names. Pruned after :data:`_TRIAL` instances (sharing less is always
    right: it only costs memory)."""

    frozen: bool
    """Only a frozen model is touched at all: anything may change another one (and its field set)."""
    all_fields: set[str]
    """Every field's name: the shared field set of a model in which every field was given (a record as written)."""
    strings: tuple[str, ...]
    """Fields that hold a str (or None): the str is shared."""
    nested: tuple[tuple[int, str], ...]
    """(position, name) of the fields that hold models (a model, a tuple of them or a dict of them, or None)."""
    keyed: bool
    """Whether the model itself can be shared: every field not nested holds values that are equal only when they
    are exactly equal (one of str, int or bool, a tuple or NamedTuple of those, or None); not a float
    (``0.0 == -0.0``), a datetime (``==`` ignores its offset) or anything else."""
    leaf: bool
    """Keyed, and nothing nested: a model told by its field set and values alone (a column, a part)."""
    seen: int = 0
    """Instances looked up so far (counted up to :data:`_TRIAL`)."""
    hits: int = 0
    """Of those, how many were an earlier one."""
    string_hits: list[int] | None = None
    """Per field of ``strings``, how many of those instances shared it."""


class Interner:
    """Shares equal parts among the records it is given; one per read.

    The parts of a record are replaced in place (a read decodes thousands of manifests: no copies), so only records
    nobody else holds yet may be given: ``read_run`` gives each record as soon as it is decoded.
    """

    def __init__(self) -> None:
        self._shared: dict[Any, Any] = {}
        """Exact key -> the one instance: a str by itself; a model by its type, field set and field values, each
        nested model by its type and id (every shared instance stays here while the interner lives, so its id is
        its own); a tuple of models by its type and its models' ids."""
        self._field_sets: dict[frozenset[str], set[str]] = {}
        self._plans: dict[type[BaseModel], _Plan] = {}

    def record(self, value: M) -> M:
        """``value`` with every part equal to one seen before replaced by that one (or that one, when equal)."""
        shared: M = self._model(value)[0]
        return shared

    def _model(self, value: BaseModel) -> tuple[Any, object]:
        """The shared instance of a frozen model and its key (:data:`_UNSHARED` when it is not shared)."""
        kind = type(value)
        plan = self._plans.get(kind) or self._plan(kind)
        if not plan.frozen:
            return value, _UNSHARED
        trial = plan.seen < _TRIAL
        if trial:
            plan.seen += 1
        names = value.__pydantic_fields_set__
        field_set = (
            plan.all_fields if names == plan.all_fields else self._field_sets.setdefault(frozenset(names), names)
        )
        fields = value.__dict__
        shared = self._shared
        if plan.leaf:
            found = shared.get((kind, id(field_set), *fields.values()))
            if found is not None:
                plan.hits += 1
                return found, id(found)
        if field_set is not names:  # never mutated: the model is frozen and model_copy copies it
            object.__setattr__(value, "__pydantic_fields_set__", field_set)
        for number, name in enumerate(plan.strings):
            item = fields[name]
            if item is not None:
                found = fields[name] = shared.setdefault(item, item)
                if trial and found is not item and plan.string_hits is not None:
                    plan.string_hits[number] += 1
        keyed = plan.keyed
        parts: list[tuple[int, object]] = []
        for position, name in plan.nested:
            item = fields[name]
            if item is None:
                continue
            found, part = self._nested(item)
            fields[name] = found
            keyed = keyed and part is not _UNSHARED
            parts.append((position, part))
        if trial and plan.seen == _TRIAL:
            _prune(plan)
        if not keyed:
            return value, _UNSHARED
        values: list[object] = [kind, id(field_set), *fields.values()]
        for position, part in parts:
            values[position + 2] = part
        found = shared.setdefault(tuple(values), value)
        if found is not value:
            plan.hits += 1
        return found, id(found)

    def _nested(self, value: Any) -> tuple[Any, object]:
        """A nested field's value (a model, a tuple of models or a dict of them) shared, and its key: a model's or
        tuple's type and the ids of the shared models (:data:`_UNSHARED`: a dict, which is mutable)."""
        if isinstance(value, BaseModel):
            found, part = self._model(value)
            return found, _UNSHARED if part is _UNSHARED else (type(found), part)
        if isinstance(value, tuple):
            items = []
            key: list[object] = [type(value)]
            changed = False
            for item in value:
                found, part = self._model(item)
                items.append(found)
                key.append(part)
                changed = changed or found is not item
            shared = tuple(items) if changed else value  # tuple[M, ...]: validated as a plain tuple
            if _UNSHARED in key:
                return shared, _UNSHARED
            found = self._shared.setdefault(tuple(key), shared)
            return found, (type(found), id(found))
        for name, item in value.items():  # a dict: never shared (mutable), its models are (in place: ours)
            value[name] = self._model(item)[0]
        return value, _UNSHARED

    def _plan(self, kind: type[BaseModel]) -> _Plan:
        frozen, fields, strings, nested, keyed = _static_plan(kind)
        plan = _Plan(frozen, set(fields), strings, nested, keyed, keyed and not nested)
        plan.string_hits = [0] * len(strings)
        self._plans[kind] = plan
        return plan


@functools.cache
def _static_plan(
    kind: type[BaseModel],
) -> tuple[bool, frozenset[str], tuple[str, ...], tuple[tuple[int, str], ...], bool]:
    """What a class's annotations say (frozen, field names, str fields, nested fields, keyed): the same for every
    read, so worked out once per process; each read's :class:`_Plan` starts from it and prunes its own copy."""
    strings: list[str] = []
    nested: list[tuple[int, str]] = []
    frozen = keyed = bool(kind.model_config.get("frozen"))
    for position, (name, field) in enumerate(kind.model_fields.items()):
        annotation = _without_none(field.annotation)
        if annotation is str:
            strings.append(name)
        elif _holds_models(annotation):
            nested.append((position, name))
        elif not _exact(annotation):
            keyed = False
    return frozen, frozenset(kind.model_fields), tuple(strings), tuple(nested), keyed


def _prune(plan: _Plan) -> None:
    """After the trial: no more lookups of what no instance shared (a model, a str field)."""
    if plan.hits == 0:
        plan.keyed = plan.leaf = False
    if plan.string_hits is not None:
        plan.strings = tuple(name for name, hits in zip(plan.strings, plan.string_hits, strict=True) if hits)
        plan.string_hits = None


def _without_none(annotation: Any) -> Any:
    """``X`` of ``X | None`` (Annotated metadata dropped), else the annotation itself."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(args) == 1:
            return _without_none(args[0])
    return annotation


def _is_model(annotation: Any) -> bool:
    return (
        isinstance(annotation, type)
        and issubclass(annotation, BaseModel)
        and bool(annotation.model_config.get("frozen"))
    )


def _holds_models(annotation: Any) -> bool:
    """A frozen model, a tuple of them (``tuple[M, ...]``) or a dict of them (``dict[str, M]``)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is tuple:
        return len(args) == 2 and args[1] is Ellipsis and _is_model(args[0])
    if origin is dict:
        return len(args) == 2 and _is_model(args[1])
    return _is_model(annotation)


def _exact(annotation: Any) -> bool:
    """Whether two values of the annotation are equal (``==``) only when they are the same value: str, int, bool,
    Literal, None, and tuples and NamedTuples of those; never a union of two (``1 == True``)."""
    annotation = _without_none(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation in (str, int, bool, type(None)):
        return True
    if origin is typing.Literal:
        return len({type(arg) for arg in args}) == 1 and type(args[0]) in (str, int, bool)
    if origin is tuple:
        return all(arg is Ellipsis or _exact(arg) for arg in args)
    if isinstance(annotation, type) and issubclass(annotation, tuple) and hasattr(annotation, "_fields"):
        return all(_exact(hint) for hint in typing.get_type_hints(annotation).values())
    return False
