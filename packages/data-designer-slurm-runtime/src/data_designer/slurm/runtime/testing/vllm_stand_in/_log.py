"""The stand-in's start log: one JSON line per process start, appended with one ``write(2)`` (``O_APPEND``).

A line: ``{"argv", "args", "error", "rank", "hostname", "slurm_procid", "slurmd_nodename", "cuda_visible_devices",
"api_key_set", "pid", "time"}``. ``argv`` is the command line as called, starting with ``vllm`` (an ``--api-key``
value, which the stand-in refuses, is redacted); ``args`` the parsed :class:`VllmServeArgs` as an object (``null`` when
the command line was refused, ``error`` then says why); ``rank`` the node rank; the three Slurm/CUDA variables are
``null`` when unset; ``api_key_set`` whether ``VLLM_API_KEY`` was set and not empty (its value is never written);
``time`` is UTC (``2026-01-02T03:04:05.123456Z``).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from data_designer.slurm.runtime.testing.vllm_stand_in._args import API_KEY_ENV, VllmServeArgs, redacted


@dataclass(frozen=True)
class VllmStandInStart:
    """One logged start of the ``vllm`` stand-in."""

    argv: tuple[str, ...]
    """The command line as called, starting with ``vllm``."""
    args: VllmServeArgs | None
    """What it parsed to; None when the stand-in refused it (``error``)."""
    error: str | None
    hostname: str
    slurm_procid: str | None
    slurmd_nodename: str | None
    cuda_visible_devices: str | None
    api_key_set: bool
    pid: int
    time: str

    @property
    def rank(self) -> int | None:
        return self.args.node_rank if self.args is not None else None


def start_line(
    argv: Sequence[str], args: VllmServeArgs | None, error: str | None, environ: Mapping[str, str]
) -> dict[str, Any]:
    """The log entry of this process's start (``argv``: the words after ``vllm``)."""
    return {
        "argv": ["vllm", *redacted(argv)],
        "args": args.to_json() if args is not None else None,
        "error": error,
        "rank": args.node_rank if args is not None else None,
        "hostname": socket.gethostname(),
        "slurm_procid": environ.get("SLURM_PROCID"),
        "slurmd_nodename": environ.get("SLURMD_NODENAME"),
        "cuda_visible_devices": environ.get("CUDA_VISIBLE_DEVICES"),
        "api_key_set": bool(environ.get(API_KEY_ENV)),
        "pid": os.getpid(),
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }


def append_start(path: Path, entry: Mapping[str, Any]) -> None:
    """Append ``entry`` as one line, in one write (lines of concurrent ranks never interleave)."""
    data = (json.dumps(entry, sort_keys=True) + "\n").encode()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, data)
    finally:
        os.close(descriptor)


def read_vllm_stand_in_log(path: Path) -> list[VllmStandInStart]:
    """Every start logged in ``path``, in the order they were appended (empty when nothing was logged)."""
    if not path.exists():
        return []
    starts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        args = VllmServeArgs.from_json(entry["args"]) if entry["args"] is not None else None
        starts.append(
            VllmStandInStart(
                argv=tuple(entry["argv"]),
                args=args,
                error=entry["error"],
                hostname=entry["hostname"],
                slurm_procid=entry["slurm_procid"],
                slurmd_nodename=entry["slurmd_nodename"],
                cuda_visible_devices=entry["cuda_visible_devices"],
                api_key_set=entry["api_key_set"],
                pid=entry["pid"],
                time=entry["time"],
            )
        )
    return starts
