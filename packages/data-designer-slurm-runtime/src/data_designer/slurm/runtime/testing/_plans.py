"""Small plans for allocation tests: one ``writer`` alias served by test-server replicas, any client argv.

:func:`writer_run` is the run document (one ``llm-text`` column on alias ``writer``, a ``command``
deployment of the in-tree test server); :func:`with_client_argv` swaps the compiled plan's client for
another program (the stand-in worker of :func:`stand_in_argv`, a script) and recomputes the digest, as a
compiled plan would carry it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from data_designer.slurm.contracts import ExecutionPlan
from data_designer.slurm.planner import plan_digest
from data_designer.slurm.runtime.testing._test_server import TEST_SERVER_MODULE

TEST_SERVER = (sys.executable, "-m", TEST_SERVER_MODULE)
"""The in-tree test server, as a deployment's argv starts."""

STAND_IN_MODULE = "data_designer.slurm.runtime.testing.stand_in_worker"


def writer_run(
    name: str,
    *,
    server_flags: Sequence[str] = (),
    records: int = 4,
    shards: int = 1,
    replicas: int = 2,
    gpus_per_replica: int = 1,
    startup_timeout_s: int = 60,
    **sections: Any,
) -> dict[str, Any]:
    """A run document: alias ``writer`` as ``replicas`` test-server replicas (``server_flags`` appended to each
    argv, after ``--replica-id writer-{port}``), one CPU and 1 GB for the client; ``sections`` are further
    top-level keys (``submission``, ...)."""
    argv = [*TEST_SERVER, "--host", "{host}", "--port", "{port}", "--model", "{served_name}"]
    argv += ["--replica-id", "writer-{port}", *server_flags]
    return {
        "schema_version": 1,
        "name": name,
        "data_designer": {
            "inline": {
                "model_configs": [{"alias": "writer", "model": "stub", "provider": "local"}],
                "columns": [{"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "x"}],
            }
        },
        "records": records,
        "sharding": {"shards": shards},
        "deployments": {
            "writer": {
                "engine": "command",
                "argv": argv,
                "model": "stub",
                "replicas": replicas,
                "gpus_per_replica": gpus_per_replica,
                "cpus_per_replica": 1,
                "startup_timeout_s": startup_timeout_s,
            }
        },
        "client": {"cpus": 1, "memory_gb": 1},
        **sections,
    }


def stand_in_argv(python: str = sys.executable) -> tuple[str, ...]:
    """The client argv that runs :mod:`~data_designer.slurm.runtime.testing.stand_in_worker` under ``python``."""
    return (python, "-m", STAND_IN_MODULE, "--shard", "{shard}", "--attempt", "{attempt}")


def with_client_argv(plan: ExecutionPlan, argv: Sequence[str]) -> ExecutionPlan:
    """``plan`` whose client runs ``argv`` (placeholders as the planner's), its digest recomputed."""
    client = plan.allocation.client.model_copy(update={"argv": tuple(argv)})
    draft = plan.model_copy(update={"allocation": plan.allocation.model_copy(update={"client": client})})
    return draft.model_copy(update={"digest": plan_digest(draft)})
