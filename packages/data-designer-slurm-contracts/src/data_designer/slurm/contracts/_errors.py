"""The one error root of data-designer-slurm and its structured payload.

Tree::

    SlurmExtensionError            (root; every error we raise derives from it)
    +-- InvalidInputError          exit 2: a file, option or value is wrong; carries every Problem found
    +-- NotFoundError              exit 3: a named file, run, image or cluster does not exist
    +-- ConflictError              exit 4: the action would overwrite or contradict existing state
    +-- UnavailableError           exit 5: the scheduler or the shared filesystem cannot be reached
    +-- CheckFailedError           exit 6: an outcome check ran and failed (or could not run)
    +-- InternalError              exit 1: a bug or an unexpected condition
    +-- InterruptError             exit 130: the user interrupted the command (Ctrl-C, SIGINT)

Each error carries an :class:`ErrorInfo` value (code, operation, file, key path, line, hint and
the list of problems) so that the CLI can render one line per problem, or a JSON object, and
services can return or inspect it without parsing messages. A key path is a :data:`KeyPath`, the keys and
list indices from the document's root (``("clusters", "a", "sbatch_options", 2)``), so a key that holds a dot
stays one key; it is text only where it is shown (:func:`format_key_path`: ``clusters.a.sbatch_options[2]``), and
``--json`` writes it as that array. Messages, hints and key paths pass
through :func:`~data_designer.slurm.contracts._redact.redact` when an error or problem is built,
so a secret-shaped string never reaches a terminal, a log or ``--json`` (see ``_redact.py``).
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_validator

from data_designer.slurm.contracts._redact import redact

KeyPath: TypeAlias = tuple[str | int, ...]
"""Where a value is in a document: its keys and list indices from the root (``()`` is the root itself)."""


class ErrorCategory(StrEnum):
    """What kind of failure an error is; decides the exit code."""

    INTERNAL = "internal"
    INVALID_INPUT = "invalid_input"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    UNAVAILABLE = "unavailable"
    CHECK_FAILED = "check_failed"
    INTERRUPTED = "interrupted"


class ExitCode(IntEnum):
    """Stable process exit codes of every ``data-designer slurm`` command."""

    OK = 0
    INTERNAL = 1
    INVALID_INPUT = 2
    NOT_FOUND = 3
    CONFLICT = 4
    UNAVAILABLE = 5
    CHECK_FAILED = 6
    INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


EXIT_CODE_BY_CATEGORY: dict[ErrorCategory, ExitCode] = {
    ErrorCategory.INTERNAL: ExitCode.INTERNAL,
    ErrorCategory.INVALID_INPUT: ExitCode.INVALID_INPUT,
    ErrorCategory.NOT_FOUND: ExitCode.NOT_FOUND,
    ErrorCategory.CONFLICT: ExitCode.CONFLICT,
    ErrorCategory.UNAVAILABLE: ExitCode.UNAVAILABLE,
    ErrorCategory.CHECK_FAILED: ExitCode.CHECK_FAILED,
    ErrorCategory.INTERRUPTED: ExitCode.INTERRUPTED,
}


def safe_text(text: str) -> str:
    """``text`` as an error may show it: secrets redacted, lone surrogates escaped (so it always encodes as UTF-8)."""
    return redact(text).encode("utf-8", "backslashreplace").decode("utf-8")


def format_key_path(path: KeyPath) -> str:
    """``("clusters", "a", "sbatch_options", 2)`` -> ``clusters.a.sbatch_options[2]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _safe_key_path(path: KeyPath | None) -> KeyPath | None:
    return None if path is None else tuple(safe_text(part) if isinstance(part, str) else part for part in path)


class Problem(BaseModel):
    """One thing wrong with an input: where it is and how to fix it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str = Field(description="Stable machine-readable problem code, e.g. 'unknown_key'.")
    message: str
    file: str | None = None
    line: int | None = None
    key_path: KeyPath | None = Field(
        default=None, description="The offending key from the root, e.g. ['clusters', 'a', 'account']."
    )
    hint: str | None = Field(default=None, description="How to fix it.")

    @field_validator("message", "hint")
    @classmethod
    def _redacted(cls, value: str | None) -> str | None:
        return None if value is None else safe_text(value)

    _redacted_key = field_validator("key_path")(_safe_key_path)

    def render(self) -> str:
        """One human line: ``file:line: key: message (fix: hint)``."""
        where = ""
        if self.file is not None:
            where = self.file if self.line is None else f"{self.file}:{self.line}"
            where += ": "
        key = f"{format_key_path(self.key_path)}: " if self.key_path else ""
        fix = f" (fix: {self.hint})" if self.hint else ""
        return f"{where}{key}{self.message}{fix}"


class ErrorInfo(BaseModel):
    """The structured payload of every error; what ``--json`` prints on stderr."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    category: ErrorCategory
    exit_code: int
    code: str
    operation: str
    message: str
    file: str | None = None
    key_path: KeyPath | None = None
    line: int | None = None
    hint: str | None = None
    problems: tuple[Problem, ...] = ()

    @field_validator("message", "hint")
    @classmethod
    def _redacted(cls, value: str | None) -> str | None:
        return None if value is None else safe_text(value)

    _redacted_key = field_validator("key_path")(_safe_key_path)

    def render_lines(self) -> list[str]:
        """Human lines: one per problem, or one for the error itself."""
        if self.problems:
            return [p.render() for p in self.problems]
        return [
            Problem(
                code=self.code,
                message=self.message,
                file=self.file,
                line=self.line,
                key_path=self.key_path,
                hint=self.hint,
            ).render()
        ]


class SlurmExtensionError(Exception):
    """Root of every error raised by data-designer-slurm."""

    category: ErrorCategory = ErrorCategory.INTERNAL
    default_code: str = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        operation: str = "",
        file: str | None = None,
        key_path: KeyPath | None = None,
        line: int | None = None,
        hint: str | None = None,
        problems: tuple[Problem, ...] | list[Problem] = (),
    ) -> None:
        message = safe_text(message)
        super().__init__(message)
        self.info = ErrorInfo(
            category=self.category,
            exit_code=int(EXIT_CODE_BY_CATEGORY[self.category]),
            code=code or self.default_code,
            operation=operation,
            message=message,
            file=file,
            key_path=key_path,
            line=line,
            hint=hint,
            problems=tuple(problems),
        )

    @property
    def exit_code(self) -> ExitCode:
        return EXIT_CODE_BY_CATEGORY[self.category]

    @property
    def problems(self) -> tuple[Problem, ...]:
        return self.info.problems

    def with_operation(self, operation: str) -> SlurmExtensionError:
        """Return the same error stamped with the operation that raised it (if none was set)."""
        if not self.info.operation:
            self.info = self.info.model_copy(update={"operation": operation})
        return self

    def with_context(self, where: str, *, hint: str) -> SlurmExtensionError:
        """Return the same error, its message prefixed with ``where`` it happened and its hint replaced by ``hint``."""
        self.info = self.info.model_copy(update={"message": f"{where}: {self.info.message}", "hint": hint})
        return self


class InvalidInputError(SlurmExtensionError):
    category = ErrorCategory.INVALID_INPUT
    default_code = "invalid_input"

    @classmethod
    def from_problems(
        cls, problems: list[Problem], *, operation: str = "", file: str | None = None, total: int | None = None
    ) -> InvalidInputError:
        """One error for ``problems``; ``total``: how many there were when only some are listed (a capped list)."""
        first = problems[0]
        count = len(problems) if total is None else max(total, len(problems))
        summary = (
            first.render() if count == 1 else f"{count} problems in {file or 'the input'}; first: {first.render()}"
        )
        return cls(
            summary,
            code=first.code if count == 1 else "invalid_input",
            operation=operation,
            file=file or first.file,
            key_path=first.key_path,
            line=first.line,
            hint=first.hint,
            problems=problems,
        )


class NotFoundError(SlurmExtensionError):
    category = ErrorCategory.NOT_FOUND
    default_code = "not_found"


class ConflictError(SlurmExtensionError):
    category = ErrorCategory.CONFLICT
    default_code = "conflict"


class UnavailableError(SlurmExtensionError):
    category = ErrorCategory.UNAVAILABLE
    default_code = "unavailable"


class CheckFailedError(SlurmExtensionError):
    category = ErrorCategory.CHECK_FAILED
    default_code = "check_failed"


class InternalError(SlurmExtensionError):
    category = ErrorCategory.INTERNAL
    default_code = "internal_error"


class InterruptError(SlurmExtensionError):
    category = ErrorCategory.INTERRUPTED
    default_code = "interrupted"
