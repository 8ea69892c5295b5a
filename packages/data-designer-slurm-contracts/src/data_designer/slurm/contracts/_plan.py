"""Execution plans: the immutable, reviewable result of compiling a run file against a profile.

Plan identity is run-independent: :attr:`ExecutionPlan.digest` covers what will be computed and
how (resolved run, config digest, layout, argv, script), never a run id, job name, timestamp or
run-directory path; those are bound at submission (:class:`SubmissionBinding`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt, model_validator

from data_designer.slurm.contracts._cluster_facts import PartitionFacts
from data_designer.slurm.contracts._errors import Problem
from data_designer.slurm.contracts._profile import WorkspaceSharing
from data_designer.slurm.contracts._ranges import IndexRange
from data_designer.slurm.contracts._run import RunSpec
from data_designer.slurm.contracts._scheduler import ArrayTaskBinding
from data_designer.slurm.contracts._types import FROZEN

PLAN_SCHEMA_VERSION = 1


class ClusterFacts(BaseModel):
    """What the planner knows about the cluster beyond the profile (probed by the runtime; defaults offline)."""

    model_config = FROZEN

    gpus_per_node: PositiveInt | None = Field(
        default=None, description="None: unknown (profile says auto, not probed)."
    )
    max_array_size: PositiveInt = Field(default=1001, description="Slurm MaxArraySize: array indices are < this.")
    partitions: tuple[PartitionFacts, ...] = Field(
        default=(),
        description="The partitions as Slurm described them (nodes, CPUs, memory, GPUs, MaxTime); empty: not asked "
        "(a dry run without --cluster-check). Never part of a plan: compile reads only the two fields above.",
    )

    def partition(self, name: str) -> PartitionFacts | None:
        return next((p for p in self.partitions if p.name == name), None)


class ImageRecord(BaseModel):
    """A registered container image as the planner sees it (no bytes read)."""

    model_config = FROZEN

    name: str
    path: str
    kind: Literal["squashfs", "sif", "other"] = "other"
    digest: str | None = None
    role: Literal["serving", "client"] | None = Field(default=None, description="As registered ('image add --role').")
    python: str | None = Field(default=None, description="The image's Python (e.g. 3.11); None: undetermined.")
    versions: dict[str, str | None] | None = Field(
        default=None,
        description="What the registry's inspection found, per distribution (vllm, data-designer, ours): its "
        "version, or None where undetermined. None: not inspected, and the planner checks nothing of the image "
        "(as of an image named by absolute path).",
    )


class Unresolved(BaseModel):
    """Something the planner could not know offline; it blocks submission until resolved."""

    model_config = FROZEN

    what: Literal["image", "gpus_per_node"]
    key_path: str
    detail: str
    hint: str

    def problem(self) -> Problem:
        """The problem it is when a plan must be submittable (its key path, plan text, as one key)."""
        return Problem(
            code="unresolved",
            message=f"{self.what} is unresolved: {self.detail}",
            key_path=(self.key_path,),
            hint=self.hint,
        )


class PlanWarning(BaseModel):
    model_config = FROZEN

    code: str
    key_path: str | None = None
    message: str


class ShardPlan(BaseModel):
    """One shard: its global record-index range ``[start, stop)`` and its sampler seed."""

    model_config = FROZEN

    shard: NonNegativeInt
    start: NonNegativeInt
    stop: PositiveInt
    seed: NonNegativeInt

    @property
    def records(self) -> int:
        return self.stop - self.start

    @property
    def range(self) -> IndexRange:
        """The shard's global record indices ``[start, stop)``."""
        return IndexRange(self.start, self.stop)


class ImagePlan(BaseModel):
    model_config = FROZEN

    reference: str = Field(description="As authored: a registered name or a path.")
    path: str | None = Field(default=None, description="Resolved path; None while unresolved.")
    digest: str | None = Field(default=None, description="The registered image's integrity digest, when known.")
    runtime: Literal["pyxis", "apptainer"]


class ReplicaPlan(BaseModel):
    """One server replica: where it runs in the allocation and exactly how it is started."""

    model_config = FROZEN

    alias: str
    replica: NonNegativeInt
    engine: Literal["vllm", "command"]
    served_name: str
    node_indices: tuple[NonNegativeInt, ...] | None = Field(
        default=None, description="Nodes of the allocation (0-based) this replica uses; None while GPUs/node unknown."
    )
    gpus_per_node: NonNegativeInt = Field(description="GPUs the replica's step takes on each of its nodes.")
    gpu_indices: tuple[NonNegativeInt, ...] | None = Field(
        default=None,
        description="On each of its nodes, the 0-based positions among the job's GPUs there; None while unknown.",
    )
    gpus: NonNegativeInt = Field(description="GPUs in total (tensor x pipeline parallel for vLLM).")
    cpus: PositiveInt = Field(description="CPUs the replica's step takes on each of its nodes (srun --cpus-per-task).")
    memory_mb: PositiveInt = Field(
        description="Memory the replica's step takes on each of its nodes, MB (srun --mem): the deployment's "
        "memory_gb_per_replica x 1000. Explicit, so no step takes all of the job's memory and blocks the next."
    )
    argv: tuple[str, ...] = Field(
        description="Exact argv template: '{host}' and '{port}' are bound in the allocation (bind probe); a per-attempt "
        "key travels only in the environment (DDSLURM_SERVER_API_KEY; vLLM reads VLLM_API_KEY); '{{' and '}}' are "
        "literal braces (the planner's bind_argv). A replica that spans nodes runs one argv per node rank "
        "('rank_argv'); this is its rank 0's."
    )
    rank_argv: tuple[tuple[str, ...], ...] = Field(
        default=(),
        description="A vLLM replica that spans nodes: the argv template of each node rank (index = rank = the "
        "step's task on that node; rank 0 serves the API, the others run '--headless'), which also holds "
        "'{master_addr}' (the step's first node, resolved in the allocation) and '{master_port}' (probed there by "
        "rank 0's launcher). Empty: every task of the step runs 'argv'.",
    )
    environment: dict[str, str] = Field(description="Variables set for the server (values planned here, no secrets).")
    pass_environment: tuple[str, ...] = Field(
        description="Names of the job's variables this replica sees (the profile's 'environment' and the "
        "deployment's); the job's other named variables are removed from its step."
    )
    bind: Literal["loopback", "all"] = Field(
        description="Loopback when the replica runs only on node 0 (the client's); all interfaces otherwise."
    )
    requires_api_key: bool = Field(
        description="A per-attempt key generated in the allocation is required on every request (vLLM through "
        "VLLM_API_KEY; a command engine through {api_key_env}), on loopback too."
    )
    health_path: str
    startup_timeout_s: PositiveInt
    image: ImagePlan | None = None

    @model_validator(mode="after")
    def _ranks_match(self) -> ReplicaPlan:
        if self.rank_argv:
            if self.rank_argv[0] != self.argv:
                raise ValueError("rank_argv[0] must be argv (rank 0's argv)")
            if self.node_indices is not None and len(self.rank_argv) != len(self.node_indices):
                raise ValueError(f"rank_argv has {len(self.rank_argv)} ranks for {len(self.node_indices)} nodes")
        return self

    @property
    def ranks(self) -> int:
        """Tasks of the replica's step: one per node."""
        return len(self.node_indices) if self.node_indices else 1


class EndpointPlan(BaseModel):
    """How the client reaches one model alias."""

    model_config = FROZEN

    alias: str
    kind: Literal["deployed", "external"]
    model: str
    endpoint: str | None = Field(default=None, description="External base URL; deployed endpoints are bound at start.")
    api_key_env: str | None = None
    replicas: tuple[NonNegativeInt, ...] = ()
    concurrency: PositiveInt


class ClientPlan(BaseModel):
    """The Data Designer client worker of each allocation."""

    model_config = FROZEN

    argv: tuple[str, ...] = Field(
        description="Argv template of the worker: '{shard}' and '{attempt}' are bound per array task; '{{'/'}}' are braces."
    )
    batch_size: PositiveInt
    cpus: PositiveInt
    memory_gb: PositiveInt
    memory_mb: PositiveInt = Field(
        description="The client's memory on node 0, MB (client.memory_gb x 1000): part of the job's memory there "
        "(the client runs in the batch step), or its own step's --mem when it runs in a pyxis image."
    )
    endpoints: tuple[EndpointPlan, ...]
    pass_environment: tuple[str, ...] = Field(
        default=(),
        description="Names of the job's variables the client sees (the profile's 'environment' and the external "
        "endpoints' api_key_env); the job's other named variables are removed from its environment.",
    )
    image: ImagePlan | None = None


class AllocationPlan(BaseModel):
    """One shard's static allocation (every shard gets the same shape)."""

    model_config = FROZEN

    nodes: PositiveInt | None = Field(description="None while GPUs per node are unknown.")
    gpus_per_node: NonNegativeInt | None
    gpus: NonNegativeInt = Field(description="GPUs used by all replicas together.")
    cpus_per_node: PositiveInt | None = Field(description="CPUs per task on each node; None while nodes are unknown.")
    memory_mb_per_node: PositiveInt | None = Field(
        description="Memory the allocation needs on each node, MB: the most any one node holds of the client's "
        "memory (node 0: client.memory_gb x 1000) plus the memory_mb of the replicas placed there. The batch "
        "script asks for it with '--mem=<this>' (per node; every node gets the same), or for all of each node's "
        "memory with '--mem=0' when the allocation is exclusive, where this is the least a node must have. "
        "None while nodes are unknown."
    )
    partition: str
    account: str | None
    time_limit: str
    time_limit_s: PositiveInt
    exclusive: bool
    requeue: bool
    warning_lead_s: PositiveInt
    drain_grace_s: PositiveInt
    workspace_sharing: WorkspaceSharing = Field(
        default="private",
        description="The profile's: the modes (and umask) of everything the allocation writes in the run directory.",
    )
    replicas: tuple[ReplicaPlan, ...]
    client: ClientPlan


class ChunkLayout(BaseModel):
    """One array chunk before binding: array spec, index offset and index -> (shard, attempt)."""

    model_config = FROZEN

    chunk: NonNegativeInt
    array_spec: str
    index_offset: NonNegativeInt
    tasks: tuple[ArrayTaskBinding, ...]


class SubmissionLayout(BaseModel):
    """The batch script and chunking of the shards; job names and paths are bound at submission."""

    model_config = FROZEN

    script: str | None = Field(description="The batch script; None while the node count is unresolved.")
    sbatch_args: tuple[str, ...] = Field(description="Authored sbatch options (argv elements, never in the script).")
    environment: tuple[str, ...] = Field(
        default=(),
        description="Names of the variables the submitting environment passes to the job (sbatch --export); "
        "their values are never written to any file.",
    )
    chunks: tuple[ChunkLayout, ...]


class ExecutionPlan(BaseModel):
    """What a run will compute and how; identical inputs give identical plans and digests."""

    model_config = FROZEN

    schema_version: Literal[1] = 1
    digest: str = Field(description="sha256 of the canonical JSON of every other field.")
    run: RunSpec = Field(description="The run with every default spelled out.")
    cluster: str
    config_digest: str
    shards: tuple[ShardPlan, ...]
    allocation: AllocationPlan
    submission: SubmissionLayout
    gpu_hours_upper_bound: float | None
    unresolved: tuple[Unresolved, ...] = ()
    warnings: tuple[PlanWarning, ...] = ()


class SubmissionBinding(BaseModel):
    """What binds a plan to one run at submission: ids, names and paths (outside the plan digest)."""

    model_config = FROZEN

    run_id: str
    run_dir: str
    job_name_prefix: str
