"""How every command renders results and errors: one convention, implemented once.

- ``--json``: exactly the service's result model on stdout; errors as one JSON object on stderr.
- otherwise: a readable summary on stdout; errors as one line per problem on stderr. Text for a terminal passes
  :func:`one_line` (by :func:`human`, :func:`table` and :func:`write_error`): a control or format character of a
  job log, ``slurm-*.err`` or a scheduler message (ESC, BEL, C1, a bidi override) is shown escaped, never sent to
  the terminal. JSON and CSV keep the text as it is (their encoders quote it).
- exit codes come from the error category (see ``data_designer.slurm.contracts.ExitCode``).
- tracebacks only with ``--debug``; an interrupt (Ctrl-C) is an error too, exit 130.
- every error is printed once: by :func:`run` inside a command, else by the group's boundary (``_boundary``).
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
import unicodedata
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from pydantic import BaseModel

    from data_designer.slurm.contracts import ErrorInfo, SlurmExtensionError

ResultT = TypeVar("ResultT", bound="BaseModel")

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the result as JSON (errors as a JSON object on stderr).")
]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")]


def run(
    operation: str,
    call: Callable[[], ResultT],
    render: Callable[[ResultT], str],
    *,
    as_json: bool,
    debug: bool,
    exit_code: Callable[[ResultT], int] | None = None,
    json_text: Callable[[ResultT], str] | None = None,
    verbatim: bool = False,
) -> None:
    """Call one service, print its result, and map any error to its exit code.

    ``exit_code`` lets a command print a result and still exit non-zero (the status of a failed run); ``json_text``
    replaces the result's JSON when a command prints a part of it canonically (``benchmark analyze``). ``render``'s
    text is shown through :func:`human` unless ``verbatim`` (a data format such as CSV, printed as it is). What
    escapes this (a usage error, an error while rendering) is caught by the group's boundary (``_boundary``)
    and printed the same way, once."""
    from data_designer.slurm.contracts import SlurmExtensionError

    try:
        result = call()
    except SlurmExtensionError as exc:
        fail(exc.with_operation(operation), as_json=as_json, debug=debug)
    except (Exception, KeyboardInterrupt) as exc:  # the CLI boundary: anything unexpected becomes one error
        fail(unexpected(exc, operation, debug=debug), as_json=as_json, debug=debug)
    if as_json:
        sys.stdout.write((json_text(result) if json_text is not None else result.model_dump_json()) + "\n")
    else:
        text = render(result)
        typer.echo(text if verbatim else human(text))
    code = exit_code(result) if exit_code is not None else 0
    if code:
        raise typer.Exit(code)


def unexpected(exc: BaseException, operation: str, *, debug: bool) -> SlurmExtensionError:
    """The error to print for an exception that is not ours: an interrupt (exit 130), a name or path over the file
    system's limit that no service mapped (``ENAMETOOLONG``: exit 2, ``name_too_long``, the last line of the rule
    that it is the user's input, never a bug) or an internal error (exit 1)."""
    from data_designer.slurm.contracts import InternalError, InterruptError

    if isinstance(exc, KeyboardInterrupt | typer.Abort):
        error: SlurmExtensionError = InterruptError("interrupted", operation=operation)
    elif isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        from data_designer.slurm.planner import name_too_long

        name = exc.filename if isinstance(exc.filename, str) else os.fsdecode(exc.filename or "")
        error = name_too_long(name, operation)
    else:
        if isinstance(exc, MemoryError) and not debug and exc.__traceback__ is not None:
            traceback.clear_frames(exc.__traceback__)  # free what the failed work held before rendering the error
        error = InternalError(
            f"internal error: {type(exc).__name__}: {exc}",
            operation=operation,
            hint="re-run with --debug and report the traceback",
        )
    error.__cause__ = exc
    return error


def fail(exc: SlurmExtensionError, *, as_json: bool, debug: bool) -> NoReturn:
    """Print ``exc`` on stderr, once (the traceback first with ``debug``), and exit with its code."""
    if debug:
        traceback.print_exception(exc.__cause__ or exc, file=sys.stderr)
    write_error(exc.info, as_json=as_json)
    raise typer.Exit(int(exc.exit_code))


def write_error(info: ErrorInfo, *, as_json: bool) -> None:
    """One JSON object on one line, or one ``error: `` line per problem with control characters escaped."""
    if as_json:
        text = info.model_dump_json()
        for char, escape in _JSON_LINE_BREAKS.items():  # valid in JSON strings, but str.splitlines() splits on them
            text = text.replace(char, escape)
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
        return
    for line in info.render_lines():
        typer.echo("error: " + one_line(line), err=True)


_JSON_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNPRINTABLE = frozenset({"Cc", "Cf", "Zl", "Zp"})


def one_line(text: str) -> str:
    """``text`` with newlines and other control or format characters escaped (``\\n``, ``\\x1b``, ``\\u2028``)."""
    if text.isprintable():
        return text
    return "".join(_escape(char) if unicodedata.category(char) in _UNPRINTABLE else char for char in text)


def human(text: str) -> str:
    """``text`` as a terminal may show it: each of its ``\\n``-separated lines through :func:`one_line`."""
    if text.isprintable():
        return text
    return "\n".join(one_line(line) for line in text.split("\n"))


def _escape(char: str) -> str:
    code = ord(char)
    return _SHORT_ESCAPES.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned text table, every cell through :func:`one_line` (aligned by what is printed)."""
    headers = [one_line(h) for h in headers]
    rows = [[one_line(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return "\n".join(lines)
