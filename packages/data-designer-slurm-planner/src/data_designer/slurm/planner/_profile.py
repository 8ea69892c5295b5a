"""Cluster profiles: strict loading and the commented template ``profile init`` writes (pure)."""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass

from data_designer.slurm.contracts import (
    PROFILE_SCHEMA_VERSION,
    ClusterProfile,
    InvalidInputError,
    NotFoundError,
    Profile,
)
from data_designer.slurm.planner._document import parse_document
from data_designer.slurm.planner._sbatch_options import (
    RESERVED_SBATCH_OPTIONS,
    canonical_sbatch_options,
    validate_with_sbatch_options,
)
from data_designer.slurm.planner._validation import validate_document


def load_profile(text: str, *, file: str) -> Profile:
    """Parse and validate a profile; every problem is reported at once with file, line and key path.

    Each cluster's ``sbatch_options`` come back canonical (``--long-name=value``), as sbatch will read them.
    """
    document = parse_document(text, file=file)
    clusters = document.data.get("clusters") if isinstance(document.data, dict) else None
    paths = [("clusters", name, "sbatch_options") for name in clusters] if isinstance(clusters, dict) else []
    profile = validate_with_sbatch_options(
        lambda: validate_document(Profile, document, operation="profile.load"),
        document,
        paths,
        operation="profile.load",
    )
    canonical = {
        name: cluster.model_copy(update={"sbatch_options": canonical_sbatch_options(cluster.sbatch_options)})
        for name, cluster in profile.clusters.items()
    }
    return profile.model_copy(update={"clusters": canonical})


def select_cluster(
    profile: Profile, cluster: str | None, *, file: str, operation: str = "profile.select"
) -> tuple[str, ClusterProfile]:
    """The cluster ``--cluster NAME`` names (else the default, else the only one): NotFoundError (exit 3) for a
    name the profile lacks, InvalidInputError (exit 2) when several clusters and no default leave it open."""
    name = profile.resolve_cluster_name(cluster)
    if name is None:
        names = ", ".join(profile.cluster_names())
        if cluster is not None:
            raise NotFoundError(
                f"cluster {cluster!r} is not in the profile",
                code="cluster_not_found",
                operation=operation,
                file=file,
                key_path=("clusters",),
                hint=f"use --cluster with one of: {names}",
            )
        raise InvalidInputError(
            "the profile has several clusters and no default_cluster",
            code="cluster_ambiguous",
            operation=operation,
            file=file,
            key_path=("default_cluster",),
            hint=f"pass --cluster NAME (one of: {names}) or set default_cluster",
        )
    return name, profile.clusters[name]


@dataclass(frozen=True)
class ProfileTemplate:
    """What ``profile init`` asks for; everything else gets a commented default."""

    cluster: str = "default"
    workspace_root: str = "/shared/data-designer-slurm"
    account: str | None = None
    gpu_partition: str = "gpu"
    cpu_partition: str = "cpu"
    gpus_per_node: int | str = "auto"
    gpu_request: str = "gres"
    container_runtime: str = "none"
    python: str = "/usr/bin/python3"
    default_time_limit: str = "04:00:00"


# Characters a YAML reader refuses (C1 controls, U+FFFE, U+FFFF) or reads as a line break (NEL), escaped in _q.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\ufffe\uffff]")


def _q(value: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar; with the characters YAML treats specially escaped,
    # any printable text survives unchanged.
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False))


def _reserved_comment() -> str:
    names = ", ".join(RESERVED_SBATCH_OPTIONS) + "."
    return textwrap.fill(
        names, width=100, initial_indent="    #   ", subsequent_indent="    #   ", break_on_hyphens=False
    )


def render_profile(template: ProfileTemplate) -> str:
    """The commented, versioned profile file for ``template`` (YAML)."""
    account = _q(template.account) if template.account is not None else "null"
    gpus = template.gpus_per_node if isinstance(template.gpus_per_node, int) else _q(template.gpus_per_node)
    return f"""\
# data-designer-slurm cluster profile.
# Validate with: data-designer slurm profile validate --profile THIS_FILE
# Secrets never go here: list the NAMES of environment variables under `environment`.
schema_version: {PROFILE_SCHEMA_VERSION}

# The cluster used when --cluster is not given.
default_cluster: {_q(template.cluster)}

clusters:
  {_q(template.cluster)}:
    # Shared-filesystem directory visible from login and compute nodes (absolute path).
    workspace_root: {_q(template.workspace_root)}
    # Slurm account (--account); null uses your default account.
    account: {account}
    # Partitions for GPU work (model servers) and CPU work (probes, merges, image imports).
    partitions:
      gpu: {_q(template.gpu_partition)}
      cpu: {_q(template.cpu_partition)}
    # GPUs per node: a number, or "auto" to read it from the cluster's GRES (profile validate --probe).
    gpus_per_node: {gpus}
    # How GPUs are requested: "gres" (--gres=gpu:N) or "whole_node" (--exclusive, all GPUs of each node).
    gpu_request: {_q(template.gpu_request)}
    # Container runtime on compute nodes: "none", "pyxis" (pyxis/enroot) or "apptainer".
    container_runtime: {_q(template.container_runtime)}
    # Python on compute nodes with data-designer-slurm installed: an interpreter path, or `image: NAME`.
    compute_python:
      interpreter: {_q(template.python)}
    # Default --time for jobs (minutes, "HH:MM:SS" or "D-HH:MM:SS"; quote it).
    default_time_limit: {_q(template.default_time_limit)}
    # Extra sbatch options, one "--name=value" per item; no shell parses them. Abbreviations and short
    # letters are read as sbatch reads them. Refused however spelled (the plan sets them, or they break
    # the submission):
{_reserved_comment()}
    sbatch_options: []
    # Names of environment variables passed to jobs (never their values), e.g. [HF_TOKEN].
    environment: []
    # Hugging Face cache on compute nodes.
    huggingface:
      hf_home: null
      offline: true
    # Who may read the runs: "private" (directories 0700, files 0600) or "group" (directories 0770 with
    # setgid, files 0660: the group of workspace_root reads and writes every run).
    workspace_sharing: "private"
"""
