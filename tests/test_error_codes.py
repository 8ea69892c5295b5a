"""The catalogue of error codes (``contracts.ERROR_CODES``) is exactly the set of codes the sources can raise.

The troubleshooting page (fern/pages/troubleshooting.mdx) is checked against the catalogue by fern/check_docs.py; this
test closes the other half: every code a source file can put in an error, a problem, a validation error or a plan
warning is in the catalogue with the exit code of the error that carries it, and no catalogue entry is dead.

Codes are found statically, so no path through the code can hide one. A code is a string literal given as ``code=``
to a call, the first argument of ``PydanticCustomError``, or the ``default_code`` of an error class made without
``code=`` (directly or through ``super().__init__``). A ``code=`` that is a
parameter of its function is resolved through that function's call sites in the same module (how the planner's
``_problem(code, ...)`` helpers are written); a module constant is resolved to its value; ``a if c else b`` to both.
Anything else must be listed in :data:`DYNAMIC` with the codes it can produce, so a new computed code fails here
until someone says what it yields.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import pytest

from data_designer.slurm.contracts import (
    ERROR_CODES,
    PROBE_CHECK_NAMES,
    VALIDATION_TYPE_CODES,
    WARNING_CODES,
    ErrorCategory,
    InvalidInputError,
    ProbeStatus,
)
from data_designer.slurm.planner import load_run

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(
    path
    for path in ROOT.glob("packages/*/src/**/*.py")
    # test doubles ship in the runtime wheel but no command runs them
    if "testing" not in path.relative_to(ROOT).parts
)

ERROR_CLASSES = {
    "SlurmExtensionError": ErrorCategory.INTERNAL,
    "InvalidInputError": ErrorCategory.INVALID_INPUT,
    "NotFoundError": ErrorCategory.NOT_FOUND,
    "ConflictError": ErrorCategory.CONFLICT,
    "UnavailableError": ErrorCategory.UNAVAILABLE,
    "CheckFailedError": ErrorCategory.CHECK_FAILED,
    "InternalError": ErrorCategory.INTERNAL,
    "InterruptError": ErrorCategory.INTERRUPTED,
}
PROBLEM = "problem"
"""A ``Problem`` (or a data-designer config finding): printed inside an error, exit 2 unless the catalogue says."""
VALIDATION = "validation"
"""A ``PydanticCustomError`` type: it becomes a problem's code when the planner reports a validation error."""
WARNING = "warning"
CARRIERS = {"Problem": PROBLEM, "ConfigFinding": PROBLEM, "PydanticCustomError": VALIDATION, "PlanWarning": WARNING}

PASSTHROUGH: frozenset[str] = frozenset()
"""A site that re-raises or re-wraps a code another site made (that site is scanned)."""


def _probe_outcomes() -> frozenset[str]:
    """``probe_<check>_<status>`` for every ``record("<check>", "<status>", ...)`` of the probe that is not ``ok``."""
    outcomes: set[str] = set()
    for path in ROOT.glob("packages/data-designer-slurm-runtime/src/data_designer/slurm/runtime/probe/*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "record":
                check, status = (str(a.value) if isinstance(a, ast.Constant) else None for a in node.args[:2])
                if status in get_args(ProbeStatus) and status != "ok":
                    # a check named by a variable (the partition checks' loop) may be any check
                    checks = [check] if check in PROBE_CHECK_NAMES else list(PROBE_CHECK_NAMES)
                    outcomes.update(f"probe_{name}_{status}" for name in checks)
    return frozenset(outcomes)


PROBE_OUTCOMES = _probe_outcomes()
DYNAMIC: dict[tuple[str, str], frozenset[str]] = {
    # the error root itself: an explicit code, else the class's default_code (both scanned)
    (
        "data-designer-slurm-contracts/src/data_designer/slurm/contracts/_errors.py",
        "code or self.default_code",
    ): PASSTHROUGH,
    # a failed or unrun probe check: probe_<check>_<status>, for each outcome the probe records (see _probe_outcomes)
    (
        "data-designer-slurm-contracts/src/data_designer/slurm/contracts/_probe.py",
        "f'probe_{check.name}_{check.status}'",
    ): (PROBE_OUTCOMES),
    # a plan that does not fit the partition's nodes, per dimension (planner/_fit.py _NOUNS)
    ("data-designer-slurm-planner/src/data_designer/slurm/planner/_fit.py", "f'cluster_{kind}'"): frozenset(
        {"cluster_cpus", "cluster_memory", "cluster_gpus"}
    ),
    # a validation error's type: one of ours (PydanticCustomError, scanned) or pydantic's own (VALIDATION_TYPE_CODES)
    ("data-designer-slurm-planner/src/data_designer/slurm/planner/_validation.py", "str(chosen['type'])"): PASSTHROUGH,
}


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


@dataclass(frozen=True)
class _ErrorClass:
    category: ErrorCategory
    default_code: str | None


def _error_classes(trees: dict[Path, ast.Module]) -> dict[str, _ErrorClass]:
    """Error class name -> its category and ``default_code``, own or inherited, through subclasses defined anywhere
    in the sources (by simple name)."""
    bases: dict[str, list[str]] = {}
    own: dict[str, str] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [n for base in node.bases if (n := _name(base)) is not None]
                for statement in node.body:
                    if (
                        isinstance(statement, ast.Assign | ast.AnnAssign)
                        and isinstance(statement.value, ast.Constant)
                        and any(
                            isinstance(t, ast.Name) and t.id == "default_code"
                            for t in (statement.targets if isinstance(statement, ast.Assign) else [statement.target])
                        )
                    ):
                        own[node.name] = str(statement.value.value)

    def lineage(name: str, seen: frozenset[str] = frozenset()) -> Iterator[str]:
        """``name``, then its bases depth first (the order a default_code is inherited in)."""
        yield name
        for base in bases.get(name, []):
            if base not in seen:
                yield from lineage(base, seen | {name})

    classes: dict[str, _ErrorClass] = {}
    for name in {*bases, *ERROR_CLASSES}:
        line = list(lineage(name))
        category = next((ERROR_CLASSES[n] for n in line if n in ERROR_CLASSES), None)
        if category is not None:
            classes[name] = _ErrorClass(category, next((own[n] for n in line if n in own), None))
    return classes


def _default_made(module: _Module, call: ast.Call, made: list[_ErrorClass]) -> set[tuple[str, str]]:
    """(default code, category) of each error ``call`` makes without ``code=``: ``Error(...)`` or ``super().__init__``."""
    if (
        not made
        and _name(call.func) == "__init__"
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Call)
        and _name(call.func.value.func) == "super"
    ):
        made = [c for c in [module.class_of(call)] if c is not None]
    return {(c.default_code, c.category.value) for c in made if c.default_code is not None}


class _Module:
    """One source file: resolves a code expression to the literals it can be."""

    def __init__(self, path: Path, tree: ast.Module, classes: dict[str, _ErrorClass]) -> None:
        self.path = path
        self.tree = tree
        self.classes = classes
        self.parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        self.constants = {
            target.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            for target in node.targets
            if isinstance(target, ast.Name)
        }

    def class_of(self, node: ast.AST) -> _ErrorClass | None:
        """The error class whose body holds ``node`` (None: not inside one)."""
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, ast.ClassDef):
                return self.classes.get(node.name)
        return None

    def errors_made(self, call: ast.Call) -> list[_ErrorClass]:
        """The error classes ``call`` can make: ``Error(...)``, or a local name bound to one or to ``A if c else B``."""
        name = _name(call.func)
        if name in self.classes:
            return [self.classes[name]]
        function = self.function_of(call)
        if function is None or not isinstance(call.func, ast.Name):
            return []
        bound: list[_ErrorClass] = []
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                choices = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
                bound += [self.classes[n] for c in choices if (n := _name(c)) in self.classes]
        return bound

    def function_of(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                return node
        return None

    def resolve(self, expr: ast.expr, at: ast.AST) -> set[str] | None:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return {expr.value}
        if isinstance(expr, ast.Attribute) and expr.attr == "code":
            return set()  # ``problem.code``, ``exc.info.code``: a code made (and scanned) where that value was built
        if isinstance(expr, ast.IfExp):
            body, orelse = self.resolve(expr.body, at), self.resolve(expr.orelse, at)
            return None if body is None or orelse is None else body | orelse
        if isinstance(expr, ast.Name):
            function = self.function_of(at)
            if function is not None and expr.id in {a.arg for a in (*function.args.args, *function.args.kwonlyargs)}:
                return self._through_callers(function, expr.id)
            if expr.id in self.constants:
                return {self.constants[expr.id]}
        return None

    def _through_callers(self, function: ast.FunctionDef | ast.AsyncFunctionDef, parameter: str) -> set[str] | None:
        positional = [a.arg for a in function.args.args]
        bound = 1 if positional and positional[0] in ("self", "cls") else 0
        index = positional.index(parameter) - bound if parameter in positional else None
        arity = len(positional) - bound
        required = arity - len(function.args.defaults)
        codes: set[str] = set()
        callers = 0
        for node in ast.walk(self.tree):
            if not (isinstance(node, ast.Call) and _name(node.func) == function.name):
                continue
            if not required <= len(node.args) + len(node.keywords) <= arity + len(function.args.kwonlyargs):
                continue  # another function of the same name (``set.add`` beside a helper's ``add``)
            given = {kw.arg: kw.value for kw in node.keywords}
            argument = given.get(parameter)
            if argument is None and index is not None and index < len(node.args):
                argument = node.args[index]
            if argument is None:
                return None
            found = self.resolve(argument, node)
            if found is None:
                return None
            codes |= found
            callers += 1
        return codes if callers else None

    def warning_only(self, at: ast.AST) -> set[str]:
        """Codes that every caller of ``at``'s function passes with ``error=False`` (a config finding's severity)."""
        function = self.function_of(at)
        if function is None:
            return set()
        severities: dict[str, set[bool]] = defaultdict(set)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and _name(node.func) == function.name and node.args:
                error = next((kw.value for kw in node.keywords if kw.arg == "error"), None)
                code = node.args[0]
                if isinstance(code, ast.Constant) and isinstance(error, ast.Constant):
                    severities[str(code.value)].add(bool(error.value))
        return {code for code, errors in severities.items() if errors == {False}}


def scan() -> tuple[dict[str, set[str]], list[str]]:
    """code -> the kinds of site that make it (error categories, problem, validation, warning); unresolved sites."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in SOURCES}
    classes = _error_classes(trees)
    found: dict[str, set[str]] = defaultdict(set)
    unresolved: list[str] = []
    for path, tree in trees.items():
        module = _Module(path, tree, classes)
        where = path.relative_to(ROOT / "packages").as_posix()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _name(node.func)
            made = module.errors_made(node)
            expr = next((kw.value for kw in node.keywords if kw.arg == "code"), None)
            if name == "PydanticCustomError" and node.args:
                expr = node.args[0]
            if expr is None:
                for code, category in _default_made(module, node, made):
                    found[code].add(category)
                continue
            kinds = {c.category.value for c in made} if made else {CARRIERS.get(name or "", PROBLEM)}
            codes = module.resolve(expr, node)
            if codes is None:
                key = (where, ast.unparse(expr))
                if key not in DYNAMIC:
                    unresolved.append(f"{where}:{node.lineno}: code={ast.unparse(expr)}")
                    continue
                codes = set(DYNAMIC[key])
            warned = module.warning_only(node) if name == "ConfigFinding" else set()
            for code in codes:
                found[code].update({WARNING} if code in warned else kinds)
    return found, unresolved


@functools.cache
def _kinds() -> dict[str, set[str]]:
    found, unresolved = scan()
    assert not unresolved, (
        "codes this test cannot resolve to literals; write the code as a literal, or list the site in DYNAMIC with "
        "the codes it can produce:\n  " + "\n  ".join(unresolved)
    )
    return found


def _raised() -> set[str]:
    return {code for code, kinds in _kinds().items() if kinds - {WARNING}}


def test_every_code_the_sources_raise_is_in_the_catalogue() -> None:
    missing = sorted(_raised() - ERROR_CODES.keys())
    assert not missing, f"add these codes to contracts/_error_codes.py (and the troubleshooting page): {missing}"


def test_the_catalogue_has_no_dead_entries() -> None:
    dead = sorted(ERROR_CODES.keys() - _raised())
    assert not dead, f"no source raises these catalogued codes; remove them from contracts/_error_codes.py: {dead}"


def test_the_warnings_are_exactly_the_codes_only_ever_warned() -> None:
    warned = {code for code, kinds in _kinds().items() if WARNING in kinds}
    assert warned == WARNING_CODES, (
        f"WARNING_CODES: add {sorted(warned - WARNING_CODES)}, remove {sorted(WARNING_CODES - warned)}"
    )


def test_each_error_is_catalogued_with_the_exit_code_it_is_raised_with() -> None:
    wrong = []
    for code, kinds in sorted(_kinds().items()):
        categories = {ErrorCategory(kind) for kind in kinds if kind in {c.value for c in ErrorCategory}}
        if code in ERROR_CODES and not categories <= ERROR_CODES[code]:
            wrong.append(
                f"{code}: raised as {sorted(c.value for c in categories)}, catalogued {sorted(c.value for c in ERROR_CODES[code])}"
            )
    assert not wrong, "fix the categories in contracts/_error_codes.py:\n  " + "\n  ".join(wrong)


def test_the_scanner_resolves_helpers_constants_and_conditionals() -> None:
    found = _kinds()
    assert found["reserved_sbatch_option"] == {PROBLEM}  # self._problem("reserved_sbatch_option", ...) in a method
    # Problem(code=OVER_LIMIT), a module constant; the contracts' record and axis caps raise it as a validation error
    assert found["over_limit"] == {PROBLEM, VALIDATION}
    assert {"unsquashfs_failed", "unsquashfs_timed_out"} <= found.keys()  # code="a" if timed_out else "b"
    assert found["cluster_gpus"] == {PROBLEM}  # DYNAMIC
    assert found["default_model_configs"] == {WARNING}  # a config finding every caller reports with error=False
    assert found["custom_column"] == {PROBLEM}  # ... and one reported with error=True
    assert "probe_gpus_per_node_not_run" in found
    assert "probe_account_not_run" not in found  # the probe never records the account check as not run
    assert found["probe_failed"] == {ErrorCategory.CHECK_FAILED.value}  # ProbeFailedError's default, via super()
    assert "not_found" not in found  # every NotFoundError names its own code: the class default is never printed


def test_a_computed_code_nobody_listed_is_reported(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text(
        "def _problem(code):\n    return Problem(code=code)\n\n"
        "def check(kind):\n    _problem('fixed_code')\n    _problem(f'computed_{kind}')\n",
        encoding="utf-8",
    )
    module = _Module(source, ast.parse(source.read_text(encoding="utf-8")), {})
    call = next(n for n in ast.walk(module.tree) if isinstance(n, ast.Call) and _name(n.func) == "Problem")
    assert module.resolve(call.keywords[0].value, call) is None
    source.write_text(
        "def _problem(code):\n    return Problem(code=code)\n\ndef check():\n    _problem('a')\n    _problem('b')\n"
    )
    module = _Module(source, ast.parse(source.read_text(encoding="utf-8")), {})
    call = next(n for n in ast.walk(module.tree) if isinstance(n, ast.Call) and _name(n.func) == "Problem")
    assert module.resolve(call.keywords[0].value, call) == {"a", "b"}


def test_a_value_of_the_wrong_type_is_a_problem_with_pydantics_own_code() -> None:
    """The passthrough DYNAMIC lists for planner/_validation.py: such a code is one of VALIDATION_TYPE_CODES."""
    text = (ROOT / "fern" / "examples" / "run.yaml").read_text(encoding="utf-8")
    assert "records: 10000" in text
    with pytest.raises(InvalidInputError) as caught:
        load_run(text.replace("records: 10000", 'records: "8"'), file="run.yaml")
    codes = [(p.code, p.key_path) for p in caught.value.problems]
    assert codes == [("int_type", ("records",))]
    assert "int_type" in VALIDATION_TYPE_CODES
