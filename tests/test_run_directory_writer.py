"""The store is the one writer of the run directory: nothing outside ``runtime/store/`` writes it or spells its layout.

STYLE 11c and issue 25. Scanned (by :mod:`ast`): every ``.py`` file under ``packages/*/src`` but the store's own
``runtime/store/``, every one under ``benchmarks/``, and the python scripts and the python heredocs of the bash
scripts in ``scripts/``. ``runtime/testing/`` is source and is scanned: its fixtures build run directories through
the store's verbs too. Not scanned: the test suites (``packages/*/tests``, ``tests/``, ``wheel_tests/``), which test
the store's primitives themselves and forge the torn, corrupt and stray files the readers must survive; forging
that several suites share belongs in ``runtime/testing`` (scanned), not in a writer of their own.

A module is a finding, one ``file:line: what`` per site, where it

1. **names a layout constant**: a module-level constant of a store module (``UPPER_CASE``, a string or an integer)
   that the store's own path arithmetic uses: an operand of ``/``, an argument of ``joinpath``, or a part of an
   f-string holding a ``/`` (``ATTEMPTS_DIR``, ``OUTPUT_DIR``, ``MANIFEST``, ``STATUS_RECORD``, ``PART_WIDTH``,
   ``CHILDREN_DIR``, ``MERGE_JOBS_DIR``...; read from the store's source, so the list cannot drift). Importing,
   re-exporting, reading (``store.OUTPUT_DIR``) and copying it (``OUTPUT_DIR = "output"``) all name it; a leading
   ``_`` does not hide it;
2. **names a record writer**: one of :data:`RECORD_WRITERS`, the store's low-level record I/O (a call, an import, a
   reference passed along), whatever the path: outside the store, records are written by its verbs (claim an
   attempt, publish a part, append an observation...);
3. **writes a layout path**: opens, creates, changes or removes a file (``open``/``Path.open`` with a mode holding
   ``w``, ``a``, ``x`` or ``+``; ``os.open`` unless its flags are visibly ``O_RDONLY``-only; ``write_text``,
   ``write_bytes``, ``touch``, ``mkdir``, ``rename``, ``replace``, ``unlink``, ``rmdir``, ``symlink_to``,
   ``hardlink_to`` on a path; ``os.mkdir``/``makedirs``/``rename``/``replace``/``link``/``symlink``/``remove``/
   ``unlink``/``rmdir``; ``shutil.rmtree``/``move`` and the destination of ``shutil.copy*``; our generic durable
   writers, :data:`PATH_WRITERS`) whose path expression is *layout-derived*, that is, it contains
   - a member of a store ``*Layout`` class (``run_dir``, ``shard_dir``, ``status``, ``children_dir``...) read from a
     layout object: a name or attribute whose name contains ``layout`` (``layout``, ``self.layout``,
     ``context.layout``), one annotated ``RunLayout``/``BenchmarkLayout``, one assigned a layout, or a layout's
     constructor call (``RunLayout.of(...)``);
   - a name or attribute spelled like one of the layout's directories (``run_dir``, ``attempt_dir``,
     ``merge_dir``...: a parameter so named is taken to hold one);
   - a call of a store function returning a ``Path`` (``merge_jobs_dir(layout)``);
   - a layout constant (rule 1);
   - a name assigned a layout-derived value anywhere in the same function or an enclosing one, or an attribute
     (``self.dir``) assigned one anywhere in the module. Flow-insensitive on purpose: simple to state, and a name
     that holds a run path once is taken to hold one.

Limits, accepted: a path built from a string literal (``root / "runs"``), or handed to a helper under a plain name
(``supervisor._replicas.spawn(log=...)``) or on a command line (the container launcher ``runtime/_launch.py``) is not
traced; rules 1 and 2 catch the usual ways such a path or record is made. The workspace's other stores
(:data:`OTHER_STORES`: the image registry and the facts cache, each the one writer of its own directory) use the
store's record I/O for their own records: rule 2 is waived for them, never rules 1 and 3.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STORE_DIR = ROOT / "packages/data-designer-slurm-runtime/src/data_designer/slurm/runtime/store"

RECORD_WRITERS = frozenset(
    {
        "write_record_once",
        "replace_record",
        "append_record",
        "publish_bytes_once",
        "publish_bytes_replace",
        "encode_record",
    }
)
"""The store's record I/O: writing a record (or its bytes) to a path the caller picks, or encoding one to write."""
OTHER_STORES = {
    "packages/data-designer-slurm-runtime/src/data_designer/slurm/runtime/images/_registry.py": "the image registry",
    "packages/data-designer-slurm-runtime/src/data_designer/slurm/runtime/images/_digest.py": "the digest cache",
    "packages/data-designer-slurm-runtime/src/data_designer/slurm/runtime/images/_import.py": "an import's script",
    "packages/data-designer-slurm-runtime/src/data_designer/slurm/runtime/facts/_cache.py": "the facts cache",
}
"""The one writers of the workspace's other kinds of state (``images/``, ``facts/``: not the run directory), which
keep their records with the store's record I/O: rule 2 does not apply to them; rules 1 and 3 do."""
PATH_WRITERS = frozenset({"make_directories", "write_text_atomic", "write_new_file"})
"""Our generic durable writers (the store's or the lowest layer's), also used for files that are not the run
directory's (profiles, caches, outputs a user names): a finding only on a layout path."""

_CONSTANT_NAME = re.compile(r"_*[A-Z][A-Z0-9_]*")
_WRITE_METHODS = frozenset(
    {"write_text", "write_bytes", "touch", "mkdir", "rename", "replace", "unlink", "rmdir", "symlink_to", "hardlink_to"}
)
_TWO_PATH_METHODS = frozenset({"rename", "replace"})
# os and shutil functions: which positional arguments are paths being written.
_MODULE_WRITERS: dict[str, dict[str, tuple[int, ...]]] = {
    "os": {
        "mkdir": (0,),
        "makedirs": (0,),
        "remove": (0,),
        "unlink": (0,),
        "rmdir": (0,),
        "removedirs": (0,),
        "truncate": (0,),
        "rename": (0, 1),
        "renames": (0, 1),
        "replace": (0, 1),
        "link": (1,),
        "symlink": (1,),
    },
    "shutil": {
        "rmtree": (0,),
        "move": (0, 1),
        "copy": (1,),
        "copy2": (1,),
        "copyfile": (1,),
        "copytree": (1,),
    },
}
_MODULES = frozenset({"os", "shutil", "io"})
_WRITE_FLAGS = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC", "O_EXCL"})
_LAYOUT_CLASSES = frozenset({"RunLayout", "BenchmarkLayout"})


def normalized(name: str) -> str:
    """A name as the rules compare it: without leading underscores (a constant made private is the same one)."""
    return name.lstrip("_")


@dataclass(frozen=True)
class StoreFacts:
    """What the store's source defines: the layout constants, the layout classes' members, its path functions."""

    constants: frozenset[str]
    members: frozenset[str]
    path_functions: frozenset[str]
    functions: frozenset[str] = frozenset()

    @property
    def directories(self) -> frozenset[str]:
        """The layout's directory members (``run_dir``, ``attempt_dir``...): a name spelled so holds one of them."""
        return frozenset(member for member in self.members if member.endswith("_dir"))


def _path_expressions(tree: ast.AST) -> Iterator[ast.AST]:
    """The sub-expressions of ``tree`` that build paths: ``/`` operands, ``joinpath`` arguments, f-strings with ``/``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            yield node.left
            yield node.right
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "joinpath":
            yield from node.args
        elif isinstance(node, ast.JoinedStr) and any(
            isinstance(part, ast.Constant) and "/" in str(part.value) for part in node.values
        ):
            yield node


def read_store(sources: Iterable[str]) -> StoreFacts:
    """The layout constants, layout members and path functions that the store's module ``sources`` define."""
    trees = [ast.parse(source) for source in sources]
    defined: set[str] = set()
    used: set[str] = set()
    members: set[str] = set()
    path_functions: set[str] = set()
    functions: set[str] = set()
    for tree in trees:
        for node in tree.body:
            target, value = _assignment(node)
            if (
                target is not None
                and _CONSTANT_NAME.fullmatch(target)
                and isinstance(value, ast.Constant)
                and type(value.value) in (str, int)
            ):
                defined.add(target)
            elif isinstance(node, ast.FunctionDef):
                functions.add(node.name)
                returns = "" if node.returns is None else ast.unparse(node.returns).strip("'\"")
                if not node.name.startswith("_") and returns == "Path":
                    path_functions.add(node.name)
            elif isinstance(node, ast.ClassDef) and node.name.endswith("Layout"):
                members.update(_members(node))
        for expression in _path_expressions(tree):
            used.update(name.id for name in ast.walk(expression) if isinstance(name, ast.Name))
    constants = frozenset(normalized(name) for name in defined & used)
    return StoreFacts(constants, frozenset(members), frozenset(path_functions), frozenset(functions))


def _assignment(node: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    return None, None


def _members(node: ast.ClassDef) -> Iterator[str]:
    """The public methods and properties of a layout class (not its fields, classmethods or staticmethods)."""
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
            decorators = {ast.unparse(decorator) for decorator in item.decorator_list}
            if not decorators & {"classmethod", "staticmethod"}:
                yield item.name


def store_sources() -> list[str]:
    return [path.read_text(encoding="utf-8") for path in sorted(STORE_DIR.rglob("*.py"))]


STORE = read_store(store_sources())


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


@dataclass
class _Scope:
    """What is known layout-derived in one function (or the module), by name: paths and layout objects. A function
    sees its enclosing functions' names too (closures)."""

    parent: _Scope | None = None
    paths: set[str] = field(default_factory=set)
    layouts: set[str] = field(default_factory=set)

    def has_path(self, key: str) -> bool:
        return key in self.paths or (self.parent is not None and self.parent.has_path(key))

    def has_layout(self, key: str) -> bool:
        return key in self.layouts or (self.parent is not None and self.parent.has_layout(key))

    def size(self) -> int:
        return len(self.paths) + len(self.layouts)


def _key(node: ast.AST) -> str | None:
    """``name`` or ``name.attr.attr`` for a name or an attribute chain on a name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _key(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _terminal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _annotated_layout(annotation: ast.expr | None) -> bool:
    return annotation is not None and any(name in ast.unparse(annotation) for name in _LAYOUT_CLASSES)


class _Module:
    """The findings of one parsed module, with ``facts`` about the store."""

    def __init__(self, tree: ast.Module, display: str, facts: StoreFacts, line_offset: int = 0) -> None:
        self.tree = tree
        self.display = display
        self.facts = facts
        self.offset = line_offset
        self.attributes = _Scope()  # ``self.x`` and other attribute chains: module-wide
        self.found: set[Finding] = set()
        self.aliases: dict[str, str] = {}  # bare names imported from os/shutil -> "os.name"
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in _MODULE_WRITERS and node.level == 0:
                for alias in node.names:
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def add(self, node: ast.AST, what: str) -> None:
        self.found.add(Finding(self.display, getattr(node, "lineno", 0) + self.offset, what))

    # --- what is layout-derived

    def is_layout(self, node: ast.AST, scope: _Scope) -> bool:
        terminal = _terminal(node)
        if terminal is not None and "layout" in terminal.lower():
            return True
        key = _key(node)
        if key is not None and (scope.has_layout(key) or self.attributes.has_layout(key)):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if _terminal(func) in _LAYOUT_CLASSES:
                return True
            return isinstance(func, ast.Attribute) and func.attr == "of" and _terminal(func.value) in _LAYOUT_CLASSES
        return False

    def is_constant(self, node: ast.AST) -> bool:
        name = _terminal(node)
        return name is not None and normalized(name) in self.facts.constants

    def derived(self, node: ast.AST | None, scope: _Scope) -> bool:
        if node is None:
            return False
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and sub.attr in self.facts.members and self.is_layout(sub.value, scope):
                return True
            if isinstance(sub, ast.Call) and _terminal(sub.func) in self.facts.path_functions:
                return True
            if isinstance(sub, ast.Name | ast.Attribute) and self.is_constant(sub):
                return True
            if isinstance(sub, ast.Name | ast.Attribute) and _terminal(sub) in self.facts.directories:
                return True
            key = _key(sub)
            if key is not None and (scope.has_path(key) or self.attributes.has_path(key)):
                return True
        return False

    # --- taint: which names and attributes hold layout paths or layout objects

    def bind(self, body: list[ast.stmt], scope: _Scope, arguments: ast.arguments | None) -> None:
        """Add to ``scope`` (and to the module's attributes) what the assignments of one function body make
        layout-derived; called again until nothing changes."""
        if arguments is not None:
            for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
                if _annotated_layout(argument.annotation):
                    scope.layouts.add(argument.arg)
        for targets, value in self._assignments(body):
            layout = self.is_layout(value, scope)
            if not (layout or self.derived(value, scope)):
                continue
            for key in filter(None, map(_key, targets)):
                into = self.attributes if "." in key else scope
                (into.layouts if layout else into.paths).add(key)

    def _assignments(self, body: list[ast.stmt]) -> Iterator[tuple[list[ast.expr], ast.expr]]:
        """(targets, value) of every assignment in ``body``, not looking into nested functions or classes."""
        stack: list[ast.AST] = list(body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                continue
            if isinstance(node, ast.Assign):
                yield [t for target in node.targets for t in _flatten(target)], node.value
            elif isinstance(node, ast.AnnAssign) and _annotated_layout(node.annotation):
                yield list(_flatten(node.target)), ast.Name(id="layout")  # stands for "a layout object"
            elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
                yield list(_flatten(node.target)), node.value
            elif isinstance(node, ast.NamedExpr):
                yield [node.target], node.value
            elif isinstance(node, ast.For | ast.AsyncFor):
                yield list(_flatten(node.target)), node.iter
            stack.extend(ast.iter_child_nodes(node))

    # --- the rules

    def scan(self) -> list[Finding]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    self._name(alias, alias.name, "imports")
            elif isinstance(node, ast.Name | ast.Attribute):
                self._name(node, _terminal(node) or "", "names")
        module = _Scope()
        scopes = [(self.tree.body, module, None), *self._functions(self.tree.body, module)]
        # an attribute assigned in one method counts in every method: bind all scopes until nothing changes
        while True:
            before = self.attributes.size() + sum(scope.size() for _, scope, _ in scopes)
            for body, scope, arguments in scopes:
                self.bind(body, scope, arguments)
            if self.attributes.size() + sum(scope.size() for _, scope, _ in scopes) == before:
                break
        for body, scope, _ in scopes:
            for call in self._calls(body):
                self._write(call, scope)
        return sorted(self.found)

    def _name(self, node: ast.AST, name: str, verb: str) -> None:
        if normalized(name) in self.facts.constants:
            self.add(node, f"{verb} layout constant {name}")
        elif normalized(name) in RECORD_WRITERS:
            self.add(node, f"{verb} record writer {name}")

    def _functions(
        self, body: list[ast.stmt], parent: _Scope
    ) -> Iterator[tuple[list[ast.stmt], _Scope, ast.arguments | None]]:
        """(body, scope, arguments) of every function below ``body``, each scope inside its enclosing one."""
        stack: list[tuple[ast.AST, _Scope]] = [(node, parent) for node in body]
        while stack:
            node, enclosing = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                scope = _Scope(enclosing)
                yield node.body, scope, node.args
                stack.extend((child, scope) for child in node.body)
            else:
                stack.extend((child, enclosing) for child in ast.iter_child_nodes(node))

    def _calls(self, body: list[ast.stmt]) -> Iterator[ast.Call]:
        stack: list[ast.AST] = list(body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if isinstance(node, ast.Call):
                yield node
            stack.extend(ast.iter_child_nodes(node))

    def _write(self, call: ast.Call, scope: _Scope) -> None:
        written = self._written(call)
        if written is not None and any(self.derived(path, scope) for path in written[1]):
            self.add(call, f"writes a layout path with {written[0]}")

    def _qualified(self, func: ast.expr) -> str | None:
        """``os.name``/``shutil.name``/``io.name`` for a call of one of those modules' functions, else None."""
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in _MODULES:
            return f"{func.value.id}.{func.attr}"
        return self.aliases.get(func.id) if isinstance(func, ast.Name) else None

    def _written(self, call: ast.Call) -> tuple[str, list[ast.expr]] | None:
        """(what, the path expressions it writes) for a call that writes files, else None."""
        func = call.func
        qualified = self._qualified(func)
        name = _terminal(func)
        if qualified == "io.open" or (isinstance(func, ast.Name) and func.id == "open"):
            return ("open", _present(_argument(call, 0, "file"))) if _write_mode(_argument(call, 1, "mode")) else None
        if qualified == "os.open":
            return (
                ("os.open", _present(_argument(call, 0, "path"))) if _write_flags(_argument(call, 1, "flags")) else None
            )
        if qualified is not None:
            module, _, function = qualified.partition(".")
            positions = _MODULE_WRITERS.get(module, {}).get(function)
            return None if positions is None else (qualified, [call.args[i] for i in positions if i < len(call.args)])
        if name is not None and normalized(name) in PATH_WRITERS:
            return name, _present(_argument(call, 0, "path") or _argument(call, 0, "directory"))
        if not isinstance(func, ast.Attribute):
            return None
        if func.attr == "open":
            return ("Path.open", [func.value]) if _write_mode(_argument(call, 0, "mode")) else None
        if func.attr in _WRITE_METHODS:
            extra = _present(_argument(call, 0, "target")) if func.attr in _TWO_PATH_METHODS else []
            return f"Path.{func.attr}", [func.value, *extra]
        return None


def _flatten(target: ast.expr) -> Iterator[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _flatten(element)
    elif isinstance(target, ast.Starred):
        yield from _flatten(target.value)
    else:
        yield target


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if position < len(call.args) and not any(isinstance(arg, ast.Starred) for arg in call.args[: position + 1]):
        return call.args[position]
    return next((item.value for item in call.keywords if item.arg == keyword), None)


def _present(node: ast.expr | None) -> list[ast.expr]:
    return [] if node is None else [node]


def _write_mode(mode: ast.expr | None) -> bool:
    """Whether an ``open`` mode writes: a literal holding w, a, x or +; anything not a literal is taken to write."""
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(letter in mode.value for letter in "wax+")
    return True


def _write_flags(flags: ast.expr | None) -> bool:
    """Whether ``os.open`` flags write: a write flag is named, or no ``O_RDONLY`` is (flags built elsewhere)."""
    if flags is None:
        return False
    names = {_terminal(node) for node in ast.walk(flags)}
    return bool(names & _WRITE_FLAGS) or "O_RDONLY" not in names


def scan_source(source: str, display: str, facts: StoreFacts = STORE, line_offset: int = 0) -> list[Finding]:
    """The findings of one python ``source``, shown as ``display`` (lines moved down by ``line_offset``)."""
    return _Module(ast.parse(source), display, facts, line_offset).scan()


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")


def python_of(path: Path) -> Iterator[tuple[str, int]]:
    """(python source, line offset) in a file: the whole of a python file or script, a bash script's heredocs."""
    text = path.read_text(encoding="utf-8", errors="replace")
    first = text.split("\n", 1)[0]
    if path.suffix == ".py" or (first.startswith("#!") and "python" in first):
        yield text, 0
        return
    if not (first.startswith("#!") and ("bash" in first or first.endswith("sh"))):
        return
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        match = _HEREDOC.search(lines[index])
        end = None
        if match:
            end = next((i for i in range(index + 1, len(lines)) if lines[i].strip() == match.group(2)), None)
        if match is None or end is None:
            index += 1
            continue
        yield "\n".join(lines[index + 1 : end]), index + 1
        index = end + 1


def scanned_files() -> list[Path]:
    files = [
        path
        for path in sorted(ROOT.glob("packages/*/src/**/*.py"))
        if STORE_DIR not in path.parents and "__pycache__" not in path.parts
    ]
    files += sorted(path for path in (ROOT / "scripts").iterdir() if path.is_file())
    files += sorted(path for path in (ROOT / "benchmarks").rglob("*.py") if "__pycache__" not in path.parts)
    return files


def scan_tree() -> list[Finding]:
    findings: list[Finding] = []
    for path in scanned_files():
        display = path.relative_to(ROOT).as_posix()
        for source, offset in python_of(path):
            try:
                found = scan_source(source, display, line_offset=offset)
                if display in OTHER_STORES:
                    found = [finding for finding in found if " record writer " not in finding.what]
                findings.extend(found)
            except SyntaxError:  # a heredoc that is not python
                if offset == 0:
                    raise
    return findings


def test_nothing_outside_the_store_writes_the_run_directory_or_names_its_layout() -> None:
    findings = scan_tree()
    listing = "\n".join(str(finding) for finding in findings)
    assert not findings, (
        f"{len(findings)} site(s) outside runtime/store/ write the run directory or spell its layout; write through "
        f"the store's verbs (runtime.store) instead:\n{listing}"
    )


# --- the scanner itself


def scanned(source: str) -> list[str]:
    return [f"{finding.line}: {finding.what}" for finding in scan_source(source, "m.py")]


def test_the_store_s_layout_is_read_from_its_source() -> None:
    assert {"ATTEMPTS_DIR", "OUTPUT_DIR", "MANIFEST", "STATUS_RECORD", "CHILDREN_DIR", "MERGE_JOBS_DIR"} <= (
        STORE.constants
    )
    assert "PART_WIDTH" in STORE.constants  # spells part file names
    assert not {"SHARD_WIDTH", "RUN_ID_PATTERN", "OPERATION"} & STORE.constants  # used, but not in a path expression
    assert {"run_dir", "shard_dir", "status", "output_part", "directory", "children_dir", "binding"} <= STORE.members
    assert not {"of", "root", "run_id"} & STORE.members
    assert {"merge_jobs_dir", "merge_job_error_file"} <= STORE.path_functions


def test_every_other_store_exists() -> None:
    assert [name for name in OTHER_STORES if not (ROOT / name).is_file()] == []


def test_every_writer_named_is_one_our_source_defines() -> None:
    assert {normalized(name) for name in STORE.functions} >= RECORD_WRITERS, "update RECORD_WRITERS to the store's"
    defined = {
        normalized(node.name)
        for path in ROOT.glob("packages/*/src/**/*.py")
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef)
    }
    assert defined >= PATH_WRITERS, "update PATH_WRITERS to the names of our durable writers"


def test_derivation_takes_constants_used_in_paths_only() -> None:
    store = (
        'A_DIR = "a"\nB_RECORD = "b.json"\n_C_FILE = "c"\nWIDTH = 4\nUNUSED = "u"\n_OPERATION = "x"\n'
        "def f(root):\n    return root / A_DIR / f'{WIDTH:04d}' / B_RECORD\n"
        "def g(root):\n    return f'{root}/{_C_FILE}', _OPERATION, UNUSED\n"
        "class RunLayout:\n    root: str\n    @property\n    def run_dir(self): ...\n    def part(self, n): ...\n"
        "    @classmethod\n    def of(cls): ...\n    def _hidden(self): ...\n"
        "def where(layout) -> Path: ...\n"
    )
    facts = read_store([store])
    assert facts.constants == {"A_DIR", "B_RECORD", "C_FILE", "WIDTH"}
    assert facts.members == {"run_dir", "part"}
    assert facts.path_functions == {"where"}


@pytest.mark.parametrize(
    ("source", "found"),
    [
        # rule 1: a layout constant, named in any way
        (
            "from data_designer.slurm.runtime.store import OUTPUT_DIR\nx = OUTPUT_DIR\n",
            ["1: imports layout constant OUTPUT_DIR", "2: names layout constant OUTPUT_DIR"],
        ),
        (
            "from data_designer.slurm.runtime import store\nx = store.STATUS_RECORD\n",
            ["2: names layout constant STATUS_RECORD"],
        ),
        ('MANIFEST = "manifest.json"\n', ["1: names layout constant MANIFEST"]),
        ('_ATTEMPTS_DIR = "attempts"\n', ["1: names layout constant _ATTEMPTS_DIR"]),
        ("name = f'part-{n:0{PART_WIDTH}d}.parquet'\n", ["1: names layout constant PART_WIDTH"]),
        # rule 2: a record writer, called or passed along
        (
            "from data_designer.slurm.runtime.store import write_record_once\nwrite_record_once(p, S, r)\n",
            ["1: imports record writer write_record_once", "2: names record writer write_record_once"],
        ),
        ("store.append_record(d, S, r)\n", ["1: names record writer append_record"]),
        ("f = functools.partial(publish_bytes_once, path)\n", ["1: names record writer publish_bytes_once"]),
        # the store's verbs and readers are what code outside it uses
        ("from data_designer.slurm.runtime.store import claim, read_run\nclaim(p, o)\nread_run(layout)\n", []),
        ("store.append_observation(layout, record)\nstore.publish_part(layout, 0, 1, 0, data)\n", []),
    ],
)
def test_names_are_found(source: str, found: list[str]) -> None:
    assert scanned(source) == found


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("layout.run_dir.mkdir(parents=True)\n", "Path.mkdir"),
        ("(layout.shard_dir(0) / 'x').write_text('')\n", "Path.write_text"),
        ("self.layout.status(0, 1).write_bytes(b'')\n", "Path.write_bytes"),
        ("open(layout.status(0, 1), 'w')\n", "open"),
        ("with open(str(context.layout.claim(0, 1)), mode='ab') as f:\n    pass\n", "open"),
        ("layout.log_file(0, 1, 'client').open('a')\n", "Path.open"),
        ("os.open(layout.claim(0, 1), os.O_WRONLY | os.O_CREAT)\n", "os.open"),
        ("os.open(layout.claim(0, 1), flags)\n", "os.open"),
        ("os.makedirs(f'{layout.run_dir}/x', exist_ok=True)\n", "os.makedirs"),
        ("os.rename(layout.run_dir, hidden)\n", "os.rename"),
        ("from os import replace\nreplace(tmp, layout.plan_record)\n", "os.replace"),
        ("shutil.rmtree(layout.run_dir, ignore_errors=True)\n", "shutil.rmtree"),
        ("shutil.copyfile(source, layout.input_file('run.yaml'))\n", "shutil.copyfile"),
        ("make_directories(layout.run_dir, modes)\n", "make_directories"),
        ("planner.write_new_file(layout.claim(0, 1), data, 0o600)\n", "write_new_file"),
        (
            "store.write_text_atomic(bench_layout.children_dir / 'x', t, overwrite=False, operation='o')\n",
            "write_text_atomic",
        ),
        ("merge_jobs_dir(layout).mkdir()\n", "Path.mkdir"),
        ("def f(attempt_dir: Path) -> None:\n    (attempt_dir / 'home').mkdir()\n", "Path.mkdir"),
        ("def f(run_dir: Path) -> None:\n    (run_dir / 'observations' / '0002.json').unlink()\n", "Path.unlink"),
        ("run = RunLayout.of(root, run_id)\nrun.merge_dir.mkdir()\n", "Path.mkdir"),
        ("def f(run: RunLayout) -> None:\n    run.merge_dir.mkdir()\n", "Path.mkdir"),
        ("def f(run: 'BenchmarkLayout | None') -> None:\n    run.children_dir.mkdir()\n", "Path.mkdir"),
        (
            "def f() -> None:\n    path = layout.attempt_dir(0, 1)\n    target = path / 'x'\n    target.touch()\n",
            "Path.touch",
        ),
        ("def f() -> None:\n    for shard in layout.shards_dir.iterdir():\n        shard.rmdir()\n", "Path.rmdir"),
        ("def f() -> None:\n    path = layout.run_dir\n    def g() -> None:\n        path.unlink()\n", "Path.unlink"),
        (
            "class W:\n    def __init__(self, w):\n        self.dir = f'{w.shards_dir}/{ATTEMPTS_DIR}'\n"
            "    def make(self):\n        os.mkdir(self.dir + '/x')\n",
            "os.mkdir",
        ),
    ],
)
def test_a_write_to_a_layout_path_is_found(source: str, what: str) -> None:
    writes = [line for line in scanned(source) if "writes a layout path" in line]
    assert len(writes) == 1, scanned(source)
    assert writes[0].endswith(f"writes a layout path with {what}")


@pytest.mark.parametrize(
    "source",
    [
        "open(layout.status(0, 1))\n",  # a read
        "open(layout.status(0, 1), 'rb')\n",
        "layout.status(0, 1).open()\n",
        "os.open(layout.claim(0, 1), os.O_RDONLY | os.O_NONBLOCK)\n",
        "layout.run_dir.read_text()\n",
        "Path('out').write_text('x')\n",  # not a layout path
        "def f(out: Path) -> None:\n    (out / 'x').mkdir()\n",
        "write_text_atomic(profile_path, text, overwrite=force, operation='profile.init')\n",
        "make_directories(cache_dir, modes)\n",
        "opener.open(request, timeout=5)\n",  # urllib: not a path at all
        "results.status.write_text('x')\n",  # a member's name on something that is not a layout
        "shutil.copyfile(layout.output_part(0, 1, 0), elsewhere)\n",  # copying out of a run: a read of it
        # a name holding a run path in one function says nothing about the same name in another
        "def a() -> None:\n    path = layout.run_dir\n\ndef b(path: Path) -> None:\n    path.write_text('')\n",
    ],
)
def test_what_does_not_write_a_layout_path_is_not_found(source: str) -> None:
    assert scanned(source) == []


def test_a_bash_script_s_python_heredoc_is_scanned(tmp_path: Path) -> None:
    script = tmp_path / "demo"
    script.write_text(
        "#!/usr/bin/env bash\nset -e\npython - <<'PY'\nimport os\nos.mkdir(layout.run_dir)\nPY\necho done\n",
        encoding="utf-8",
    )
    [(source, offset)] = list(python_of(script))
    assert [str(finding) for finding in scan_source(source, "demo", line_offset=offset)] == [
        "demo:5: writes a layout path with os.mkdir"
    ]


def test_every_finding_is_listed_with_its_file_and_line() -> None:
    source = "import os\nos.mkdir(layout.run_dir)\nx = OUTPUT_DIR\nwrite_record_once(p, S, r)\n"
    assert [str(finding) for finding in scan_source(source, "pkg/m.py")] == [
        "pkg/m.py:2: writes a layout path with os.mkdir",
        "pkg/m.py:3: names layout constant OUTPUT_DIR",
        "pkg/m.py:4: names record writer write_record_once",
    ]
