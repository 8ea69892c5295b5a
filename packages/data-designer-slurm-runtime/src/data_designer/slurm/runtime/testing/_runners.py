"""Command-runner wrappers for tests: count calls, lose sbatch replies, take commands down.

They wrap any :class:`CommandRunner` (the fake or a real :class:`SubprocessRunner`), so the same
failure is injected the same way against the fake and the real local cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from data_designer.slurm.runtime.scheduler import CommandResult, CommandRunner


class CountingRunner:
    """Delegates every call and records its argv."""

    def __init__(self, inner: CommandRunner) -> None:
        self.inner = inner
        self.calls: list[tuple[str, ...]] = []
        self.environments: list[tuple[str, ...]] = []
        """Per call, the names (never the values) of the variables it added."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        stdin: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> CommandResult:
        self.calls.append(tuple(argv))
        self.environments.append(tuple(sorted(environment or {})))
        return self.inner.run(argv, timeout_s=timeout_s, stdin=stdin, environment=environment)

    def count(self, command: str) -> int:
        return sum(1 for argv in self.calls if argv and argv[0] == command)


class ReplyLosingRunner(CountingRunner):
    """Runs sbatch for real, then loses the reply of the next ``count`` accepted submissions (as a timeout)."""

    def __init__(self, inner: CommandRunner, *, count: int) -> None:
        super().__init__(inner)
        self.remaining = count

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        stdin: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> CommandResult:
        result = super().run(argv, timeout_s=timeout_s, stdin=stdin, environment=environment)
        if argv and argv[0] == "sbatch" and result.ok and self.remaining > 0:
            self.remaining -= 1
            return CommandResult(result.argv, None, "", "", timeout_s, timed_out=True)
        return result


class OutageRunner(CountingRunner):
    """Answers the ``down`` commands as missing from PATH and delegates the others."""

    def __init__(self, inner: CommandRunner, *, down: Iterable[str]) -> None:
        super().__init__(inner)
        self.down = frozenset(down)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        stdin: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> CommandResult:
        if argv and argv[0] in self.down:
            self.calls.append(tuple(argv))
            self.environments.append(tuple(sorted(environment or {})))
            message = f"[Errno 2] No such file or directory: {argv[0]!r}"
            return CommandResult(tuple(argv), None, "", message, 0.0, not_found=True)
        return super().run(argv, timeout_s=timeout_s, stdin=stdin, environment=environment)
