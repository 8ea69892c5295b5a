"""The one seam between data-designer-slurm and the Slurm command-line tools.

Every ``sbatch``, ``squeue``, ``sacct``, ``scancel``, ``scontrol``, ``sinfo`` and ``sacctmgr``
call goes through a :class:`CommandRunner`. The production runner, :class:`SubprocessRunner`,
runs an argv (never a shell) with a timeout on every call and returns a :class:`CommandResult`
value: it never raises for a failing, missing or hanging command; the adapter decides what a
failure means. It starts only the programs it is built for: the Slurm commands by default, or another
allowlist (``programs=``; the image inspection's ``unsquashfs``).

Environment allowlist. A child process sees only these variables:

* passed through when set in the parent (or in ``env=``): ``PATH``, ``HOME``, ``USER``,
  ``LOGNAME``, ``SLURM_CONF`` (which cluster), ``KRB5CCNAME`` (sites with Kerberos-authenticated
  Slurm) and ``TMPDIR``;
* forced: ``TZ=UTC`` and ``SLURM_TIME_FORMAT=standard`` (every time the tools print is an
  ISO-8601 UTC time), ``LC_ALL=C`` and ``LANG=C`` (no localised dates, messages or decimals).

A call may add variables for itself (``environment=``): ``sbatch`` receives exactly the variables a
run names (the profile's ``environment``, a deployment's ``environment``, an external endpoint's
``api_key_env``), so the job's ``--export=ALL,<names>`` carries their values by environment alone,
never on an argv or in a file.

Everything else is dropped on purpose: ``SBATCH_*``, ``SQUEUE_FORMAT``, ``SACCT_FORMAT``,
``SLURM_*`` input variables and friends silently change what the tools submit or print. A job
submitted through this runner therefore starts from this small environment (``sbatch``
exports the submitting environment by default); batch scripts set what they need.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from data_designer.slurm.contracts import InternalError

SLURM_COMMANDS: frozenset[str] = frozenset({"sbatch", "squeue", "sacct", "scancel", "scontrol", "sinfo", "sacctmgr"})
"""The only programs a :class:`SubprocessRunner` starts."""

PASSED_ENV_VARS: tuple[str, ...] = ("PATH", "HOME", "USER", "LOGNAME", "SLURM_CONF", "KRB5CCNAME", "TMPDIR")
FORCED_ENV: Mapping[str, str] = {"TZ": "UTC", "SLURM_TIME_FORMAT": "standard", "LC_ALL": "C", "LANG": "C"}
DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What one command did: exit status, both streams, how long it took and how it ended.

    ``returncode`` is ``None`` when the process never finished (``timed_out``) or never started
    (``not_found``, or another OS error described in ``stderr``).
    """

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    not_found: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        """One line for error messages: how the command ended and the tail of its stderr."""
        name = self.argv[0] if self.argv else "?"
        if self.timed_out:
            how = f"{name} timed out after {self.duration_s:.1f}s"
        elif self.not_found:
            how = f"{name} was not found on PATH"
        elif self.returncode is None:
            how = f"{name} could not be started"
        else:
            how = f"{name} exited {self.returncode}"
        tail = self.stderr.strip().splitlines()[-3:]
        return how + (": " + " | ".join(tail) if tail else "")


class CommandRunner(Protocol):
    """Runs one Slurm command; implementations never raise for a failing command."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        stdin: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run ``argv``; ``environment`` adds variables for this call only (``sbatch``'s named variables)."""
        ...


def allowlisted_environment(source: Mapping[str, str]) -> dict[str, str]:
    """The environment a Slurm command sees: the allowlisted variables of ``source`` plus the forced ones."""
    env = {name: source[name] for name in PASSED_ENV_VARS if name in source}
    env.update(FORCED_ENV)
    return env


def _text(value: str | bytes | None) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


class SubprocessRunner:
    """Runs Slurm commands as subprocesses: argv only, allowlisted environment, a timeout on every call."""

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        umask: int | None = None,
        programs: frozenset[str] = SLURM_COMMANDS,
    ) -> None:
        base = dict(os.environ if env is None else env)
        base.update(overrides or {})
        self._env = allowlisted_environment(base)
        self._monotonic = monotonic
        # sbatch hands its umask to the job (SLURM_UMASK): the workspace's, so slurm-*.out is as private as the run
        self._umask = -1 if umask is None else umask
        self._programs = programs

    @property
    def environment(self) -> Mapping[str, str]:
        return dict(self._env)

    @property
    def umask(self) -> int | None:
        """The umask every command runs under (``sbatch`` hands it to the job), or None for the caller's."""
        return None if self._umask < 0 else self._umask

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        stdin: str | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> CommandResult:
        args = tuple(argv)
        if not args or os.path.basename(args[0]) not in self._programs:
            raise InternalError(
                f"refusing to run {args[:1]!r}: not one of this runner's programs",
                code="command_not_allowed",
                operation="run_slurm_command",
                hint=f"use one of {sorted(self._programs)}",
            )
        if timeout_s <= 0:
            raise InternalError(f"timeout must be positive, got {timeout_s!r}", operation="run_slurm_command")
        start = self._monotonic()
        try:
            done = subprocess.run(
                args,
                input=stdin,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                env=self._env if not environment else {**self._env, **environment},
                timeout=timeout_s,
                check=False,
                shell=False,
                stdin=None if stdin is not None else subprocess.DEVNULL,
                umask=self._umask,
            )
        except subprocess.TimeoutExpired as exc:
            return CommandResult(
                args, None, _text(exc.stdout), _text(exc.stderr), self._monotonic() - start, timed_out=True
            )
        except FileNotFoundError as exc:
            return CommandResult(args, None, "", str(exc), self._monotonic() - start, not_found=True)
        except OSError as exc:
            return CommandResult(args, None, "", f"cannot start {args[0]!r}: {exc}", self._monotonic() - start)
        return CommandResult(args, done.returncode, done.stdout, done.stderr, self._monotonic() - start)
