"""How every command renders results and errors: one convention, implemented once.

- ``--json``: exactly the service's result model on stdout; errors as one JSON object on stderr.
- otherwise: a readable summary on stdout; errors as one line per problem on stderr.
- exit codes come from the error category (see ``data_designer.slurm.contracts.ExitCode``).
- tracebacks only with ``--debug``.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from pydantic import BaseModel

    from data_designer.slurm.contracts import SlurmExtensionError

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
) -> None:
    """Call one service, print its result, and map any error to its exit code.

    ``exit_code`` lets a command print a result and still exit non-zero (the status of a failed run)."""
    from data_designer.slurm.contracts import InternalError, SlurmExtensionError

    try:
        result = call()
    except SlurmExtensionError as exc:
        _fail(exc.with_operation(operation), as_json=as_json, debug=debug)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(130) from None
    except Exception as exc:  # the CLI boundary: anything unexpected becomes one internal-error line
        internal = InternalError(
            f"internal error: {type(exc).__name__}: {exc}",
            operation=operation,
            hint="re-run with --debug and report the traceback",
        )
        internal.__cause__ = exc
        _fail(internal, as_json=as_json, debug=debug)
    if as_json:
        sys.stdout.write(result.model_dump_json() + "\n")
    else:
        typer.echo(render(result))
    code = exit_code(result) if exit_code is not None else 0
    if code:
        raise typer.Exit(code)


def _fail(exc: SlurmExtensionError, *, as_json: bool, debug: bool) -> NoReturn:
    if debug:
        traceback.print_exception(exc.__cause__ or exc, file=sys.stderr)
    if as_json:
        sys.stderr.write(exc.info.model_dump_json() + "\n")
    else:
        prefix = "error: "
        for line in exc.info.render_lines():
            typer.echo(prefix + line, err=True)
    raise typer.Exit(int(exc.exit_code))


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned text table."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return "\n".join(lines)
