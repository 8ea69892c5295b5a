"""Finding processes by their command line, for tests that must prove nothing was left running."""

from __future__ import annotations

import os
from pathlib import Path


def command_lines() -> dict[int, list[str]]:
    """Every other process of this host: pid -> argv (processes that vanish or hide their cmdline are skipped)."""
    found: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if words and words[-1] == b"":
            words.pop()
        found[int(entry.name)] = [word.decode(errors="replace") for word in words]
    return found


def processes_mentioning(text: str) -> list[int]:
    """Pids of the processes whose command line (words joined by spaces) contains ``text``."""
    return sorted(pid for pid, argv in command_lines().items() if text in " ".join(argv))
