"""Waiting for a record another process writes, for tests and benchmarks that follow a run from outside, and the
run's logs to print when they give up."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from data_designer.slurm.contracts.records import RecordSchema
from data_designer.slurm.runtime.polling import poll
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record

M = TypeVar("M", bound=BaseModel)


def wait_for_record(
    path: Path,
    schema: RecordSchema[M],
    *,
    timeout_s: float,
    accept: Callable[[M], bool] | None = None,
    poll_s: float = 0.05,
    describe: Callable[[], str] | None = None,
) -> M:
    """The payload at ``path`` once it reads ``RecordOk`` (and ``accept`` takes it); re-read every ``poll_s``.

    Raises ``TimeoutError`` after ``timeout_s`` naming the path and the last read, followed by ``describe()``
    (a run's logs, say) when given.
    """
    for _ in poll(timeout_s, poll_s, clock=time.monotonic):
        found = read_record(path, schema)
        if isinstance(found, RecordOk) and (accept is None or accept(found.payload)):
            return found.payload
    detail = f"\n{describe()}" if describe is not None else ""
    raise TimeoutError(f"no accepted {path} after {timeout_s:.0f}s (last read: {found}){detail}")


def run_logs(layout: RunLayout, *, tail_chars: int = 2000) -> str:
    """The end of every log of a run (Slurm's ``slurm-*`` files, then each attempt's ``logs/``), each headed by
    its path: what a test or benchmark prints when a run did not end as expected."""
    run_dir = layout.run_dir
    files = sorted(run_dir.glob("slurm-*")) + sorted(run_dir.glob("shards/*/*/*/logs/*"))
    return "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-tail_chars:]}" for p in files)
