"""The error boundary of the ``slurm`` command group: whatever escapes a command is printed once, our way.

Click raises usage errors while it parses, before ``--json`` or ``--debug`` is bound, and the host
(``data-designer``) would print them in a Rich box, an unexpected exception as a Rich traceback and
Ctrl-C as a raw traceback. :class:`SlurmGroup` catches all of these in the two places Click enters a
command tree, ``make_context`` (the group's own options) and ``invoke`` (every subcommand's parsing
and body), so the same happens whether the host runs us or the Typer app runs standalone:

- the output mode is read from the words after ``slurm`` (:func:`output_mode`): ``--json`` (or
  ``--format json``) anywhere before ``--`` selects one JSON object on stderr, ``--debug`` a traceback;
- usage errors exit 2 (``invalid_input``, code ``usage_error``), interrupts 130 (``interrupted``),
  anything else 1 (``internal``), each rendered by :func:`~data_designer.slurm.cli._output.fail`;
- ``typer.Exit`` (``--help``, a command's own exit code) and the help shown for a group given no
  command pass through untouched.

Errors a command maps itself (inside ``_output.run``) never reach this boundary as exceptions: they
are printed there and leave as ``typer.Exit``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

import typer
from typer.core import TyperGroup

if TYPE_CHECKING:
    from data_designer.slurm.contracts import SlurmExtensionError

_MODE_KEY = "data_designer.slurm.output_mode"


class OutputMode(NamedTuple):
    """How errors are printed, as the command line asks (known before Click parses it)."""

    as_json: bool = False
    debug: bool = False
    operation: str = "slurm"
    command_path: str = "slurm"


def output_mode(group: TyperGroup, args: Sequence[str], prog: str = "slurm") -> OutputMode:
    """The mode ``args`` (the words after ``prog``, the group's command path) ask for, and the operation and command
    they name (``profile.init``, ``data-designer slurm profile init``).

    A word after ``--`` is an argument, never an option."""
    words = list(args)
    if "--" in words:
        words = words[: words.index("--")]
    as_json = "--json" in words or "--format=json" in words
    as_json = as_json or any(a == "--format" and b == "json" for a, b in itertools.pairwise(words))
    names = _command_words(group, words)
    return OutputMode(as_json, "--debug" in words, ".".join(names or [prog.split()[-1]]), " ".join([prog, *names]))


def _command_words(group: TyperGroup, words: Sequence[str]) -> list[str]:
    """The subcommand names ``words`` start with (``profile validate``), options between them skipped."""
    names: list[str] = []
    command: Any = group
    for word in words:
        if word.startswith("-"):
            continue
        if not isinstance(command, TyperGroup) or word not in command.commands:
            break
        names.append(word)
        command = command.commands[word]
    return names


class SlurmGroup(TyperGroup):
    """The ``slurm`` group (``typer.Typer(cls=SlurmGroup)``): every escaping error is printed once, ``--json``-aware."""

    # Contexts are typed Any: Typer's public API names only its Context subclass, not the vendored Click one.
    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        prog = " ".join(p for p in (getattr(parent, "command_path", ""), info_name or self.name or "slurm") if p)
        mode = output_mode(self, args, prog)
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except (Exception, KeyboardInterrupt) as exc:
            escalate(exc, mode)
        ctx.meta[_MODE_KEY] = mode
        return ctx

    def invoke(self, ctx: Any) -> Any:
        mode = ctx.meta.get(_MODE_KEY, OutputMode())
        try:
            return super().invoke(ctx)
        except (Exception, KeyboardInterrupt) as exc:
            escalate(exc, mode)


def escalate(exc: BaseException, mode: OutputMode) -> NoReturn:
    """Re-raise what Click handles itself (exits, help); print anything else once and exit with its code."""
    if isinstance(exc, typer.Exit) or type(exc).__name__ == "NoArgsIsHelpError":  # help for a bare group: not ours
        raise exc
    from data_designer.slurm.cli._output import fail

    try:
        error = _error_of(exc, mode)
    except Exception as bug:  # never let the boundary itself print a traceback
        error = _error_of(RuntimeError(f"{type(exc).__name__} while rendering {type(bug).__name__}"), mode)
    fail(error, as_json=mode.as_json, debug=mode.debug)


def _error_of(exc: BaseException, mode: OutputMode) -> SlurmExtensionError:
    from data_designer.slurm.cli._output import unexpected
    from data_designer.slurm.contracts import InternalError, InvalidInputError, SlurmExtensionError

    if isinstance(exc, SlurmExtensionError):
        return exc.with_operation(mode.operation)
    if isinstance(exc, typer.TyperException):  # Typer's Click exceptions: usage errors (exit 2) and the rest (1)
        key, message = _usage_parts(exc)
        path = getattr(getattr(exc, "ctx", None), "command_path", None) or mode.command_path
        kind = InvalidInputError if getattr(exc, "exit_code", 1) == 2 else InternalError
        error = kind(
            message,
            code="usage_error",
            operation=mode.operation,
            key_path=None if key is None else (key,),
            hint=f"see '{path} --help'",
        )
        error.__cause__ = exc
        return error
    return unexpected(exc, mode.operation, debug=mode.debug)


def _usage_parts(exc: typer.TyperException) -> tuple[str | None, str]:
    """The option or argument a usage error is about, and its message without that name repeated."""
    possibilities = getattr(exc, "possibilities", None)
    option = getattr(exc, "option_name", None)
    if isinstance(option, str) and possibilities is not None:  # an unknown option
        close = sorted(str(p) for p in possibilities)
        return option, "no such option" + (f" (did you mean {' or '.join(close)}?)" if close else "")
    param = getattr(exc, "param", None)
    if param is not None:
        opts = [o for o in getattr(param, "opts", []) if isinstance(o, str) and o.startswith("-")]
        argument = getattr(param, "metavar", None) or str(getattr(param, "name", "")).upper()
        name = next((o for o in opts if o.startswith("--")), opts[0] if opts else argument)
        raw = str(getattr(exc, "message", "") or "")
        return name, raw or f"missing {getattr(param, 'param_type_name', 'value')}"  # no message: a missing value
    return None, exc.format_message()
