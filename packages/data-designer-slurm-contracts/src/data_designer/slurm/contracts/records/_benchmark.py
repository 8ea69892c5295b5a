"""A benchmark's records: ``benchmarks/<id>/benchmark.json``, its child bindings, and a child run's link back.

A benchmark directory is named by the benchmark's id, ``<name>-<first 12 hex of its digest>``: equal input gives
the same id (the benchmark is reused), any value that changes the digest gives a new one. Its record holds digests
and summaries only (each child's plan lives in the child's run directory). A child is bound to its run by
``children/<child id>.json``, written once (``link(2)``) *before* the run directory is created: of two
``benchmark run`` processes exactly one creates each child's run. A binding whose holder is gone before the run was
submitted is taken over through ``children/<child id>.resume-<k>`` (write-once, like a retry's resume claim).
The child run's own ``benchmark.json`` says which benchmark and child it is.
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._benchmark import AnalysisTargets
from data_designer.slurm.contracts._benchmark_plan import CaseValue
from data_designer.slurm.contracts._plan import ClusterFacts
from data_designer.slurm.contracts._types import FROZEN, Name, PrintableText
from data_designer.slurm.contracts.records._inputs import InputFile
from data_designer.slurm.contracts.records._retry import Requester
from data_designer.slurm.contracts.records._schema import RecordSchema

BENCHMARK_ID_DIGEST_HEX = 12
"""Hex characters of the benchmark digest in its id (``<name>-<digest prefix>``)."""


class BenchmarkChildEntry(BaseModel):
    """One child of a benchmark as its record lists it: the case, the repeat and the plan's digest (not the plan)."""

    model_config = FROZEN

    index: NonNegativeInt = Field(description="Position among the children (declared axis order, repeats innermost).")
    child_id: str = Field(pattern=r"^[0-9a-f]{12}$")
    case: tuple[CaseValue, ...] = Field(strict=False, description="(axis label, value) in declared axis order.")
    repeat: NonNegativeInt
    records: PositiveInt
    plan_digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    nodes: PositiveInt | None = Field(description="Nodes per allocation (None while unknown offline).")
    gpus: NonNegativeInt = Field(description="GPUs per allocation.")
    gpu_hours_upper_bound: NonNegativeFloat | None = None


class BenchmarkRecord(BaseModel):
    """``benchmarks/<id>/benchmark.json``: what the benchmark is, written once before any child is bound."""

    model_config = FROZEN

    benchmark_id: str
    name: Name
    digest: str = Field(pattern=r"^[0-9a-f]{64}$", description="The benchmark plan's digest (planner.expand).")
    created_at: AwareDatetime
    created_by: Requester
    benchmark_file: str = Field(description="Absolute path of the benchmark file when it was first run.")
    profile_file: str
    cluster: Name
    facts: ClusterFacts = Field(description="The cluster facts the children were compiled with.")
    exclusive: bool
    max_concurrent_children: PositiveInt
    cases: PositiveInt
    repeats: PositiveInt
    axes: tuple[PrintableText, ...] = Field(strict=False, description="The axis labels, in declared order.")
    targets: AnalysisTargets
    gpu_hours_upper_bound: NonNegativeFloat | None = None
    children: tuple[BenchmarkChildEntry, ...] = Field(strict=False, min_length=1)
    inputs: tuple[InputFile, ...] = Field(
        strict=False, description="The benchmark file, its base run and Data Designer config, copied under inputs/."
    )


class ChildBinding(BaseModel):
    """``benchmarks/<id>/children/<child id>.json``: the run id of one child, claimed before its run exists."""

    model_config = FROZEN

    child_id: str = Field(pattern=r"^[0-9a-f]{12}$")
    index: NonNegativeInt
    run_id: PrintableText
    claimed_by: Requester


class ChildResumeClaim(BaseModel):
    """``children/<child id>.resume-<k>``: the k-th process that took over a binding whose run was never submitted."""

    model_config = FROZEN

    child_id: str = Field(pattern=r"^[0-9a-f]{12}$")
    resume: PositiveInt
    claimed_by: Requester


class BenchmarkLink(BaseModel):
    """A child run's ``benchmark.json``: the benchmark and child it belongs to (written before ``run.json``)."""

    model_config = FROZEN

    benchmark_id: str
    benchmark_dir: str
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    child_id: str = Field(pattern=r"^[0-9a-f]{12}$")
    index: NonNegativeInt
    case: tuple[CaseValue, ...] = Field(strict=False)
    repeat: NonNegativeInt


BENCHMARK_SCHEMA: RecordSchema[BenchmarkRecord] = RecordSchema("benchmark", 1, BenchmarkRecord)
CHILD_BINDING_SCHEMA: RecordSchema[ChildBinding] = RecordSchema("benchmark-binding", 1, ChildBinding)
CHILD_RESUME_SCHEMA: RecordSchema[ChildResumeClaim] = RecordSchema("benchmark-resume", 1, ChildResumeClaim)
BENCHMARK_CHILD_SCHEMA: RecordSchema[BenchmarkLink] = RecordSchema("benchmark-child", 1, BenchmarkLink)
