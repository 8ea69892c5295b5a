"""What every call of one client passes to the services: the profile and cluster, and the injectable seams."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_designer.slurm.runtime.scheduler import CommandRunner
from data_designer.slurm.runtime.store import Clock, RunIdFactory, system_clock
from data_designer.slurm.services.client._progress import ProgressMode


@dataclass(frozen=True)
class Session:
    """The services' common keyword arguments (``profile``, ``cluster``, ``environ``, ``runner``, ``clock``) and the
    client's own seams: ``id_factory`` (new run ids), ``sleep``/``monotonic`` (waits), ``progress`` (wait display),
    ``files_dir`` (where the client writes the run and config files it makes)."""

    profile: str | Path | None = None
    cluster: str | None = None
    environ: Mapping[str, str] | None = None
    runner: CommandRunner | None = None
    clock: Clock = system_clock
    id_factory: RunIdFactory | None = None
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    progress: ProgressMode = "auto"
    files_dir: str | Path | None = None

    def located(self) -> dict[str, Any]:
        """``profile``, ``cluster``, ``environ``: what every service takes."""
        return {"profile": self.profile, "cluster": self.cluster, "environ": self.environ}

    def observed(self) -> dict[str, Any]:
        """:meth:`located` plus ``runner`` and ``clock``: what a service that asks Slurm takes."""
        return {**self.located(), "runner": self.runner, "clock": self.clock}
