"""Whether the login-node process behind a write-once claim may still be acting on it.

A claim (a retry intent, a benchmark child's binding) names who took it: user, host, pid, time. On this host the
holder is alive while its pid is; on another host (no way to ask) while the claim is younger than a grace period,
after which the claim may be taken over. The test seam is the :data:`Alive` callable every service accepts.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

from data_designer.slurm.contracts.records import Requester
from data_designer.slurm.runtime.store import Clock

Alive = Callable[[Requester], bool]
"""Whether the process that holds a claim may still be acting on it."""


def default_alive(grace_s: float, clock: Clock) -> Alive:
    """Alive while its pid is (this host), or for ``grace_s`` after it claimed (another host)."""
    host = socket.gethostname()

    def alive(who: Requester) -> bool:
        if who.host == host:
            return pid_alive(who.pid)
        return (clock() - who.time).total_seconds() <= grace_s

    return alive


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True
