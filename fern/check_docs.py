"""Check the Fern docs against an installed build: every command shown runs, every command and option exists.

Usage::

    python fern/check_docs.py --venv VENV --dist DIST [--fern-bin PATH] [--verbose]

``VENV`` is a virtual environment with ``data-designer[slurm]`` installed from the wheels in ``DIST``
(the directory the pages call ``dist``). With ``--fern-bin``, ``fern check --local`` validates
``fern/docs.yml`` and every page first (offline; only its login-only "missing redirects" warning is
tolerated). Standard library only. Exit status: 0 all checks pass, 1 a check failed, 2 bad arguments.

What is checked
---------------
1. Navigation: every ``fern/pages/**/*.mdx`` is listed in ``docs.yml`` (fern check proves the reverse).
2. Commands run: every ```` ```bash ```` block of a page is executed, in page order, by one ``bash``
   process per page (so ``cd``/``export`` carry over within a page), under ``set -o pipefail``, with
   ``VENV/bin`` first on ``PATH``, ``HOME`` a fresh temporary directory and the working directory
   ``$HOME/work``, which holds ``dist`` (a link to ``DIST``). Blank lines and lines starting with ``#``
   are skipped; every other line is one command, continued by a trailing backslash or by the body of a
   heredoc (``<<'EOF'`` ... ``EOF``). A command must exit 0 unless it ends with the comment
   ``# exit N``, which documents the exit status the reader should see.
3. The CLI cannot drift from ``--help``: every ``data-designer slurm ...`` written anywhere on a page
   (prose, inline code, any code block) must name existing subcommands, and every ``--option`` after
   it must appear in that command's ``--help``. Conversely, every command in the ``--help`` tree and
   every option of every command must be shown at least once in the docs.
4. The troubleshooting page covers the product: ``pages/troubleshooting.mdx`` has exactly one ``###`` entry for
   every error code (``contracts.ERROR_CODES``, with its exit code), attempt ending (``records.EXIT_CODES``, with
   the task's exit code), shard state, run state and plan warning, read from the installed wheels; each entry says
   what it means and has **Usual causes**, **Fix** and **More** (a ``data-designer slurm`` command). A missing,
   unknown, duplicated or incomplete entry fails with a message naming it.

Markers
-------
An MDX comment on the line right before a code block (blank lines between are fine) changes how
the block is treated; it renders as nothing:

- ``{/* check: skip REASON */}`` -- a ``bash`` block that is not executed, because it needs what a
  check cannot have (a source checkout, a cluster). Its CLI mentions are still checked. Use sparingly.
- ``{/* check: output */}`` -- the block must equal what the previous command printed (stdout and
  stderr together), with the temporary ``$HOME`` written as ``/home/me`` and trailing spaces ignored.
- ``{/* check: file PATH */}`` -- the block's content is written to ``PATH`` (relative to the current
  directory of the page's shell) before the next command runs, e.g. a profile shown as YAML.

Commands go in ```` ```bash ```` blocks only: ``sh``, ``shell``, ``console``, ``zsh`` and ``shell-session``
blocks are rejected so that no command escapes the check.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

FERN_DIR = Path(__file__).resolve().parent
PAGES_DIR = FERN_DIR / "pages"
SHOWN_HOME = "/home/me"
PAGE_TIMEOUT_S = 600
HELP_TIMEOUT_S = 60
FERN_TIMEOUT_S = 300
FERN_LOGIN_ONLY_RULES = frozenset({"missing-redirects"})
"""fern check rules that only warn because no Fern token is present; everything else must be clean."""

_UNCHECKED_SHELL_LANGS = frozenset({"sh", "shell", "console", "zsh", "shell-session"})
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*\{/\*\s*check:\s*(?P<kind>[\w-]+)\s*(?P<arg>.*?)\s*\*/\}\s*$")
_EXIT_COMMENT = re.compile(r"(?:^|\s)#\s*exit\s+(?P<code>\d+)\s*$")
_HEREDOC = re.compile(r"(?<!<)<<-?(?!<)\s*(?P<q>['\"]?)(?P<word>[A-Za-z_][A-Za-z0-9_]*)(?P=q)")
_MENTION = re.compile(r"(?<![\w/.-])data-designer\s+slurm(?![\w-])")
_WORD = re.compile(r"^[a-z][a-z0-9-]*$")
_NAV_PATH = re.compile(r"^\s*path:\s*(?P<path>\S+\.mdx?)\s*$", re.MULTILINE)


class PageError(Exception):
    """A page breaks the conventions above (a marker without a block, an unterminated heredoc...)."""


@dataclass(frozen=True)
class Marker:
    kind: str
    arg: str
    line: int


@dataclass(frozen=True)
class Block:
    """A fenced code block: ``line`` is the page line of its first content line."""

    lang: str
    line: int
    lines: tuple[str, ...]
    marker: Marker | None


@dataclass(frozen=True)
class Command:
    line: int
    text: str
    expected_exit: int


@dataclass(frozen=True)
class FileWrite:
    line: int
    path: str
    content: str


@dataclass(frozen=True)
class OutputCheck:
    line: int
    expected: str
    command: Command


Step = Command | FileWrite | OutputCheck


@dataclass
class Page:
    path: Path
    text: str
    blocks: list[Block] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.path.relative_to(FERN_DIR.parent))


# ---------------------------------------------------------------------------------------------- parsing


def parse_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a page, each with the marker that precedes it."""
    blocks: list[Block] = []
    lines = text.splitlines()
    pending: Marker | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = _MARKER.match(line)
        fence = _FENCE.match(line)
        if marker:
            if pending is not None:
                raise PageError(f"line {pending.line}: marker is not followed by a code block")
            pending = Marker(marker["kind"], marker["arg"], i + 1)
        elif fence:
            indent, opener, opened = fence["indent"], fence["fence"], i + 1
            lang = fence["info"].strip().split(" ", 1)[0].split("{", 1)[0].lower()
            closing = re.compile(rf"^\s*{re.escape(opener[0])}{{{len(opener)},}}\s*$")
            body: list[str] = []
            i += 1
            while i < len(lines) and not closing.match(lines[i]):
                body.append(lines[i].removeprefix(indent))
                i += 1
            if i == len(lines):
                raise PageError(f"line {opened}: code block never closed")
            blocks.append(Block(lang, opened + 1, tuple(body), pending))
            pending = None
        elif pending is not None and line.strip():
            raise PageError(f"line {pending.line}: marker is not followed by a code block")
        i += 1
    if pending is not None:
        raise PageError(f"line {pending.line}: marker is not followed by a code block")
    return blocks


def split_commands(block: Block) -> list[Command]:
    """One command per non-comment line, joined across trailing backslashes and heredoc bodies."""
    commands: list[Command] = []
    lines = block.lines
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        start = i
        head = [lines[i]]
        while head[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            head.append(lines[i])
        text = list(head)
        for word in (m["word"] for h in head for m in _HEREDOC.finditer(h)):
            while True:
                i += 1
                if i == len(lines):
                    raise PageError(f"line {block.line + start}: heredoc {word!r} is never terminated")
                text.append(lines[i])
                if lines[i].strip() == word:
                    break
        exits = [int(m["code"]) for h in head if (m := _EXIT_COMMENT.search(h))]
        commands.append(Command(block.line + start, "\n".join(text), exits[0] if exits else 0))
        i += 1
    return commands


def plan_page(path: Path) -> Page:
    """Read a page and turn its blocks into the steps its shell runs."""
    page = Page(path, path.read_text(encoding="utf-8"))
    page.blocks = parse_blocks(page.text)
    last: Command | None = None
    for block in page.blocks:
        kind = block.marker.kind if block.marker else None
        where = f"line {block.line - 1}"
        if block.lang in _UNCHECKED_SHELL_LANGS:
            raise PageError(f"{where}: write commands in a bash block, not {block.lang!r}, so that they are checked")
        if kind not in (None, "skip", "output", "file"):
            raise PageError(f"{where}: unknown marker 'check: {kind}' (use skip, output or file)")
        if kind == "skip" and (block.lang != "bash" or not block.marker or not block.marker.arg):
            raise PageError(f"{where}: 'check: skip' needs a bash block and a reason")
        if block.lang == "bash" and kind in ("output", "file"):
            raise PageError(f"{where}: 'check: {kind}' belongs on a non-bash block (bash blocks are run)")
        if kind == "file":
            if not block.marker or not block.marker.arg:
                raise PageError(f"{where}: 'check: file' needs a path")
            page.steps.append(FileWrite(block.line, block.marker.arg, "\n".join(block.lines) + "\n"))
        elif kind == "output":
            if last is None:
                raise PageError(f"{where}: 'check: output' has no command before it")
            page.steps.append(OutputCheck(block.line, "\n".join(block.lines), last))
        elif kind == "skip":
            last = None  # an output block after a skipped one has nothing to compare with
        elif block.lang == "bash":
            for command in split_commands(block):
                page.steps.append(command)
                last = command
    return page


def load_pages() -> tuple[list[Page], list[str]]:
    pages: list[Page] = []
    failures: list[str] = []
    for path in sorted(PAGES_DIR.rglob("*.md*")):
        try:
            pages.append(plan_page(path))
        except PageError as exc:
            failures.append(f"{path.relative_to(FERN_DIR.parent)}: {exc}")
    return pages, failures


def check_navigation(pages: list[Page]) -> list[str]:
    listed = {(FERN_DIR / m["path"]).resolve() for m in _NAV_PATH.finditer((FERN_DIR / "docs.yml").read_text("utf-8"))}
    return [f"{page.name}: not listed under navigation in fern/docs.yml" for page in pages if page.path not in listed]


# ---------------------------------------------------------------------------------------------- troubleshooting

TROUBLESHOOTING_PAGE = PAGES_DIR / "troubleshooting.mdx"
VALIDATION_FAMILY = "Other validation codes"
"""The heading of the one entry for pydantic's own validation types (``contracts.VALIDATION_TYPE_CODES``)."""
TROUBLESHOOTING_SECTIONS = {
    "error_codes": "Error codes",
    "final_statuses": "Attempt endings",
    "shard_states": "Shard states",
    "run_states": "Run states",
    "warning_codes": "Plan warnings",
}
"""Table (as :data:`TABLES_SCRIPT` prints it) -> the ``##`` section of the page that must cover it."""
EXIT_PREFIXES = {"error_codes": "Exit", "final_statuses": "Task exit"}
"""Tables whose entries start with their exit code, and how: a command's exit, or the array task's (``sacct``)."""
ENTRY_FIELDS = ("Usual causes", "Fix", "More")
"""Every entry ends with these bullets (``- **Fix:** ...``); **More** names the command that shows more."""

TABLES_SCRIPT = """
import json
from typing import get_args
from data_designer.slurm.contracts import (
    ERROR_CODES, EXIT_CODE_BY_CATEGORY, SHARD_STATES, WARNING_CODES, RunState,
)
from data_designer.slurm.contracts.records import EXIT_CODES
print(json.dumps({
    "error_codes": {code: sorted({int(EXIT_CODE_BY_CATEGORY[c]) for c in cats}) for code, cats in ERROR_CODES.items()},
    "final_statuses": {status: [code] for status, code in EXIT_CODES.items()},
    "shard_states": {state: [] for state in SHARD_STATES},
    "run_states": {state: [] for state in get_args(RunState)},
    "warning_codes": {code: [] for code in sorted(WARNING_CODES)},
}))
"""
"""Prints the product's own tables, from the installed wheels: the page is checked against what users run."""

_SECTION = re.compile(r"^## (?P<title>.+?)\s*$")
_ENTRY = re.compile(r"^### (?P<title>.+?)\s*$")
_CODE = re.compile(r"`([a-z][a-z0-9_]*)`")
_EXIT_LINE = re.compile(r"^(?P<what>Exit|Task exit) (?P<codes>\d+(?:(?:, | or )\d+)*)\.(?:\s|$)")
_FIELD = re.compile(r"^- \*\*(?P<name>[^*]+):\*\*\s*(?P<text>.*)$")


def product_tables(venv: Path) -> dict[str, object]:
    """The tables :data:`TABLES_SCRIPT` prints with ``venv``'s Python."""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", TABLES_SCRIPT], capture_output=True, text=True, timeout=HELP_TIMEOUT_S
    )
    if done.returncode != 0:
        raise PageError(f"could not read the product's tables from {venv}: {done.stderr.strip()[-2000:]}")
    tables: dict[str, object] = json.loads(done.stdout)
    return tables


@dataclass
class Entry:
    section: str
    title: str
    line: int
    body: list[str]


def troubleshooting_entries(text: str) -> list[Entry]:
    """The ``###`` entries of the page, each with its ``##`` section and its lines up to the next heading."""
    entries: list[Entry] = []
    section = ""
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            in_fence = not in_fence
        if in_fence:
            if entries:
                entries[-1].body.append(line)
            continue
        if match := _SECTION.match(line):
            section = match["title"]
            entries.append(Entry(section, "", number, []))  # a section's own text belongs to no entry
        elif match := _ENTRY.match(line):
            entries.append(Entry(section, match["title"], number, []))
        elif entries:
            entries[-1].body.append(line)
    return [entry for entry in entries if entry.title]


def check_troubleshooting(
    text: str, tables: dict[str, object], name: str = "fern/pages/troubleshooting.mdx"
) -> list[str]:
    """Every code and state of the product's tables has one complete entry, in its section, with its exit code."""
    failures: list[str] = []
    entries = troubleshooting_entries(text)
    titles = {entry.section for entry in entries}
    for key, section in TROUBLESHOOTING_SECTIONS.items():
        table: dict[str, list[int]] = tables[key]  # type: ignore[assignment]
        if section not in titles:
            failures.append(f"{name}: no '## {section}' section (it must hold an entry for each of {len(table)} items)")
            continue
        seen: dict[str, int] = {}
        for entry in (e for e in entries if e.section == section):
            where = f"{name}:{entry.line}"
            if key == "error_codes" and entry.title == VALIDATION_FAMILY:
                codes = ["<validation>"]
                wanted: dict[str, list[int]] = {"<validation>": [2]}
            else:
                codes = _CODE.findall(entry.title)
                wanted = table
                if not codes or _CODE.sub("", entry.title).strip(" ,") not in ("", "and"):
                    failures.append(f"{where}: heading {entry.title!r} must be one or more `codes` in backticks")
                    continue
            for code in codes:
                if code not in wanted:
                    failures.append(
                        f"{where}: `{code}` is not one of the product's {section.lower()}: remove the entry or fix its name"
                    )
                elif code in seen:
                    failures.append(f"{where}: `{code}` already has an entry (line {seen[code]}): keep one")
                seen[code] = entry.line
            failures += _entry_failures(entry, codes, wanted, where, EXIT_PREFIXES.get(key, ""))
        for code in table:
            if code not in seen:
                exits = table[code]
                shown = f" (exit {' or '.join(map(str, exits))})" if exits else ""
                failures.append(
                    f"{name}: `{code}`{shown} has no entry under '## {section}': add '### `{code}`' with what it "
                    f"means, **Usual causes**, **Fix** and **More**"
                )
        if key == "error_codes" and VALIDATION_FAMILY not in {e.title for e in entries if e.section == section}:
            failures.append(f"{name}: no '### {VALIDATION_FAMILY}' entry under '## {section}' for pydantic's own types")
    return failures


def _entry_failures(entry: Entry, codes: list[str], table: dict[str, list[int]], where: str, prefix: str) -> list[str]:
    failures: list[str] = []
    lines = [line.strip() for line in entry.body]
    fields = {m["name"]: m["text"].strip() for line in lines if (m := _FIELD.match(line))}
    exits = {tuple(table[code]) for code in codes if code in table}
    if len(exits) > 1:
        failures.append(f"{where}: {', '.join(codes)} have different exit codes: give each its own entry")
    wanted = next(iter(exits), ())
    prose = [line for line in lines if line and not _FIELD.match(line) and not line.startswith(("{/*", "```"))]
    if wanted:
        stated = next((m for line in lines if (m := _EXIT_LINE.match(line))), None)
        shown = sorted(int(c) for c in re.split(r", | or ", stated["codes"])) if stated else None
        if shown != sorted(wanted) or stated is None or stated["what"] != prefix:
            expected = " or ".join(map(str, wanted))
            found = f"{stated['what']} {shown}" if stated else "none"
            failures.append(
                f"{where}: {entry.title} must say its exit code: start with '{prefix} {expected}.' (found {found})"
            )
    meaning = [rest for line in prose if (rest := _EXIT_LINE.sub("", line, count=1).strip())]
    if not meaning:
        failures.append(f"{where}: {entry.title} says nothing about what it means")
    for field_name in ENTRY_FIELDS:
        if not fields.get(field_name):
            failures.append(f"{where}: {entry.title} lacks '- **{field_name}:** ...'")
    if fields.get("More") and not _MENTION.search(fields["More"]):
        failures.append(f"{where}: {entry.title}: **More** must name a `data-designer slurm ...` command")
    return failures


# ---------------------------------------------------------------------------------------------- fern check


def run_fern_check(fern_bin: Path) -> list[str]:
    """``fern check --local``: errors fail, and so does every warning a login would not silence."""
    pinned = json.loads((FERN_DIR / "fern.config.json").read_text("utf-8"))["version"]
    with tempfile.TemporaryDirectory(prefix="docs-fern-home-") as home:
        env = {**os.environ, "HOME": home, "FERN_DISABLE_TELEMETRY": "true", "FERN_DISABLE_UPGRADE_CHECK": "true"}

        def fern(*args: str, cwd: Path = FERN_DIR.parent) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [str(fern_bin), *args],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=FERN_TIMEOUT_S,
                check=False,
            )

        # Outside the project: inside it, a CLI that differs from the pin re-runs itself as the pinned version.
        installed = fern("--version", cwd=Path(home)).stdout.strip()
        if installed != pinned:
            return [
                f"{fern_bin} is fern-api {installed!r}; fern/fern.config.json pins {pinned}: npm install fern-api@{pinned}"
            ]
        proc = fern("check", "--local", "--json", "--warnings")
    try:
        report = json.loads(proc.stdout)
        findings = [f for results in report["results"].values() for f in results]
    except (ValueError, KeyError, TypeError, AttributeError):
        return [f"fern check exited {proc.returncode} without a JSON report:\n{_indent(proc.stdout + proc.stderr)}"]
    bad = [f for f in findings if not (f.get("severity") == "warning" and f.get("rule") in FERN_LOGIN_ONLY_RULES)]
    if proc.returncode != 0 or not report.get("success") or bad:
        # The JSON report names no files; fern's human report on stderr does.
        detail = "\n".join(f"[{f.get('severity')}] {f.get('rule')}: {f.get('message')}" for f in bad)
        return [f"fern check failed (exit {proc.returncode}):\n{_indent(proc.stderr or detail, limit=80)}"]
    return []


# ---------------------------------------------------------------------------------------------- CLI drift


@dataclass(frozen=True)
class Help:
    commands: frozenset[str]
    options: frozenset[str]


@dataclass(frozen=True)
class Mention:
    page: str
    line: int
    path: tuple[str, ...]
    options: tuple[str, ...]


class Cli:
    """``data-designer slurm ... --help`` of the installed build, parsed and cached."""

    def __init__(self, venv: Path, home: Path) -> None:
        self.exe = venv / "bin" / "data-designer"
        self.env = {**os.environ, "HOME": str(home), "COLUMNS": "80", "NO_COLOR": "1"}
        self._help: dict[tuple[str, ...], Help | None] = {}

    def help(self, path: tuple[str, ...]) -> Help | None:
        if path not in self._help:
            self._help[path] = self._run_help(path)
        return self._help[path]

    def _run_help(self, path: tuple[str, ...]) -> Help | None:
        proc = subprocess.run(
            [str(self.exe), "slurm", *path, "--help"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=HELP_TIMEOUT_S,
            check=False,
        )
        return parse_help(proc.stdout) if proc.returncode == 0 else None

    def tree(self, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Help]]:
        info = self.help(path)
        if info is None:
            return
        yield path, info
        for name in sorted(info.commands):
            yield from self.tree((*path, name))


def parse_help(text: str) -> Help:
    """Commands and long/short options from Click's plain help (entries are indented by exactly two spaces)."""
    commands: set[str] = set()
    options: set[str] = set()
    section = ""
    for line in text.splitlines():
        if line and not line[0].isspace():
            section = line.strip().rstrip(":").lower()
        elif line.startswith("  ") and not line.startswith("   "):
            declaration = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            if section == "commands":
                commands.add(declaration.split()[0])
            elif section == "options":
                options.update(re.findall(r"(?<![\w-])--?[A-Za-z0-9][\w-]*", declaration))
    return Help(frozenset(commands), frozenset(options))


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Page lines with backslash continuations joined, each with the number of its first line."""
    start = 0
    parts: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not parts:
            start = number
        if line.rstrip().endswith("\\"):
            parts.append(line.rstrip()[:-1])
            continue
        parts.append(line)
        yield start, " ".join(parts)
        parts = []
    if parts:
        yield start, " ".join(parts)


def mention_tokens(line: str, begin: int, end: int) -> list[str]:
    """The words after one ``data-designer slurm``, up to the end of its code span, quote or shell operator."""
    rest = line[end:]
    before = line[begin - 1] if begin else ""
    if before and before in "'\"":
        rest = rest.split(before, 1)[0]
    rest = rest.split("`", 1)[0]
    lexer = shlex.shlex(rest, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    tokens: list[str] = []
    try:
        for token in lexer:
            if token and set(token) <= set(";&|()<>"):
                break
            tokens.append(token)
    except ValueError:  # an unbalanced quote in prose: fall back to plain words
        tokens = rest.split()
    return [t.strip("[]") for t in tokens if t.strip("[]")]


def check_mentions(pages: list[Page], cli: Cli) -> tuple[list[Mention], list[str]]:
    """Every ``data-designer slurm ...`` on every page names real subcommands and options."""
    mentions: list[Mention] = []
    failures: list[str] = []
    for page in pages:
        for number, line in logical_lines(page.text):
            for match in _MENTION.finditer(line):
                path: tuple[str, ...] = ()
                options: list[str] = []
                tokens = mention_tokens(line, match.start(), match.end())
                shown = " ".join(("data-designer slurm", *tokens))
                for token in tokens:
                    info = cli.help(path)
                    if info is None:  # only the root can fail here: subcommands are checked before descending
                        break
                    if token.startswith("-"):
                        option = token.split("=", 1)[0]
                        if option not in info.options:
                            command = " ".join(("data-designer slurm", *path))
                            failures.append(f"{page.name}:{number}: `{shown}`: {option} is not in `{command} --help`")
                        options.append(option)
                    elif info.commands and _WORD.match(token):
                        if token not in info.commands:
                            command = " ".join(("data-designer slurm", *path))
                            failures.append(
                                f"{page.name}:{number}: `{shown}`: no command {token!r} in `{command} --help`"
                            )
                            break
                        path = (*path, token)
                mentions.append(Mention(page.name, number, path, tuple(options)))
    return mentions, failures


def check_coverage(mentions: list[Mention], cli: Cli) -> list[str]:
    """Every command of the ``--help`` tree and every option of every command is shown somewhere."""
    shown = {(m.path, o) for m in mentions for o in m.options}
    paths = {m.path for m in mentions}
    failures: list[str] = []
    for path, info in cli.tree():
        command = " ".join(("data-designer slurm", *path))
        if info.commands:
            continue
        if path not in paths:
            failures.append(f"docs: `{command}` is in --help but no page shows it")
        failures.extend(
            f"docs: `{command} {option}` is in --help but no page shows it"
            for option in sorted(info.options - {"--help"})
            if (path, option) not in shown
        )
    return failures


# ---------------------------------------------------------------------------------------------- running pages


def page_script(page: Page, log: Path) -> str:
    """The bash script that runs a page's steps, logging each command's output and exit status."""
    out = ["set -o pipefail", f"cd -- {shlex.quote(str(log.parent / 'home' / 'work'))} || exit 99"]
    for index, step in enumerate(page.steps):
        status = f"printf '%s %s\\n' {index} \"$?\" >>{shlex.quote(str(log / 'status'))}"
        if isinstance(step, Command):
            out += [f"{{ {step.text}", f"}} </dev/null >{shlex.quote(str(log / f'{index}.out'))} 2>&1", status]
        elif isinstance(step, FileWrite):
            source = log / f"{index}.file"
            source.write_text(step.content, encoding="utf-8")
            out += [f"cp -- {shlex.quote(str(source))} {shlex.quote(step.path)}", status]
    return "\n".join(out) + "\n"


def shown_output(text: str, home: Path) -> list[str]:
    lines = [line.rstrip() for line in text.replace(str(home), SHOWN_HOME).splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def run_page(page: Page, venv: Path, dist: Path, verbose: bool) -> list[str]:
    """Run a page's commands in a fresh HOME; compare exit statuses and checked outputs."""
    if not page.steps:
        return []
    with tempfile.TemporaryDirectory(prefix="docs-check-") as tmp:
        root = Path(tmp).resolve()
        home, log = root / "home", root / "log"
        (home / "work").mkdir(parents=True)
        log.mkdir()
        (home / "work" / "dist").symlink_to(dist)
        # The pages' own settings only: no profile selection or PYTHONPATH leaking in from the caller.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DATA_DESIGNER_SLURM_", "PYTHON"))}
        env.pop("XDG_CONFIG_HOME", None)
        env.update(
            HOME=str(home),
            PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            VIRTUAL_ENV=str(venv),
            COLUMNS="80",
            NO_COLOR="1",
            PIP_DISABLE_PIP_VERSION_CHECK="1",
        )
        script = page_script(page, log)
        try:
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-c", script],
                env=env,
                capture_output=True,
                text=True,
                timeout=PAGE_TIMEOUT_S,
                check=False,
            )
            tail = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            tail = f"(the page's shell ran past {PAGE_TIMEOUT_S}s and was stopped)"
        statuses = _read_statuses(log / "status")
        return list(_step_failures(page, log, home, statuses, tail, verbose))


def _read_statuses(path: Path) -> dict[int, int]:
    if not path.exists():
        return {}
    pairs = (line.split() for line in path.read_text("utf-8").splitlines() if line.strip())
    return {int(index): int(code) for index, code in pairs}


def _step_failures(
    page: Page, log: Path, home: Path, statuses: dict[int, int], tail: str, verbose: bool
) -> Iterator[str]:
    index_of = {id(step): index for index, step in enumerate(page.steps)}
    for index, step in enumerate(page.steps):
        where = f"{page.name}:{step.line}"
        if isinstance(step, OutputCheck):
            expected = shown_output(step.expected, home)
            actual = shown_output(_read(log / f"{index_of[id(step.command)]}.out"), home)
            if expected != actual:
                diff = difflib.unified_diff(expected, actual, "page", "actual output", lineterm="")
                yield f"{where}: output differs from what the command on line {step.command.line} printed:\n" + _indent(
                    "\n".join(diff)
                )
            continue
        status = statuses.get(index)
        label = step.text.splitlines()[0] if isinstance(step, Command) else f"(writing {step.path})"
        expected_exit = step.expected_exit if isinstance(step, Command) else 0
        output = "\n".join(shown_output(_read(log / f"{index}.out"), home))
        if verbose:
            print(f"  {where}: exit {status}: {label}")
        if status is None:
            yield f"{where}: never finished (the shell stopped before it): {label}\n{_indent(tail)}"
            return
        if status != expected_exit:
            yield f"{where}: exited {status}, the page documents {expected_exit}: {label}\n{_indent(output)}"


def _read(path: Path) -> str:
    return path.read_text("utf-8", errors="replace") if path.exists() else ""


def _indent(text: str, limit: int = 40) -> str:
    lines = text.rstrip().splitlines()
    if len(lines) > limit:
        lines = ["...", *lines[-limit:]]
    return "\n".join("    " + line for line in lines)


# ---------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("--venv", type=Path, required=True, help="venv with data-designer[slurm] from DIST")
    parser.add_argument("--dist", type=Path, required=True, help="directory of the built wheels (the pages' 'dist')")
    parser.add_argument("--fern-bin", type=Path, help="the fern CLI (npm fern-api); runs 'fern check --local'")
    parser.add_argument("--verbose", action="store_true", help="print every command and its exit status")
    args = parser.parse_args(argv)
    venv, dist = args.venv.absolute(), args.dist.resolve()
    if not (venv / "bin" / "data-designer").is_file():
        parser.error(f"{venv}/bin/data-designer does not exist: install data-designer[slurm] into --venv first")
    if not any(dist.glob("*.whl")):
        parser.error(f"{dist} holds no wheels: build them with 'uv build --all-packages -o {dist}'")
    if args.fern_bin is not None and not args.fern_bin.is_file():
        parser.error(
            f"{args.fern_bin} does not exist: npm install --prefix DIR fern-api (the version in fern.config.json)"
        )
    started = time.monotonic()
    failures: list[str] = []
    if args.fern_bin is not None:
        failures += run_fern_check(args.fern_bin.absolute())
    pages, parse_failures = load_pages()
    failures += parse_failures + check_navigation(pages)
    try:
        failures += check_troubleshooting(TROUBLESHOOTING_PAGE.read_text("utf-8"), product_tables(venv))
    except (OSError, PageError) as exc:
        failures.append(f"troubleshooting page: {exc}")
    with tempfile.TemporaryDirectory(prefix="docs-help-") as help_home:
        cli = Cli(venv, Path(help_home))
        if cli.help(()) is None:
            failures.append(f"`{venv}/bin/data-designer slurm --help` failed: is data-designer[slurm] installed there?")
        mentions, mention_failures = check_mentions(pages, cli)
        failures += mention_failures + check_coverage(mentions, cli)
    commands = 0
    for page in pages:
        if args.verbose:
            print(f"{page.name}:")
        failures += run_page(page, venv, dist, args.verbose)
        commands += sum(isinstance(step, Command) for step in page.steps)
    summary = f"{len(pages)} pages, {commands} commands run, {len(mentions)} CLI mentions checked"
    elapsed = f"{time.monotonic() - started:.0f}s"
    if failures:
        print("\n\n".join(failures), file=sys.stderr)
        print(f"check_docs: FAILED ({len(failures)} problems; {summary}; {elapsed})", file=sys.stderr)
        return 1
    print(f"check_docs: ok ({summary}; {elapsed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
