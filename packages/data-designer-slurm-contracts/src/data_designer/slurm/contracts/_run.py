"""The run file: what a user authors to generate one dataset on a Slurm cluster.

A run is split into shards (one static allocation per shard). Each shard's allocation serves
the deployed model aliases (vLLM, or any OpenAI-compatible server started from an argv template)
and runs the Data Designer client against them; aliases not deployed may use an external
OpenAI-compatible endpoint whose API key is named by an environment variable.

Durations are integer seconds in keys ending in ``_s``; the Slurm time limit is a Slurm time
string. Memory is whole GB in keys ending in ``_gb``, each 1000 of Slurm's MB (``--mem=<gb * 1000>``); the plan
asks, per node, for the client's memory plus that of the replicas on the node. Every value that becomes a process
argument is printable text: safety comes from never passing authored text through a shell, not from rejecting
characters.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, NonNegativeInt, PositiveInt, model_validator
from pydantic_core import PydanticCustomError

from data_designer.slurm.contracts._limits import MAX_RECORDS
from data_designer.slurm.contracts._redact import excerpt
from data_designer.slurm.contracts._sbatch_option import SbatchOption
from data_designer.slurm.contracts._time_limit import TimeLimit
from data_designer.slurm.contracts._types import FROZEN, AbsolutePath, EnvVarName, Name, PrintableText, printable
from data_designer.slurm.contracts._urls import HttpEndpoint, UrlPath

RUN_SCHEMA_VERSION = 1


def _records_within_cap(value: int) -> int:
    """``value`` when at most ``MAX_RECORDS``; else an ``over_limit`` error (the ``_dd_index`` column is int64)."""
    if value > MAX_RECORDS:
        raise PydanticCustomError(
            "over_limit",
            "{value} records is above the limit of {cap} (every record's index must fit the int64 _dd_index column)",
            {
                "value": excerpt(f"{value:,}", 40),
                "cap": f"{MAX_RECORDS:,}",
                "hint": f"use at most {MAX_RECORDS:,} records; split larger datasets into several runs",
            },
        )
    return value


RecordCount = Annotated[PositiveInt, AfterValidator(_records_within_cap)]
"""A number of records: positive and at most ``MAX_RECORDS`` (so every ``_dd_index`` fits int64)."""

COMMAND_PLACEHOLDERS = ("host", "port", "model", "gpus", "served_name", "api_key_env")
"""Placeholders an argv template may use, written ``{host}``; ``{{`` and ``}}`` are literal braces."""

EngineArgValue = Annotated[str, AfterValidator(printable)] | int | float | bool | None
"""One engine argument value: a string (JSON text stays one argv element; printable, may be empty), a number, or a
boolean switch."""


class DataDesignerSource(BaseModel):
    """The Data Designer config: a file written by the host's config builder, or the config inline."""

    model_config = FROZEN

    config: AbsolutePath | None = Field(default=None, description="Path of a config file (YAML or JSON).")
    inline: dict[str, Any] | None = Field(default=None, description="The config itself, as a mapping.")

    @model_validator(mode="after")
    def _exactly_one(self) -> DataDesignerSource:
        if (self.config is None) == (self.inline is None):
            raise PydanticCustomError(
                "config_source",
                "set exactly one of 'config' and 'inline'",
                {"hint": "e.g. 'config: /abs/path/config.yaml'"},
            )
        return self


class Sharding(BaseModel):
    """How records are split: a shard count, or records per shard (the last shard may be smaller)."""

    model_config = FROZEN

    shards: PositiveInt | None = None
    records_per_shard: PositiveInt | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Sharding:
        if (self.shards is None) == (self.records_per_shard is None):
            raise PydanticCustomError(
                "sharding", "set exactly one of 'shards' and 'records_per_shard'", {"hint": "e.g. 'shards: 8'"}
            )
        return self


class VllmDeployment(BaseModel):
    """A model served by vLLM: ``replicas`` copies, each on ``tensor_parallel * pipeline_parallel`` GPUs."""

    model_config = FROZEN

    engine: Literal["vllm"]
    model: PrintableText = Field(description="Model path on the shared filesystem, or a Hugging Face id in the cache.")
    tensor_parallel: PositiveInt = 1
    pipeline_parallel: PositiveInt = Field(default=1, description="Pipeline stages; stages beyond one node span nodes.")
    replicas: PositiveInt = 1
    cpus_per_replica: PositiveInt = Field(default=4, description="CPUs the replica takes on each of its nodes.")
    memory_gb_per_replica: PositiveInt = Field(
        default=32, description="Memory (GB of 1000 MB) the replica takes on each of its nodes: its step's --mem."
    )
    engine_args: dict[str, EngineArgValue] = Field(
        default_factory=dict, description="Extra 'vllm serve' flags without leading dashes, e.g. {max-num-seqs: 256}."
    )
    image: PrintableText | None = Field(default=None, description="Container image: a registered name or a path.")
    vllm_version: Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?$")] | None = Field(
        default=None,
        description="The vLLM release the compute nodes run (e.g. 0.33.0), for a native install: the engine args are "
        "checked against that release's 'vllm serve'. A registered image's inspected vLLM is used instead when it "
        "has one (and must agree). Neither: the flags every supported release accepts.",
    )
    startup_timeout_s: PositiveInt = 1800
    environment: tuple[EnvVarName, ...] = Field(default=(), strict=False)


class CommandDeployment(BaseModel):
    """Any OpenAI-compatible server started from an argv template (SGLang, TensorRT-LLM, llama.cpp, test server)."""

    model_config = FROZEN

    engine: Literal["command"]
    argv: tuple[PrintableText, ...] = Field(strict=False, min_length=1, description="Program and arguments; no shell.")
    model: PrintableText
    gpus_per_replica: NonNegativeInt = 1
    cpus_per_replica: PositiveInt = 1
    memory_gb_per_replica: PositiveInt = Field(
        default=1, description="Memory (GB of 1000 MB) the replica takes on each of its nodes: its step's --mem."
    )
    replicas: PositiveInt = 1
    health_path: UrlPath = Field(default="/health", description="Absolute URL path polled on the replica's port.")
    image: PrintableText | None = None
    startup_timeout_s: PositiveInt = 600
    environment: tuple[EnvVarName, ...] = Field(default=(), strict=False)


Deployment = Annotated[VllmDeployment | CommandDeployment, Field(discriminator="engine")]


class ExternalEndpoint(BaseModel):
    """An alias served outside the allocation by an OpenAI-compatible endpoint."""

    model_config = FROZEN

    endpoint: HttpEndpoint = Field(
        description="http(s) base URL without user information, e.g. https://integrate.api.nvidia.com/v1."
    )
    api_key_env: EnvVarName | None = Field(default=None, description="Name of the variable holding the API key.")
    model: PrintableText | None = Field(default=None, description="Model name at the endpoint (default: the config's).")


class ClientSettings(BaseModel):
    """The Data Designer client inside each allocation."""

    model_config = FROZEN

    concurrency: dict[Name, PositiveInt] = Field(default_factory=dict, description="Parallel requests per model alias.")
    default_concurrency: PositiveInt = 32
    batch_size: PositiveInt = Field(default=100, description="Records per batch (the unit of progress and resume).")
    cpus: PositiveInt = Field(default=4, description="CPUs of the client on node 0 (the replicas there add theirs).")
    memory_gb: PositiveInt = Field(
        default=16, description="Memory (GB of 1000 MB) of the client on node 0 (the replicas there add theirs)."
    )
    image: PrintableText | None = None


class SubmissionSettings(BaseModel):
    """How shards are submitted: time limit, where, how many at once, draining before the limit."""

    model_config = FROZEN

    time_limit: TimeLimit | None = Field(default=None, description="--time per shard; default: the profile's.")
    partition: PrintableText | None = Field(default=None, description="Default: the profile's GPU partition.")
    account: PrintableText | None = Field(default=None, description="Default: the profile's account.")
    max_concurrent_shards: PositiveInt | None = Field(default=None, description="Array throttle (%N); none = no cap.")
    warning_lead_s: PositiveInt = Field(default=300, description="USR1 this long before the time limit.")
    drain_grace_s: PositiveInt = Field(default=120, description="Time in-flight requests get to finish on a warning.")
    requeue: bool = False
    exclusive: bool = False
    sbatch_options: tuple[SbatchOption, ...] = Field(default=(), strict=False)


class RunSpec(BaseModel):
    """A run file (``schema_version: 1``)."""

    model_config = FROZEN

    schema_version: Literal[1]
    name: Name
    data_designer: DataDesignerSource
    records: RecordCount
    sharding: Sharding
    seed: NonNegativeInt = Field(default=0, description="Run seed; each shard derives its own sampler seed from it.")
    deployments: dict[Name, Deployment] = Field(default_factory=dict, description="Served model aliases.")
    external: dict[Name, ExternalEndpoint] = Field(default_factory=dict, description="Aliases served elsewhere.")
    client: ClientSettings = ClientSettings()
    submission: SubmissionSettings = SubmissionSettings()

    @model_validator(mode="after")
    def _aliases_disjoint(self) -> RunSpec:
        both = sorted(set(self.deployments) & set(self.external))
        if both:
            raise PydanticCustomError(
                "alias_twice",
                "aliases {aliases} are both deployed and external",
                {
                    "aliases": ", ".join(both),
                    "hint": "serve each alias one way: remove it from 'deployments' or 'external'",
                },
            )
        return self
