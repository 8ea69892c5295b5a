"""Strict YAML/JSON documents: duplicate keys rejected, every key path mapped to its line.

YAML is read with YAML 1.2-like scalar rules (``yes``/``no``/``on``/``off`` stay strings,
``01:30:00`` is a string, not a sexagesimal integer, timestamps stay strings) so that what the
user wrote is what the contracts see. JSON is parsed by the standard library (duplicates
rejected) and mapped to lines through the YAML composer, since JSON is valid YAML flow syntax.

A document holds at most ``MAX_DOCUMENT_NODES`` nodes (every scalar, list, mapping, key and item counts one):
YAML stops composing at the first node past the cap, JSON is counted after the standard library read it and before
it is composed again, so a dense file under the size cap (a million list items, 250,000 keys) is refused in about
the time the cap's worth of nodes takes to read, never composed or validated whole.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import yaml

from data_designer.slurm.contracts import MAX_DOCUMENT_NODES, KeyPath, Problem, excerpt

DocumentFormat = Literal["yaml", "json"]


class _TooManyNodes(Exception):
    """Raised by the composer at the first node past its cap: where it was and the collection that held it."""

    def __init__(self, line: int | None, container: KeyPath) -> None:
        super().__init__(line, container)
        self.line = line
        self.container = container


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core scalar resolution, counting the nodes it composes (at most ``max_nodes``)."""

    def __init__(self, stream: str, max_nodes: int = MAX_DOCUMENT_NODES) -> None:
        super().__init__(stream)
        self.max_nodes = max_nodes
        self.nodes = 0
        self._keys: list[object] = []
        """The keys (or item indices) from the root to the node being composed (the root's is None)."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            try:
                line: int | None = self.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
            except yaml.YAMLError:
                line = None
            raise _TooManyNodes(line, tuple(_key(key) for key in self._keys[1:]))
        # 'index' is the key node of a mapping's value, the position of a list's item, None for a key itself.
        self._keys.append(index.value if isinstance(index, yaml.ScalarNode) else index)
        node = super().compose_node(parent, index)
        self._keys.pop()
        return node


def _key(key: object) -> str | int:
    return key if isinstance(key, str | int) else "?"  # '?': a complex key (a mapping or list used as a key)


_StrictLoader.yaml_implicit_resolvers = {}
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")
)
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)
# Keep '<<' recognisable so that merge keys are reported instead of read as an ordinary key.
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    # YAML 1.2 core: '09' is decimal 9 (PyYAML's YAML 1.1 constructor reads a leading 0 as octal and fails).
    value = str(loader.construct_scalar(node))
    return int(value, 0) if value.startswith(("0o", "0x")) else int(value, 10)


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)

_COLLECTION_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})
# PyYAML's constructors raise these (not YAMLError) on malformed explicitly tagged scalars ('!!int abc',
# '!!bool x', '!!timestamp x') and on integers beyond Python's digit limit.
_CONSTRUCT_ERRORS = (yaml.YAMLError, ValueError, TypeError, KeyError, AttributeError, OverflowError)


@dataclass(frozen=True)
class Document:
    """A parsed input file: plain data, the line of every key path, and problems found while reading."""

    file: str
    data: Any
    lines: Mapping[KeyPath, int] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    nodes: int = 0
    """Nodes read: every scalar, list, mapping, key and item (``MAX_DOCUMENT_NODES + 1`` when refused for them)."""

    def line_of(self, path: KeyPath, *, root: bool = True) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one (the document's root only with ``root``)."""
        for end in range(len(path), -1 if root else 0, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None

    def problem_at(self, path: KeyPath, *, code: str, message: str, hint: str | None) -> Problem:
        """A problem of this document at ``path`` (on the line of ``path`` or its nearest ancestor)."""
        return Problem(
            code=code, message=message, file=self.file, line=self.line_of(path), key_path=path or None, hint=hint
        )

    def under(self, prefix: KeyPath) -> Document:
        """The part of this document at ``prefix`` as a document of the same file, its keys' lines kept."""
        data: Any = self.data
        for part in prefix:
            data = data.get(part) if isinstance(data, dict) else None
        size = len(prefix)
        lines = {path[size:]: line for path, line in self.lines.items() if path[:size] == prefix}
        return Document(file=self.file, data=data, lines=lines)


def detect_format(file: str, text: str) -> DocumentFormat:
    """JSON for ``.json`` files, YAML for ``.yaml``/``.yml`` files, else JSON when the text starts with ``{``."""
    if file.endswith(".json"):
        return "json"
    if file.endswith((".yaml", ".yml")):
        return "yaml"
    return "json" if text.lstrip().startswith("{") else "yaml"


def parse_document(
    text: str, *, file: str, fmt: DocumentFormat | None = None, max_nodes: int = MAX_DOCUMENT_NODES
) -> Document:
    """Parse ``text`` strictly; syntax errors, duplicate keys and more than ``max_nodes`` nodes become problems,
    never exceptions."""
    fmt = fmt or detect_format(file, text)
    document = _parse_json(text, file, max_nodes) if fmt == "json" else _parse_yaml(text, file, max_nodes)
    surrogates = list(_surrogates(document, document.data, ()))
    if surrogates:
        document = replace(document, data=None, problems=(*document.problems, *surrogates))
    return document


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _surrogates(document: Document, value: Any, path: KeyPath) -> Iterator[Problem]:
    """Strings holding a lone surrogate (``"\\ud800"``): no UTF-8 text can hold them, so no plan or record could."""
    if isinstance(value, dict):
        for key, child in value.items():
            if _SURROGATE.search(key):
                yield _surrogate_problem(document, (*path, key))
            yield from _surrogates(document, child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _surrogates(document, child, (*path, index))
    elif isinstance(value, str) and _SURROGATE.search(value):
        yield _surrogate_problem(document, path)


def _surrogate_problem(document: Document, path: KeyPath) -> Problem:
    return document.problem_at(
        path,
        code="unsupported_value",
        message="the text holds a lone surrogate escape ('\\ud800'-'\\udfff'), which is not a character",
        hint="write the character itself, or a valid escape pair for characters beyond U+FFFF",
    )


def _too_many_nodes(file: str, max_nodes: int, line: int | None, container: KeyPath) -> Problem:
    where = "the top-level mapping or list" if not container else "this list or mapping"
    return Problem(
        code="over_limit",
        message=f"the file holds more than {max_nodes:,} values (keys, list items and scalars count one each), "
        f"above the limit of {max_nodes:,}; reading stopped in {where}",
        file=file,
        line=line,
        key_path=container or None,
        hint="shorten the longest lists and mappings: no real run, benchmark, profile or Data Designer config comes "
        "near the limit (a benchmark axis takes at most 5,000 values)",
    )


def _compose(text: str, max_nodes: int) -> tuple[yaml.Node | None, int]:
    """The node tree of ``text`` and its number of nodes; :class:`_TooManyNodes` past ``max_nodes``."""
    loader = _StrictLoader(text, max_nodes)
    try:
        return loader.get_single_node(), loader.nodes
    finally:
        loader.dispose()


def _parse_yaml(text: str, file: str, max_nodes: int) -> Document:
    try:
        node, nodes = _compose(text, max_nodes)
        builder = _Builder(file)
        data = builder.build(node, ()) if node is not None else None
    except _TooManyNodes as over:
        problem = _too_many_nodes(file, max_nodes, over.line, over.container)
        return Document(file=file, data=None, problems=(problem,), nodes=max_nodes + 1)
    except (yaml.YAMLError, RecursionError) as exc:
        return Document(file=file, data=None, problems=(_syntax_problem(exc, file, text),))
    return Document(file=file, data=data, lines=builder.lines, problems=tuple(builder.problems), nodes=nodes)


def _count_nodes(data: Any, max_nodes: int) -> tuple[int, KeyPath | None]:
    """The nodes of parsed JSON counted as the YAML composer counts them (a key and its value are two), in file
    order; stops at the first node past ``max_nodes`` and names the collection holding it (else None)."""
    count = 1
    keys: list[str | int] = []
    stack: list[Iterator[tuple[str | int, Any]]] = [_children(data)]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            if stack:  # a nested collection ended: its key leaves the path
                keys.pop()
            continue
        key, value = item
        count += 2 if isinstance(key, str) else 1
        if count > max_nodes:
            return max_nodes + 1, tuple(keys)
        if isinstance(value, dict | list) and value:
            keys.append(key)
            stack.append(_children(value))
    return count, None


def _children(value: Any) -> Iterator[tuple[str | int, Any]]:
    if isinstance(value, dict):
        return iter(value.items())
    return enumerate(value) if isinstance(value, list) else iter(())


def _parse_json(text: str, file: str, max_nodes: int) -> Document:
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                duplicates.append(key)
            out[key] = value
        return out

    def reject_constant(name: str) -> float:
        raise ValueError(f"{name} is not allowed")

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=reject_constant)
    except (ValueError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        return Document(
            file=file,
            data=None,
            problems=(
                Problem(
                    code="syntax_error",
                    message=f"invalid JSON: {getattr(exc, 'msg', str(exc))}",
                    file=file,
                    line=line,
                    hint="fix the JSON syntax (NaN and Infinity are not allowed)",
                ),
            ),
        )
    nodes, over = _count_nodes(data, max_nodes)
    if over is not None:
        return Document(file=file, data=None, problems=(_too_many_nodes(file, max_nodes, None, over),), nodes=nodes)
    # JSON is YAML flow syntax: compose it again to learn lines and the exact duplicate paths.
    builder = _Builder(file)
    try:
        node, _ = _compose(text, max_nodes)
        if node is not None:
            builder.build(node, ())
    except (yaml.YAMLError, RecursionError, _TooManyNodes):
        builder = _Builder(file)
    problems = list(builder.problems)
    if duplicates and not problems:
        problems = [
            Problem(code="duplicate_key", message=f"duplicate key {excerpt(key)}", file=file, hint="keep only one")
            for key in duplicates
        ]
    return Document(file=file, data=data, lines=builder.lines, problems=tuple(problems), nodes=nodes)


def _describe(character: object) -> str:
    return f"U+{character:04X}" if isinstance(character, int) else repr(character)


def _syntax_problem(exc: yaml.YAMLError | RecursionError, file: str, text: str) -> Problem:
    if isinstance(exc, RecursionError):
        return Problem(
            code="too_deep", message="the document is nested too deeply", file=file, hint="flatten the document"
        )
    if isinstance(exc, yaml.reader.ReaderError):
        # str(ReaderError) spans two lines and it has no mark: report the character and its line instead.
        return Problem(
            code="syntax_error",
            message=f"invalid YAML: unacceptable character {_describe(exc.character)}: {exc.reason}",
            file=file,
            line=text.count("\n", 0, exc.position) + 1,
            hint="remove the character or write it as an escape in a double-quoted string",
        )
    return _marked_problem(exc, file, text)


_OPENERS = {"[": "'['", "{": "'{'", "'": "quoted string", '"': "quoted string"}
"""Constructs opened by a character: a problem inside one is reported on the line where it was opened."""
_UNCLOSED = ("expected ',' or ", "found unexpected end of stream", "found unexpected document separator")
"""Problems that mean an opened construct was not closed where it should have been (as does the end of the file)."""


def _unclosed(problem: str) -> bool:
    return problem.startswith(_UNCLOSED) or problem.endswith("'<stream end>'")


def _open_flow(text: str, index: int) -> yaml.Mark | None:
    """Where the innermost flow collection (``[`` or ``{``) still open at ``index`` of ``text`` was opened."""
    stack: list[yaml.Mark] = []
    try:
        for token in yaml.scan(text, Loader=_StrictLoader):
            if token.start_mark.index >= index:
                break
            if isinstance(token, yaml.FlowSequenceStartToken | yaml.FlowMappingStartToken):
                stack.append(token.start_mark)
            elif isinstance(token, yaml.FlowSequenceEndToken | yaml.FlowMappingEndToken) and stack:
                stack.pop()
    except yaml.YAMLError:
        pass  # the tokens before the error are all there is
    return stack[-1] if stack else None


def _marked_problem(exc: yaml.YAMLError, file: str, text: str) -> Problem:
    """A syntax error at the line of the construct it breaks, its message naming both lines.

    PyYAML's ``context_mark`` is where the construct being read opened, ``problem_mark`` where the error was
    noticed. An unclosed ``[``, ``{`` or quote is reported on the line it opened (where the fix belongs, not where
    the parser gave up); a block mapping or list opens where it starts, often line 1, so block-structure errors are
    reported where they were noticed. Messages use PyYAML's one-line ``problem`` and ``context``, never ``str(exc)``,
    which quotes the file's lines.
    """
    problem_mark = getattr(exc, "problem_mark", None)
    context_mark = getattr(exc, "context_mark", None)
    problem = str(getattr(exc, "problem", None) or type(exc).__name__)
    context = str(getattr(exc, "context", None) or "")
    noticed = problem_mark.line + 1 if problem_mark is not None else None
    opened = context_mark.line + 1 if context_mark is not None else None
    opener = _OPENERS.get(text[context_mark.index : context_mark.index + 1]) if context_mark is not None else None
    if opener is None and isinstance(exc, yaml.parser.ParserError) and problem_mark is not None:
        # 'a: [' ends 'while parsing a flow node' at the end of the file: find the '[' still open there.
        flow = _open_flow(text, problem_mark.index)
        if flow is not None:
            opener, opened = _OPENERS[text[flow.index]], flow.line + 1
    hint = _syntax_hint(problem)
    if opener is not None and opened is not None:
        where = f"noticed on line {noticed}: {problem}" if noticed not in (None, opened) else problem
        if _unclosed(problem):
            message = f"the {opener} opened on line {opened} is not closed ({where})"
            hint = f"close the {opener} opened on line {opened}" + (
                " (a quoted string ends with the same quote)" if opener == "quoted string" else ""
            )
        else:
            message = f"{problem} in the {opener} opened on line {opened}" + (
                f" (noticed on line {noticed})" if noticed not in (None, opened) else ""
            )
        return Problem(code="syntax_error", message=f"invalid YAML: {message}", file=file, line=opened, hint=hint)
    if context and not context.startswith("while "):
        message = f"{context}, {problem}"  # 'expected a single document in the stream, but found another document'
    elif context.startswith("while parsing a block") and opened is not None and opened != noticed:
        kind = "mapping" if "mapping" in context else "list"
        message = f"{problem} (in the {kind} that starts on line {opened})"
    else:
        message = problem
    return Problem(code="syntax_error", message=f"invalid YAML: {message}", file=file, line=noticed, hint=hint)


def _syntax_hint(problem: str) -> str:
    if "'\\t'" in problem:
        return "indent with spaces: YAML does not allow tabs here"
    if problem.startswith("expected <block end>"):
        return "check the indentation: the keys of one mapping and the items of one list start in the same column"
    if problem.startswith(("mapping values are not allowed", "sequence entries are not allowed")):
        return "check the indentation, or quote a value that contains ': ' or starts with '- '"
    return "fix the YAML syntax"


class _Builder:
    """Turns a composed YAML node tree into plain data, recording lines and duplicate keys."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: dict[KeyPath, int] = {}
        self.problems: list[Problem] = []
        self._constructor = _StrictLoader("")
        self._built: set[int] = set()

    def _refuse(self, line: int | None, path: KeyPath, *, code: str, message: str, hint: str) -> None:
        """Record a problem at ``line`` of the value at ``path``."""
        self.problems.append(
            Problem(code=code, message=message, file=self.file, line=line, key_path=path or None, hint=hint)
        )

    def build(self, node: yaml.Node, path: KeyPath) -> Any:
        self.lines.setdefault(path, node.start_mark.line + 1)
        # The composer yields one node per occurrence except for aliases, which repeat an anchored node: rejecting
        # them prevents cycles ('&a [*a]') and exponential expansion ("billion laughs").
        if id(node) in self._built:
            self._refuse(
                self.lines.get(path),
                path,
                code="yaml_alias",
                message="YAML aliases ('*name') are not supported",
                hint="write the value out explicitly",
            )
            return None
        self._built.add(id(node))
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode) and node.tag not in _COLLECTION_TAGS:
            self._refuse(
                node.start_mark.line + 1,
                path,
                code="unsupported_value",
                message=f"YAML tag {excerpt(node.tag)} is not supported",
                hint="remove the tag; write a plain mapping or list",
            )
            return None
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, index)) for index, item in enumerate(node.value)]
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        raise TypeError(f"unexpected YAML node {type(node).__name__}")  # pragma: no cover - composer yields only these

    def _mapping(self, node: yaml.MappingNode, path: KeyPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._refuse(
                    key_node.start_mark.line + 1,
                    path,
                    code="merge_key",
                    message="YAML merge keys ('<<') are not supported",
                    hint="write the keys out explicitly",
                )
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._refuse(
                    key_node.start_mark.line + 1,
                    path,
                    code="key_type",
                    message="mapping keys must be plain strings",
                    hint="use a string key",
                )
                continue
            key = str(key_node.value)
            child = (*path, key)
            if key in out:
                self._refuse(
                    key_node.start_mark.line + 1,
                    child,
                    code="duplicate_key",
                    message=f"duplicate key {excerpt(key)} (first on line {self.lines.get(child)})",
                    hint="keep only one of the two entries",
                )
                continue
            self.lines[child] = key_node.start_mark.line + 1
            out[key] = self.build(value_node, child)
        return out

    def _scalar(self, node: yaml.ScalarNode, path: KeyPath) -> Any:
        try:
            value = self._constructor.construct_object(node, deep=True)
        except _CONSTRUCT_ERRORS as exc:
            self._refuse(
                node.start_mark.line + 1,
                path,
                code="unsupported_value",
                message=f"cannot read {excerpt(node.value)}: {excerpt(str(getattr(exc, 'problem', None) or exc), 80)}",
                hint="write a plain string, number, boolean or null (custom YAML tags are not supported)",
            )
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self._refuse(
                node.start_mark.line + 1,
                path,
                code="non_finite_number",
                message=f"{excerpt(node.value)} is not a finite number",
                hint="use a finite number; NaN and infinities are not allowed",
            )
        return value
