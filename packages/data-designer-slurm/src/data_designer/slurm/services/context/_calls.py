"""Counting the scheduler calls a service makes: every command it runs through the one injected runner."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from data_designer.slurm.runtime.scheduler import CommandResult, CommandRunner, SubprocessRunner


class CountingRunner:
    """A :class:`CommandRunner` that forwards to ``inner`` and counts the commands (what a result reports)."""

    def __init__(self, inner: CommandRunner) -> None:
        self.inner = inner
        self.calls = 0
        self.commands: dict[str, int] = {}
        """Calls per command name (``sbatch``, ``squeue``, ``sacct``, ...)."""
        self._lock = threading.Lock()  # squeue and sacct of one observation run on two threads

    @property
    def concurrent(self) -> bool:
        """Whether the scheduler may run two commands at once (a real process runner)."""
        return isinstance(self.inner, SubprocessRunner)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        stdin: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> CommandResult:
        with self._lock:
            self.calls += 1
            name = argv[0] if argv else ""
            self.commands[name] = self.commands.get(name, 0) + 1
        return self.inner.run(argv, timeout_s=timeout_s, stdin=stdin, environment=environment)
