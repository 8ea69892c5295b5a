"""Results of the ``profile`` commands: the values their services return and ``--json`` prints."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from data_designer.slurm.contracts._probe import ProbeReport
from data_designer.slurm.contracts._types import FROZEN


class ClusterSummary(BaseModel):
    """One cluster of a validated profile, as shown by ``profile validate``."""

    model_config = FROZEN

    name: str
    selected: bool
    workspace_root: str
    account: str | None
    gpu_partition: str
    cpu_partition: str
    gpus_per_node: int | Literal["auto"]
    gpu_request: str
    container_runtime: str
    compute_python: str
    default_time_limit: str
    sbatch_options: tuple[str, ...]
    environment: tuple[str, ...]


class ProfileValidation(BaseModel):
    """``profile validate``: the profile loaded strictly, with the selected cluster (and its probe, with ``--probe``)."""

    model_config = FROZEN

    file: str
    schema_version: int
    selected_cluster: str
    clusters: tuple[ClusterSummary, ...]
    probe: ProbeReport | None = Field(default=None, description="The probe of the selected cluster (--probe only).")


class ProfileInitResult(BaseModel):
    """``profile init``: the file written and the cluster it describes."""

    model_config = FROZEN

    file: str
    cluster: str
    schema_version: int
    overwritten: bool
