"""Results of dry runs (``execute --dry-run``, ``benchmark run --dry-run``): what a plan would do, offline.

A dry run compiles against the profile only (no Slurm, no workspace, no image bytes): GPUs per
node come from the profile (``auto`` stays unresolved), MaxArraySize is Slurm's default unless
given, and images named from the registry stay unresolved. Anything unresolved blocks submission.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._benchmark_plan import CaseValue
from data_designer.slurm.contracts._plan import ClusterFacts, PlanWarning, Unresolved
from data_designer.slurm.contracts._types import FROZEN

DRY_RUN_ID = "dry-run"
"""The run id a dry run binds its submission units with (a real submission binds its own)."""


class AliasSummary(BaseModel):
    """One model alias the client talks to: served in the allocation, or by an external endpoint."""

    model_config = FROZEN

    alias: str
    kind: Literal["deployed", "external"]
    engine: Literal["vllm", "command"] | None = Field(description="None for an external endpoint.")
    model: str
    replicas: NonNegativeInt = Field(description="Replicas in each allocation; 0 for an external endpoint.")
    gpus_per_replica: NonNegativeInt
    concurrency: PositiveInt = Field(description="Parallel requests the client sends to the alias.")
    endpoint: str | None = Field(default=None, description="External base URL.")


class PlanSummary(BaseModel):
    """The reviewable numbers of one execution plan."""

    model_config = FROZEN

    name: str = Field(description="The run's name.")
    digest: str = Field(description="The plan digest (run-independent).")
    config_digest: str
    records: PositiveInt
    shards: NonNegativeInt
    allocations: NonNegativeInt = Field(description="Static allocations: one per shard.")
    array_jobs: NonNegativeInt = Field(description="sbatch --array submissions the shards are chunked into.")
    nodes_per_allocation: PositiveInt | None = Field(description="None while GPUs per node are unresolved.")
    gpus_per_node: PositiveInt | None
    gpus_per_allocation: NonNegativeInt = Field(description="GPUs used by all replicas of one allocation.")
    partition: str
    account: str | None
    time_limit: str
    gpu_hours_upper_bound: float | None = Field(
        description="Shards x nodes x GPUs held per node x time limit; None while unresolved."
    )
    aliases: tuple[AliasSummary, ...]
    unresolved: tuple[Unresolved, ...] = Field(description="What blocks submission until resolved.")
    warnings: tuple[PlanWarning, ...]
    submittable: bool = Field(description="Nothing is unresolved.")


class DryRunOutput(BaseModel):
    """What ``--out DIR`` wrote: the plan (canonical JSON), the batch script and the submission unit."""

    model_config = FROZEN

    directory: str = Field(description="Absolute path of the output directory.")
    files: tuple[str, ...] = Field(description="Files written, relative to the directory, in writing order.")
    overwritten: bool = Field(description="Whether the directory held files before (allowed only with --force).")


class RunDryRun(BaseModel):
    """The result of ``data-designer slurm execute RUN --dry-run``."""

    model_config = FROZEN

    run_file: str
    profile_file: str
    cluster: str
    facts: ClusterFacts = Field(description="The cluster facts the plan was compiled with (offline defaults).")
    plan: PlanSummary
    output: DryRunOutput | None = None


class ChildSummary(BaseModel):
    """One child of a benchmark dry run: its case, repeat and the numbers of its plan."""

    model_config = FROZEN

    child_id: str
    index: NonNegativeInt
    case: tuple[CaseValue, ...] = Field(description="(axis label, value) in declared axis order.")
    repeat: NonNegativeInt
    records: PositiveInt
    plan_digest: str
    nodes_per_allocation: PositiveInt | None
    gpus_per_allocation: NonNegativeInt
    gpu_hours_upper_bound: float | None
    submittable: bool


class BenchmarkDryRun(BaseModel):
    """The result of ``data-designer slurm benchmark run BENCH --dry-run``."""

    model_config = FROZEN

    benchmark_file: str
    profile_file: str
    cluster: str
    facts: ClusterFacts
    name: str
    digest: str = Field(description="The benchmark plan digest (run-independent).")
    cases: NonNegativeInt = Field(description="Distinct cases (one value per axis); each runs 'repeats' times.")
    repeats: PositiveInt
    exclusive: bool
    max_concurrent_children: PositiveInt
    children: tuple[ChildSummary, ...] = Field(description="In run order: declared axis order, repeats innermost.")
    gpu_hours_upper_bound: float | None = Field(description="Sum over children; None while any child's is unknown.")
    unresolved: tuple[Unresolved, ...] = Field(description="What blocks submission, over all children.")
    warnings: tuple[PlanWarning, ...] = Field(description="Plan warnings over all children (each once).")
    submittable: bool
    output: DryRunOutput | None = None
