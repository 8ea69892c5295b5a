"""Runs on the local Slurm cluster for benchmarks: a one-alias run document and ``data-designer slurm execute``.

The run serves one alias, ``writer``, with the in-tree test server (``command`` engine, one fake GPU per
replica) for a config of one sampler column and one LLM text column; the caller chooses records, shards,
replicas, server flags and client and submission settings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from data_designer.slurm.contracts import ExecuteResult
from data_designer.slurm.planner import ProfileTemplate, render_profile
from data_designer.slurm.runtime.testing import TEST_SERVER


def slurm_env() -> dict[str, str]:
    """What the Slurm commands need from this process's environment (the cluster's ``SLURM_CONF``, ``PATH``)."""
    return {k: v for k, v in os.environ.items() if k in ("SLURM_CONF", "PATH")}


def writer_run(
    *,
    name: str,
    records: int,
    shards: int,
    model: str,
    replicas: int = 1,
    server_flags: Sequence[str] = (),
    client: Mapping[str, Any] | None = None,
    submission: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A run document: ``records`` in ``shards``, alias ``writer`` served as ``model`` by ``replicas`` test servers."""
    server = [*TEST_SERVER, "--host", "{host}", "--port", "{port}", "--model", "{model}"]
    server += ["--replica-id", "writer-{port}", *server_flags]
    config = {
        "model_configs": [{"alias": "writer", "model": model, "provider": "local"}],
        "columns": [
            {"name": "topic", "column_type": "sampler", "sampler_type": "category", "params": {"values": ["a", "b"]}},
            {"name": "text", "column_type": "llm-text", "model_alias": "writer", "prompt": "Write about {{ topic }}."},
        ],
    }
    return {
        "schema_version": 1,
        "name": name,
        "data_designer": {"inline": config},
        "records": records,
        "sharding": {"shards": shards},
        "deployments": {
            "writer": {
                "engine": "command",
                "argv": server,
                "model": model,
                "replicas": replicas,
                "gpus_per_replica": 1,
                "cpus_per_replica": 1,
                "startup_timeout_s": 120,
            }
        },
        "client": {"cpus": 1, "memory_gb": 1, **(client or {})},
        "submission": {"time_limit": "00:15:00", "warning_lead_s": 60, "drain_grace_s": 30, **(submission or {})},
    }


def execute(directory: Path, document: Mapping[str, Any]) -> ExecuteResult:
    """``data-designer slurm execute`` of ``document`` with a profile for the local cluster, all under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    template = ProfileTemplate(
        cluster="local",
        workspace_root=str(directory / "ws"),
        account=os.environ.get("DDSLURM_ACCOUNT", "ddtest"),
        gpu_partition=os.environ.get("DDSLURM_GPU_PARTITION", "gpu"),
        cpu_partition=os.environ.get("DDSLURM_CPU_PARTITION", "cpu"),
        python=sys.executable,
    )
    profile = directory / "profile.yaml"
    profile.write_text(render_profile(template), encoding="utf-8")
    run_file = directory / "run.json"
    run_file.write_text(json.dumps(document), encoding="utf-8")
    (directory / "home").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_DESIGNER_SLURM_PROFILE", "XDG_CONFIG_HOME")}
    env["HOME"] = str(directory / "home")
    data_designer = str(Path(sys.executable).parent / "data-designer")
    command = [data_designer, "slurm", "execute", str(run_file), "--profile", str(profile), "--json"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"execute failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return ExecuteResult.model_validate_json(done.stdout)
