"""Benchmark plans: a benchmark file expanded into ordered child runs, each with its compiled execution plan.

Children are ordered by the declared axes (the cartesian product, last axis varying fastest) with
repeats innermost. Repeats of one case share one plan (and plan digest); they differ by their
``repeat`` index and hence their ``child_id``. Like an :class:`ExecutionPlan`, a benchmark plan is
run-independent: its digest never covers a run id, a timestamp or a directory.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._benchmark import BenchmarkSpec
from data_designer.slurm.contracts._plan import ExecutionPlan, Unresolved
from data_designer.slurm.contracts._run import EngineArgValue
from data_designer.slurm.contracts._types import FROZEN

BENCHMARK_PLAN_SCHEMA_VERSION = 1

CaseValue = tuple[str, EngineArgValue]
"""One axis of a case: its label (e.g. ``concurrency.writer``, ``engine_arg.writer.max-num-seqs``) and value."""


class BenchmarkChild(BaseModel):
    """One child run of a benchmark: a case (one value per axis), a repeat, and its plan."""

    model_config = FROZEN

    child_id: str = Field(description="12 hex characters of sha256 over the benchmark digest, case, plan, repeat.")
    index: NonNegativeInt = Field(description="Position among the children (declared axis order, repeats innermost).")
    case: tuple[CaseValue, ...] = Field(description="(axis label, value) in declared axis order.")
    repeat: NonNegativeInt = Field(description="0-based repeat of the case.")
    records: PositiveInt = Field(description="Records the child generates (the benchmark's record policy).")
    plan: ExecutionPlan
    plan_digest: str


class BenchmarkPlan(BaseModel):
    """What a benchmark will run: every child with its compiled plan; identical inputs give identical digests."""

    model_config = FROZEN

    schema_version: Literal[1] = 1
    digest: str = Field(description="sha256 of the canonical JSON of every other field except the child ids.")
    benchmark: BenchmarkSpec = Field(
        description="The benchmark with its base run inline and every default spelled out."
    )
    children: tuple[BenchmarkChild, ...]
    unresolved: tuple[Unresolved, ...] = Field(
        default=(), description="What blocks submission until resolved, over all children (deduplicated)."
    )
    gpu_hours_upper_bound: float | None = Field(description="Sum over children; None while any child's is unknown.")
    exclusive: bool
    max_concurrent_children: PositiveInt
