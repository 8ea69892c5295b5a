"""The import graph of the source tree has no circles, between modules or between rooms (issue 25).

Every import counts, function-local and ``TYPE_CHECKING`` ones too: a circle hidden inside a function is still a
circle. A *room* is a subpackage (``runtime.store``, ``services.runs``) or a package's root with its private
modules; a package root and its own subpackages are one family (``contracts`` and ``contracts.records`` share the
root's private ``_types``), so only circles between sibling rooms, or across packages, fail.
"""

from __future__ import annotations

import ast
import collections
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICES = ROOT / "packages" / "data-designer-slurm" / "src" / "data_designer" / "slurm" / "services"
MAX_SERVICE_ROOMS = 8


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for src in sorted((ROOT / "packages").glob("*/src")):
        for path in sorted(src.rglob("*.py")):
            parts = path.relative_to(src).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(path: Path, package: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def module_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = {target for target in _imported(path, package) if target in modules and target != name}
    return graph


def room(module: str) -> str:
    """``data_designer.slurm.<package>[.<subpackage>]``: where a module lives (private root modules: the root)."""
    parts = module.split(".")
    return ".".join(parts[:4]) if len(parts) > 3 and not parts[3].startswith("_") else ".".join(parts[:3])


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _family(a: str, b: str) -> bool:
    return a.startswith(b + ".") or b.startswith(a + ".")


def test_no_module_imports_in_a_circle() -> None:
    assert cycles(module_graph()) == []


def test_no_rooms_import_in_a_circle() -> None:
    rooms: dict[str, set[str]] = collections.defaultdict(set)
    for source, targets in module_graph().items():
        for target in targets:
            a, b = room(source), room(target)
            if a != b and not _family(a, b):
                rooms[a].add(b)
    assert cycles(dict(rooms)) == []


def test_the_services_have_at_most_eight_rooms_and_no_loose_modules() -> None:
    rooms = sorted(path.name for path in SERVICES.iterdir() if (path / "__init__.py").is_file())
    loose = sorted(path.name for path in SERVICES.glob("*.py") if path.name != "__init__.py")
    assert len(rooms) <= MAX_SERVICE_ROOMS, rooms
    assert loose == []


def test_the_cycle_finder_finds_a_circle_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_room_names_the_subpackage_or_the_root() -> None:
    runtime = "data_designer.slurm.runtime"
    assert room(f"{runtime}.store.{'_layout'}") == f"{runtime}.store"
    assert room(f"{runtime}.{'_launch'}") == runtime
    assert room("data_designer.slurm.services.runs") == "data_designer.slurm.services.runs"
