"""Authored sbatch options, read as sbatch itself reads them, and refused where the plan controls them.

A profile's ``sbatch_options`` and a run's ``submission.sbatch_options`` are argv elements for ``sbatch``, whose
getopt accepts far more than ``--name=value``: a unique prefix of a long name (``--part=gpu`` is ``--partition``),
short letters (``-p gpu``, ``-pgpu``, ``-HQ``), and a value in the next element (``--comment x``). Checking the
spelling the user wrote against a list would let ``--wra=...`` replace the batch script, or a bare ``--comment``
swallow the planner's following ``--chdir``. So every list is resolved the way getopt does it, against the option
table of the pinned Slurm (``data/sbatch_options.json``, captured from ``sbatch --help``, ``man sbatch`` and the
binary's own getopt answers by ``scripts/extract-sbatch-options``):

* ``--name`` is an exact long name, else a prefix of exactly one (a prefix of several is refused, naming them);
* ``-x`` is a short letter; letters without an argument combine (``-HQ``); a letter that takes one takes the rest
  of the element (``-pgpu``) or the next element (``-p gpu``);
* a required argument is ``--name=value`` or the next element (whatever it holds, as getopt does); an optional one
  is only ever ``--name=value`` (sbatch reads ``--nice 10`` as ``--nice`` and a batch script named ``10``);
* an element that is no option (``10``, ``:``, ``--``) would become the batch script or end the options: refused.

The result is canonical, one element per option, ``--long-name=value`` or ``--long-name``, so the plan stores
exactly what sbatch will read, and canonical options resolve to themselves. Every option the plan sets, and every
option that would break the submission, is refused whatever its spelling (:data:`RESERVED_SBATCH_OPTIONS`).
Reading the package resource is the only I/O here, and it is the same for every call.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal, TypeVar

from data_designer.slurm.contracts import InternalError, InvalidInputError, KeyPath, Problem, format_key_path
from data_designer.slurm.planner._document import Document

ArgumentKind = Literal["required", "optional", "none"]
ModelT = TypeVar("ModelT")

_DATA_FILE = "sbatch_options.json"
_KINDS: Mapping[str, ArgumentKind] = {"required": "required", "optional": "optional", "none": "none"}

_RESOURCES = "the plan sizes every allocation from the deployments; change them (or the profile's gpu_request)"
_LOGS = "the planner places logs in the run directory"
_REQUEUE = "set requeue in the run file's submission settings"
_ENVIRONMENT = "pass variables by name under 'environment'"
_SUBMIT = "the scheduler adapter submits every job itself and reads its answer"

RESERVED_SBATCH_OPTIONS: Mapping[str, str] = {
    # What the plan sets, in the batch script or on the submission's argv.
    "job-name": "the planner names every job after its run and chunk",
    "array": "the planner builds array specs from the shard count and MaxArraySize",
    "output": _LOGS,
    "error": _LOGS,
    "open-mode": f"{_LOGS} and opens them itself",
    "signal": "set the warning lead in the run file's submission settings",
    "requeue": _REQUEUE,
    "no-requeue": _REQUEUE,
    "export": _ENVIRONMENT,
    "export-file": _ENVIRONMENT,
    "get-user-env": f"{_ENVIRONMENT}; a login environment would replace the planned one",
    "chdir": "the planner sets the working directory to the run directory",
    "dependency": "the planner controls dependencies between jobs",
    "partition": "set 'partitions.gpu' / 'partitions.cpu' (or the run file's submission partition) instead",
    "account": "set 'account' (or the run file's submission account) instead",
    "time": "set 'default_time_limit' (or the run file's time limit) instead",
    "time-min": "the plan's time limit is fixed: the drain lead and warning signal are computed from it",
    "hold": "the planner submits jobs to run; hold them with scontrol hold if you must",
    "clusters": "a profile describes one cluster; add another cluster to the profile instead",
    # The resources of an allocation: the script's #SBATCH lines, which an argv option would override.
    "nodes": _RESOURCES,
    "ntasks": _RESOURCES,
    "ntasks-per-node": _RESOURCES,
    "ntasks-per-core": _RESOURCES,
    "ntasks-per-socket": _RESOURCES,
    "ntasks-per-gpu": _RESOURCES,
    "cpus-per-task": "set the client's 'cpus' in the run file; the plan sums CPUs per node",
    "cpus-per-gpu": _RESOURCES,
    "mem": "set the client's 'memory_gb' and the deployments' 'memory_gb_per_replica' in the run file; the plan "
    "sums memory per node",
    "mem-per-cpu": _RESOURCES,
    "mem-per-gpu": _RESOURCES,
    "gres": _RESOURCES,
    "gpus": _RESOURCES,
    "gpus-per-node": _RESOURCES,
    "gpus-per-socket": _RESOURCES,
    "gpus-per-task": _RESOURCES,
    "exclusive": "set the run file's submission 'exclusive' (or the profile's gpu_request: whole_node)",
    "nodelist": "a node list can raise the node count past the plan's; use --constraint or --exclude to pick nodes",
    "nodefile": "a node list can raise the node count past the plan's; use --constraint or --exclude to pick nodes",
    # What would break the submission or the job itself.
    "wrap": "the planner renders the batch script itself",
    "container": "set 'container_runtime' and 'compute_python.image'; the batch script must run outside a container",
    "input": "the allocation supervisor reads nothing on standard input",
    "parsable": "the scheduler adapter always submits with --parsable",
    "test-only": f"{_SUBMIT}; use --dry-run to see the plan without submitting",
    "wait": f"{_SUBMIT} and returns at once; use 'wait' to follow a run",
    "help": f"{_SUBMIT}; --help submits nothing",
    "usage": f"{_SUBMIT}; --usage submits nothing",
    "version": f"{_SUBMIT}; --version submits nothing",
    "uid": "jobs run as the user who submits them: the run directory and its records are theirs",
    "gid": "jobs run as the user who submits them: the run directory and its records are theirs",
}
"""Canonical long name -> why it is reserved and what to use instead."""


@dataclass(frozen=True)
class SbatchOptionSpec:
    """One sbatch option: its long name, its short letter (if any) and whether it takes an argument."""

    name: str
    short: str | None
    argument: ArgumentKind


@dataclass(frozen=True)
class ResolvedSbatchOptions:
    """Authored options in canonical form, and every problem found (the options are only meaningful without)."""

    options: tuple[str, ...]
    problems: tuple[Problem, ...]


@functools.cache
def _data() -> Mapping[str, object]:
    text = resources.files("data_designer.slurm.planner").joinpath("data", _DATA_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    if not isinstance(data, dict):
        raise InternalError(f"{_DATA_FILE} is not a mapping", code="sbatch_options_data")
    return data


@functools.cache
def sbatch_option_table() -> Mapping[str, SbatchOptionSpec]:
    """Long name -> option, for the pinned Slurm (``data/sbatch_options.json``)."""
    options = _data().get("options")
    if not isinstance(options, list) or not options:
        raise InternalError(f"{_DATA_FILE} has no 'options' list", code="sbatch_options_data")
    table: dict[str, SbatchOptionSpec] = {}
    for entry in options:
        fields = entry if isinstance(entry, dict) else {}
        name, short, kind = fields.get("name"), fields.get("short"), fields.get("argument")
        if not (
            isinstance(name, str)
            and name
            and isinstance(kind, str)
            and kind in _KINDS
            and (short is None or isinstance(short, str))
        ):
            raise InternalError(f"{_DATA_FILE}: malformed option {entry!r}", code="sbatch_options_data")
        table[name] = SbatchOptionSpec(name=name, short=short, argument=_KINDS[kind])
    return table


@functools.cache
def _by_short() -> Mapping[str, SbatchOptionSpec]:
    return {spec.short: spec for spec in sbatch_option_table().values() if spec.short is not None}


@functools.cache
def sbatch_version() -> str:
    """The Slurm release whose sbatch the option table was captured from (``slurm-wlm 22.05.8``)."""
    origin = _data().get("origin")
    version = origin.get("sbatch_version") if isinstance(origin, dict) else None
    if not isinstance(version, str):
        raise InternalError(f"{_DATA_FILE} names no sbatch_version", code="sbatch_options_data")
    return version


def canonical_sbatch_options(
    items: Sequence[str], *, path: KeyPath = ("sbatch_options",), operation: str = "plan.sbatch_options"
) -> tuple[str, ...]:
    """``items`` in canonical form; raises :class:`InvalidInputError` carrying every problem."""
    resolved = resolve_sbatch_options(items, path=path)
    if resolved.problems:
        raise InvalidInputError.from_problems(list(resolved.problems), operation=operation)
    return resolved.options


def resolve_sbatch_options(
    items: Sequence[str], *, path: KeyPath = ("sbatch_options",), document: Document | None = None
) -> ResolvedSbatchOptions:
    """Resolve ``items`` as sbatch's getopt does (see the module docstring); never raises.

    ``path`` is the key path of the list; a problem names the element its option starts at. With ``document``,
    problems also carry its file and the element's line.
    """
    resolver = _Resolver(items, path, document)
    resolver.run()
    return ResolvedSbatchOptions(options=tuple(resolver.options), problems=tuple(resolver.problems))


class _Resolver:
    def __init__(self, items: Sequence[str], path: KeyPath, document: Document | None) -> None:
        self.items = items
        self.path = path
        self.document = document
        self.options: list[str] = []
        self.problems: list[Problem] = []
        self.index = 0
        self.unknown = False

    def run(self) -> None:
        after_optional: SbatchOptionSpec | None = None
        while self.index < len(self.items):
            item, at = self.items[self.index], self.index
            self.index += 1
            self.unknown = False
            if item.startswith("--") and len(item) > 2:
                after_optional = self._long(item, at)
            elif item.startswith("-") and len(item) > 1 and item != "--":
                after_optional = self._short(item, at)
            else:
                self._not_an_option(item, at, after_optional)
                after_optional = None
            # An option that could not be resolved may own the next item as its value: one problem is enough.
            if self.unknown and "=" not in item and self.index < len(self.items):
                self.index += 0 if self.items[self.index].startswith("-") else 1

    def _long(self, item: str, at: int) -> SbatchOptionSpec | None:
        name, eq, value = item[2:].partition("=")
        spelling = f"--{name}"
        spec = self._lookup(name, spelling, at)
        if spec is None:
            return None
        if spec.argument == "none" and eq and spec.name not in RESERVED_SBATCH_OPTIONS:
            self._problem(
                "sbatch_option_value",
                at,
                f"sbatch option --{spec.name}{_written(spec, spelling)} takes no value",
                f"write it as '--{spec.name}' alone",
            )
            return None
        if spec.argument == "required" and not eq:
            taken = self._next_value(spec, spelling, at)
            if taken is None:
                return None
            value, eq = taken, "="
        self._emit(spec, spelling, at, value if eq else None)
        return spec if spec.argument == "optional" and not eq else None

    def _short(self, item: str, at: int) -> SbatchOptionSpec | None:
        position = 1
        while position < len(item):
            letter = item[position]
            spelling = f"-{letter}"
            spec = _by_short().get(letter)
            if spec is None:
                self.unknown = True
                self._problem(
                    "unknown_sbatch_option",
                    at,
                    f"sbatch ({sbatch_version()}) has no option {spelling}"
                    + (f" (in {_shown(item)})" if item != spelling else ""),
                    "write the option's long name, e.g. '--constraint=a100'",
                )
                return None
            rest = item[position + 1 :]
            if spec.argument == "none":
                self._emit(spec, spelling, at, None)
                position += 1
                continue
            if rest:
                self._emit(spec, spelling, at, rest)
                return None
            if spec.argument == "optional":
                self._emit(spec, spelling, at, None)
                return spec
            taken = self._next_value(spec, spelling, at)
            if taken is not None:
                self._emit(spec, spelling, at, taken)
            return None
        return None

    def _lookup(self, name: str, spelling: str, at: int) -> SbatchOptionSpec | None:
        table = sbatch_option_table()
        if name in table:
            return table[name]
        candidates = sorted(n for n in table if n.startswith(name)) if name else []
        if len(candidates) == 1:
            return table[candidates[0]]
        self.unknown = True
        if candidates:
            self._problem(
                "ambiguous_sbatch_option",
                at,
                f"sbatch option {spelling!r} is ambiguous: it abbreviates " + ", ".join(f"--{c}" for c in candidates),
                "write the option's full long name",
            )
            return None
        close = difflib.get_close_matches(name, list(table), n=1, cutoff=0.75)
        self._problem(
            "unknown_sbatch_option",
            at,
            f"sbatch ({sbatch_version()}) has no option {spelling!r}",
            f"did you mean '--{close[0]}'?" if close else "write an option 'sbatch --help' lists, e.g. '--comment=x'",
        )
        return None

    def _next_value(self, spec: SbatchOptionSpec, spelling: str, at: int) -> str | None:
        if self.index < len(self.items):
            value = self.items[self.index]
            self.index += 1
            return value
        if spec.name in RESERVED_SBATCH_OPTIONS:
            self._emit(spec, spelling, at, None)  # reported as reserved, which says more than a missing value
            return None
        self._problem(
            "sbatch_option_value",
            at,
            f"sbatch option --{spec.name}{_written(spec, spelling)} needs a value and the list ends",
            f"write it as one item, '--{spec.name}=VALUE'",
        )
        return None

    def _not_an_option(self, item: str, at: int, after_optional: SbatchOptionSpec | None) -> None:
        if after_optional is not None:
            name = after_optional.name
            message = f"{_shown(item)} follows --{name}, which takes a value only as --{name}=VALUE"
            hint = f"write '--{name}=VALUE' as one item"
        elif item == "--":
            message = "'--' ends sbatch's options: what follows would be read as the batch script"
            hint = "remove it"
        else:
            message = f"{_shown(item)} is not an sbatch option: sbatch would read it as the batch script"
            hint = "write each option as '--name=value' (or its value as the item after '--name')"
        self._problem("sbatch_option_form", at, message, hint)

    def _emit(self, spec: SbatchOptionSpec, spelling: str, at: int, value: str | None) -> None:
        reason = RESERVED_SBATCH_OPTIONS.get(spec.name)
        if reason is not None:
            self._problem(
                "reserved_sbatch_option",
                at,
                f"sbatch option --{spec.name}{_written(spec, spelling)} is reserved",
                f"remove it: {reason}",
            )
            return
        self.options.append(f"--{spec.name}" if value is None else f"--{spec.name}={value}")

    def _problem(self, code: str, at: int, message: str, hint: str) -> None:
        key = (*self.path, at)
        if self.document is not None:
            self.problems.append(self.document.problem_at(key, code=code, message=message, hint=hint))
        else:
            self.problems.append(Problem(code=code, message=message, key_path=key, hint=hint))


def _written(spec: SbatchOptionSpec, spelling: str) -> str:
    return "" if spelling == f"--{spec.name}" else f" (written {spelling!r})"


def _shown(item: str) -> str:
    return repr(item if len(item) <= 40 else item[:37] + "...")


def validate_with_sbatch_options(
    validate: Callable[[], ModelT], document: Document, paths: Iterable[KeyPath], *, operation: str
) -> ModelT:
    """``validate()`` (a :func:`validate_document` call on ``document``), also refusing the sbatch option lists at
    ``paths`` of the document: every problem of both is raised at once, sorted by line.

    A list whose items are not all strings is left to the contract's own problems, and so is an item the contract
    already refuses (a control character).
    """
    found: list[Problem] = []
    for path in paths:
        items = _at(document.data, path)
        if isinstance(items, list) and all(isinstance(item, str) for item in items):
            found.extend(resolve_sbatch_options(items, path=path, document=document).problems)
    try:
        result = validate()
    except InvalidInputError as exc:
        if not found:
            raise
        seen = {problem.key_path for problem in exc.problems}
        merged = [*exc.problems, *(problem for problem in found if problem.key_path not in seen)]
        raise _combined(merged, operation, document) from None
    if found:
        raise _combined(found, operation, document)
    return result


def _combined(problems: list[Problem], operation: str, document: Document) -> InvalidInputError:
    ordered = sorted(problems, key=lambda p: (p.line or 0, format_key_path(p.key_path or ())))
    return InvalidInputError.from_problems(ordered, operation=operation, file=document.file)


def _at(data: object, path: KeyPath) -> object:
    for part in path:
        if isinstance(part, str) and isinstance(data, dict):
            data = data.get(part)
        elif isinstance(part, int) and isinstance(data, list) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data
