"""The benchmark file: a base run and sweep axes, expanded into ordered child runs.

Children are ordinary runs of one shard each (one allocation measured per child), recognised
again by their plan digests. Axes expand in declared order with repeats innermost.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, PositiveFloat, PositiveInt, model_validator
from pydantic_core import PydanticCustomError

from data_designer.slurm.contracts._limits import MAX_AXIS_VALUES
from data_designer.slurm.contracts._run import EngineArgValue, RecordCount
from data_designer.slurm.contracts._types import FROZEN, AbsolutePath, Name, PrintableText

BENCHMARK_SCHEMA_VERSION = 1


def _axis_values_within_cap(value: Any) -> Any:
    """Refuse an axis of more than ``MAX_AXIS_VALUES`` values (``over_limit``) before its values are validated."""
    if isinstance(value, list | tuple) and len(value) > MAX_AXIS_VALUES:
        raise PydanticCustomError(
            "over_limit",
            "the axis has {count} values, above the limit of {cap}",
            {
                "count": f"{len(value):,}",
                "cap": f"{MAX_AXIS_VALUES:,}",
                "hint": f"sweep at most {MAX_AXIS_VALUES:,} values per axis, or split the sweep into several "
                "benchmarks",
            },
        )
    return value


_CappedAxis = BeforeValidator(_axis_values_within_cap)


class BaseRun(BaseModel):
    """The run every child starts from: a run file path, or the run inline."""

    model_config = FROZEN

    run: AbsolutePath | None = None
    inline: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> BaseRun:
        if (self.run is None) == (self.inline is None):
            raise PydanticCustomError(
                "base_run", "set exactly one of 'run' and 'inline'", {"hint": "e.g. 'run: /abs/path/run.yaml'"}
            )
        return self


class ConcurrencyAxis(BaseModel):
    model_config = FROZEN
    axis: Literal["concurrency"]
    alias: Name
    values: Annotated[tuple[PositiveInt, ...], _CappedAxis] = Field(strict=False, min_length=1)


class TensorParallelAxis(BaseModel):
    model_config = FROZEN
    axis: Literal["tensor_parallel"]
    alias: Name
    values: Annotated[tuple[PositiveInt, ...], _CappedAxis] = Field(strict=False, min_length=1)


class ReplicasAxis(BaseModel):
    model_config = FROZEN
    axis: Literal["replicas"]
    alias: Name
    values: Annotated[tuple[PositiveInt, ...], _CappedAxis] = Field(strict=False, min_length=1)


class NodesAxis(BaseModel):
    """Nodes per allocation: the alias gets as many replicas as fill that many nodes."""

    model_config = FROZEN
    axis: Literal["nodes"]
    alias: Name
    values: Annotated[tuple[PositiveInt, ...], _CappedAxis] = Field(strict=False, min_length=1)


class EngineArgAxis(BaseModel):
    model_config = FROZEN
    axis: Literal["engine_arg"]
    alias: Name
    arg: PrintableText = Field(description="Flag without leading dashes, e.g. max-num-seqs.")
    values: Annotated[tuple[EngineArgValue, ...], _CappedAxis] = Field(strict=False, min_length=1)


class ModelAxis(BaseModel):
    model_config = FROZEN
    axis: Literal["model"]
    alias: Name
    values: Annotated[tuple[PrintableText, ...], _CappedAxis] = Field(strict=False, min_length=1)


class ImageAxis(BaseModel):
    model_config = FROZEN
    axis: Literal["image"]
    alias: Name | None = Field(default=None, description="The deployment whose image varies; none = the client's.")
    values: Annotated[tuple[PrintableText, ...], _CappedAxis] = Field(strict=False, min_length=1)


Axis = Annotated[
    ConcurrencyAxis | TensorParallelAxis | ReplicasAxis | NodesAxis | EngineArgAxis | ModelAxis | ImageAxis,
    Field(discriminator="axis"),
]


class FixedRecords(BaseModel):
    """Every child generates the same number of records."""

    model_config = FROZEN
    policy: Literal["fixed"]
    records: RecordCount


class ScaledRecords(BaseModel):
    """Records scale with the child's total concurrency, within bounds (enough work to reach steady state)."""

    model_config = FROZEN
    policy: Literal["scaled"]
    per_concurrency: PositiveInt
    min_records: PositiveInt
    max_records: RecordCount

    @model_validator(mode="after")
    def _bounds(self) -> ScaledRecords:
        if self.min_records > self.max_records:
            raise PydanticCustomError(
                "record_bounds", "min_records exceeds max_records", {"hint": "make min_records <= max_records"}
            )
        return self


RecordPolicy = Annotated[FixedRecords | ScaledRecords, Field(discriminator="policy")]


class AnalysisTargets(BaseModel):
    """What the analysis projects and recommends for."""

    model_config = FROZEN
    total_records: PositiveInt | None = None
    gpu_budget_hours: PositiveInt | None = None
    target_runtime_per_job_s: PositiveInt | None = None
    max_error_rate: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="A case whose failed / sent requests exceed this is infeasible (never best nor on the Pareto "
        "set); 0: any failed request does.",
    )
    max_p95_latency_s: PositiveFloat | None = Field(
        default=None, description="A case whose p95 request latency exceeds this (seconds) is infeasible."
    )


class BenchmarkSpec(BaseModel):
    """A benchmark file (``schema_version: 1``)."""

    model_config = FROZEN

    schema_version: Literal[1]
    name: Name
    base: BaseRun
    axes: tuple[Axis, ...] = Field(strict=False, default=())
    repeats: PositiveInt = 1
    records: RecordPolicy
    exclusive: bool = Field(default=True, description="Children run on exclusive nodes (no noisy neighbours).")
    max_concurrent_children: PositiveInt = 1
    targets: AnalysisTargets = AnalysisTargets()
