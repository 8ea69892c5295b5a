"""Cluster facts: read from Slurm in two calls (``sinfo``, ``scontrol show config``), cached in the workspace."""

from data_designer.slurm.runtime.facts._cache import (
    FACTS_DIR,
    FACTS_MAX_AGE,
    FACTS_RECORD,
    FactsLookup,
    cached_facts,
    facts_path,
    lookup_facts,
    save_facts,
)
from data_designer.slurm.runtime.facts._read import read_facts, scheduler_facts

__all__ = [
    "FACTS_DIR",
    "FACTS_MAX_AGE",
    "FACTS_RECORD",
    "FactsLookup",
    "cached_facts",
    "facts_path",
    "lookup_facts",
    "read_facts",
    "save_facts",
    "scheduler_facts",
]
