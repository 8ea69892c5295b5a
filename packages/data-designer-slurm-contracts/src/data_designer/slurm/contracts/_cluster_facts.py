"""What Slurm says about its partitions and limits, as values: the facts a plan is checked against.

:class:`SchedulerFacts` is what one ``sinfo`` and one ``scontrol show config`` call tell (read by
the runtime, cached in the workspace as ``cluster/facts.json`` with the time they were read);
:class:`PartitionFacts` is one partition of it. Nodes of one partition may differ: each distinct
shape (CPUs, memory, GPUs) is one :class:`NodeShape` with its node count, so a check can ask how
many nodes offer a given shape. None means Slurm did not say (``infinite`` time, an unreadable
GRES), never zero.
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._types import FROZEN


class NodeShape(BaseModel):
    """Nodes of one partition with the same CPUs, memory and GPUs."""

    model_config = FROZEN

    cpus: PositiveInt = Field(description="CPUs per node (sinfo %c).")
    memory_mb: NonNegativeInt = Field(description="RealMemory per node in MB (sinfo %m).")
    gpus: NonNegativeInt | None = Field(description="GPUs per node from the GRES (sinfo %G); None: unreadable.")
    gres: str | None = Field(default=None, description="The GRES as sinfo printed it.")
    nodes: PositiveInt = Field(description="How many nodes of the partition have this shape.")


class PartitionFacts(BaseModel):
    """One partition: its nodes by shape and its time limit (MaxTime)."""

    model_config = FROZEN

    name: str
    default: bool = False
    nodes: NonNegativeInt = Field(description="Nodes in the partition, in any state.")
    shapes: tuple[NodeShape, ...] = Field(default=(), description="Distinct node shapes, most nodes first.")
    max_time_s: PositiveInt | None = Field(default=None, description="MaxTime in seconds; None: infinite.")
    max_time: str = Field(default="infinite", description="MaxTime as sinfo printed it (%l).")

    def nodes_fitting(self, *, cpus: int = 0, memory_mb: int = 0, gpus: int = 0) -> int:
        """How many nodes offer at least ``cpus`` CPUs, ``memory_mb`` MB and ``gpus`` GPUs each."""
        return sum(
            s.nodes
            for s in self.shapes
            if s.cpus >= cpus and s.memory_mb >= memory_mb and (gpus == 0 or (s.gpus or 0) >= gpus)
        )


class SchedulerFacts(BaseModel):
    """The cluster's partitions and MaxArraySize, with when they were read (the cache's payload)."""

    model_config = FROZEN

    read_at: AwareDatetime = Field(description="When Slurm was asked (the reader's clock, UTC).")
    cluster_name: str | None = Field(default=None, description="scontrol show config's ClusterName.")
    max_array_size: PositiveInt | None = Field(default=None, description="MaxArraySize; None: not printed.")
    partitions: tuple[PartitionFacts, ...] = ()

    def partition(self, name: str) -> PartitionFacts | None:
        return next((p for p in self.partitions if p.name == name), None)
