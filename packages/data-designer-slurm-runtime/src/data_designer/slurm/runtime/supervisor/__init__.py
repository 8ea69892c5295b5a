"""The allocation supervisor: runs one shard's attempt inside its Slurm allocation (see ``_main``).

``python -m data_designer.slurm.runtime.supervisor --plan plan.json`` is what every batch script execs.
"""

from data_designer.slurm.runtime.supervisor._main import EXIT_NOT_OURS, main
from data_designer.slurm.runtime.supervisor._records import (
    ATTEMPT_SCHEMA,
    ENDPOINTS_RECORD,
    ENDPOINTS_SCHEMA,
    ENV_ATTEMPT_DIR,
    ENV_ENDPOINTS,
    EXIT_CODES,
    HEARTBEAT_SCHEMA,
    PORT_SCHEMA,
    PORTS_DIR,
    STATUS_SCHEMA,
    AliasEndpoints,
    AttemptRecord,
    EndpointsRecord,
    FinalStatus,
    HeartbeatRecord,
    PortRecord,
    ReplicaRecord,
    StatusRecord,
)

__all__ = [
    "ATTEMPT_SCHEMA",
    "ENDPOINTS_RECORD",
    "ENDPOINTS_SCHEMA",
    "ENV_ATTEMPT_DIR",
    "ENV_ENDPOINTS",
    "EXIT_CODES",
    "EXIT_NOT_OURS",
    "HEARTBEAT_SCHEMA",
    "PORTS_DIR",
    "PORT_SCHEMA",
    "STATUS_SCHEMA",
    "AliasEndpoints",
    "AttemptRecord",
    "EndpointsRecord",
    "FinalStatus",
    "HeartbeatRecord",
    "PortRecord",
    "ReplicaRecord",
    "StatusRecord",
    "main",
]
