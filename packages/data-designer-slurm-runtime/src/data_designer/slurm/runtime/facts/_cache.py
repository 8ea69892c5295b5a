"""The workspace's cache of cluster facts: ``<workspace_root>/cluster/facts.json``.

Fresh facts (read from Slurm less than :data:`FACTS_MAX_AGE` ago by the injected clock) are reused,
so ``execute`` asks Slurm only about once an hour; ``profile validate --probe`` always refreshes
them. The record is mutable with whole-file replacement (any reader of fresh facts may write it,
last writer wins); a missing, corrupt, foreign or future-dated record counts as no facts. One
workspace is assumed to serve one Slurm cluster (the record keeps ``ClusterName`` for review).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from data_designer.slurm.contracts import SchedulerFacts
from data_designer.slurm.contracts.records import FACTS_SCHEMA
from data_designer.slurm.runtime.facts._read import read_facts
from data_designer.slurm.runtime.scheduler import SlurmScheduler
from data_designer.slurm.runtime.store import Clock, FileModes, RecordOk, make_directories, read_record, replace_record

FACTS_MAX_AGE = timedelta(hours=1)
"""How long cached facts are reused before Slurm is asked again."""
FACTS_DIR = "cluster"
FACTS_RECORD = "facts.json"


def facts_path(workspace_root: Path | str) -> Path:
    return Path(workspace_root) / FACTS_DIR / FACTS_RECORD


@dataclass(frozen=True)
class FactsLookup:
    """Facts and where they came from: ``asked`` is True when Slurm was asked now (the cache is then stale)."""

    facts: SchedulerFacts
    asked: bool


def cached_facts(
    workspace_root: Path | str, clock: Clock, *, max_age: timedelta = FACTS_MAX_AGE
) -> SchedulerFacts | None:
    """The cached facts while fresh (``0 <= now - read_at <= max_age``); None otherwise."""
    result = read_record(facts_path(workspace_root), FACTS_SCHEMA)
    if not isinstance(result, RecordOk):
        return None
    age = clock() - result.payload.read_at
    return result.payload if timedelta(0) <= age <= max_age else None


def lookup_facts(
    scheduler: SlurmScheduler,
    workspace_root: Path | str,
    clock: Clock,
    *,
    refresh: bool = False,
    max_age: timedelta = FACTS_MAX_AGE,
) -> FactsLookup:
    """Fresh cached facts, or (``refresh``, stale or missing) facts asked from Slurm now; writes nothing."""
    if not refresh:
        cached = cached_facts(workspace_root, clock, max_age=max_age)
        if cached is not None:
            return FactsLookup(cached, asked=False)
    return FactsLookup(read_facts(scheduler, clock), asked=True)


def save_facts(workspace_root: Path | str, facts: SchedulerFacts, modes: FileModes, clock: Clock) -> Path:
    """Replace the cache with ``facts`` (creating ``cluster/`` with the workspace's modes)."""
    path = facts_path(workspace_root)
    make_directories(path.parent, modes)
    replace_record(path, FACTS_SCHEMA, facts, clock=clock, operation="facts.save")
    return path
