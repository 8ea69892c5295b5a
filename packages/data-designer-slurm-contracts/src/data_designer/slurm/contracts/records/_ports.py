"""``ports/<alias>-<replica>.<task>.json``: what one server task's launcher probed on its node (write-once).

The standalone launcher (``runtime/_launch.py``) writes these bytes itself with the standard library only;
a test keeps its schema name and version equal to :data:`PORT_SCHEMA`.
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt, PositiveInt

from data_designer.slurm.contracts._types import FROZEN
from data_designer.slurm.contracts.records._schema import RecordSchema


class PortRecord(BaseModel):
    """What one server task's launcher found on its node before exec'ing the server."""

    model_config = FROZEN

    alias: str
    replica: NonNegativeInt
    task: NonNegativeInt = Field(description="SLURM_PROCID of the task (one task per node of the replica).")
    bind_host: str
    port: PositiveInt
    hostname: str
    node: str | None = Field(default=None, description="SLURMD_NODENAME, when run by srun.")
    step_gpus: str | None = Field(default=None, description="SLURM_STEP_GPUS: the step's Slurm-assigned GPUs.")
    cuda_visible_devices: str | None = None
    pid: PositiveInt
    probed_at: AwareDatetime
    master_port: PositiveInt | None = Field(
        default=None,
        description="Rank 0 of a replica that spans nodes: the rendezvous port it probed for the other ranks "
        "('--master-port'); they wait for this record and take it from here.",
    )


PORT_SCHEMA: RecordSchema[PortRecord] = RecordSchema("replica-port", 1, PortRecord)
