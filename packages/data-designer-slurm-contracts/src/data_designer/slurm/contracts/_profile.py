"""Cluster profiles: where and how runs execute on one or more named Slurm clusters.

A profile file is authored YAML (or JSON) with ``schema_version: 1``. It never holds secrets:
only the names of environment variables to pass through.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, Field, PositiveInt, model_validator
from pydantic_core import PydanticCustomError

from data_designer.slurm.contracts._redact import excerpt
from data_designer.slurm.contracts._sbatch_option import SbatchOption
from data_designer.slurm.contracts._time_limit import TimeLimit
from data_designer.slurm.contracts._types import FROZEN, AbsolutePath, EnvVarName, Name, PrintableText

PROFILE_SCHEMA_VERSION = 1
PROFILE_ENV_VAR = "DATA_DESIGNER_SLURM_PROFILE"
"""Environment variable naming the profile file when ``--profile`` is not given."""

GpuRequestStyle = Literal["gres", "whole_node"]
ContainerRuntime = Literal["none", "pyxis", "apptainer"]
WorkspaceSharing = Literal["private", "group"]
"""Who may read a run's files: the owner alone (dirs 0700, files 0600) or the owner's group too (0770 with
setgid, 0660). Input snapshots never get more than their source file's permissions."""


def _exact_int(value: object) -> object:
    # Literal[1] alone accepts True and 1.0: they compare and hash equal to 1.
    if isinstance(value, bool | float):
        raise PydanticCustomError(
            "int_type", "input should be a whole number, not {value}", {"value": excerpt(value), "hint": "write 1"}
        )
    return value


class Partitions(BaseModel):
    """Slurm partitions for GPU work (model servers) and CPU work (probes, merges, image imports)."""

    model_config = FROZEN

    gpu: PrintableText
    cpu: PrintableText


class ComputePython(BaseModel):
    """The Python environment on compute nodes: an interpreter path, or a client image by name or path."""

    model_config = FROZEN

    interpreter: AbsolutePath | None = None
    image: PrintableText | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ComputePython:
        if (self.interpreter is None) == (self.image is None):
            raise PydanticCustomError(
                "compute_python",
                "set exactly one of 'interpreter' and 'image'",
                {"hint": "e.g. 'interpreter: /shared/venvs/dd/bin/python' (a venv with data-designer-slurm installed)"},
            )
        return self


class HuggingFaceCache(BaseModel):
    """Hugging Face cache settings exported to model servers."""

    model_config = FROZEN

    hf_home: AbsolutePath | None = Field(default=None, description="HF_HOME on compute nodes (a shared path).")
    offline: bool = Field(default=True, description="Export HF_HUB_OFFLINE=1: compute nodes read the cache only.")


class ClusterProfile(BaseModel):
    """Everything needed to plan and submit work on one Slurm cluster."""

    model_config = FROZEN

    workspace_root: AbsolutePath = Field(
        description="Shared-filesystem directory visible from login and compute nodes."
    )
    account: PrintableText | None = Field(
        default=None, description="Slurm account (--account); none uses the user's default."
    )
    partitions: Partitions
    gpus_per_node: PositiveInt | Literal["auto"] = "auto"
    gpu_request: GpuRequestStyle = "gres"
    container_runtime: ContainerRuntime = "none"
    compute_python: ComputePython
    default_time_limit: TimeLimit = "04:00:00"
    # Lists arrive from YAML/JSON as lists: the tuple fields alone accept them (strict=False); items stay strict.
    sbatch_options: tuple[SbatchOption, ...] = Field(default=(), strict=False)
    environment: tuple[EnvVarName, ...] = Field(
        default=(), strict=False, description="Names of variables passed to jobs."
    )
    huggingface: HuggingFaceCache = HuggingFaceCache()
    workspace_sharing: WorkspaceSharing = Field(
        default="private",
        description="'private': run directories 0700 and files 0600; 'group': 0770 (setgid) and 0660, so the "
        "workspace root's group can read and write every run.",
    )


class Profile(BaseModel):
    """A profile file: named clusters and which one is the default."""

    model_config = FROZEN

    schema_version: Annotated[Literal[1], BeforeValidator(_exact_int)]
    default_cluster: Name | None = None
    clusters: dict[Name, ClusterProfile] = Field(min_length=1)

    @model_validator(mode="after")
    def _default_exists(self) -> Profile:
        if self.default_cluster is not None and self.default_cluster not in self.clusters:
            raise PydanticCustomError(
                "unknown_cluster",
                "default_cluster {name} is not one of the clusters",
                {"name": repr(self.default_cluster), "hint": f"use one of: {', '.join(sorted(self.clusters))}"},
            )
        return self

    def cluster_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.clusters))

    def resolve_cluster_name(self, name: str | None) -> str | None:
        """The cluster ``--cluster NAME`` selects: the name, else the default, else the only one; None if ambiguous or unknown."""
        if name is not None:
            return name if name in self.clusters else None
        if self.default_cluster is not None:
            return self.default_cluster
        if len(self.clusters) == 1:
            return next(iter(self.clusters))
        return None
