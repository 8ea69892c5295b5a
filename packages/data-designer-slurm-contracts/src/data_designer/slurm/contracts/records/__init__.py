"""Every record a run directory holds: one module per family, each with its schema name and version.

See ``docs/architecture/run-directory.md`` for who writes each file and what a reader may conclude.
"""

from data_designer.slurm.contracts._ranges import IndexRange
from data_designer.slurm.contracts.records._attempt import ATTEMPT_SCHEMA, AttemptRecord, ReplicaRecord
from data_designer.slurm.contracts.records._claim import CLAIM_SCHEMA, ClaimOwner
from data_designer.slurm.contracts.records._client_error import (
    CLIENT_ERROR_MESSAGE_LIMIT,
    CLIENT_ERROR_SCHEMA,
    ClientCause,
    ClientErrorRecord,
)
from data_designer.slurm.contracts.records._endpoints import (
    ENDPOINTS_SCHEMA,
    ENV_ATTEMPT_DIR,
    ENV_ENDPOINTS,
    AliasEndpoints,
    EndpointsRecord,
)
from data_designer.slurm.contracts.records._facts import FACTS_SCHEMA
from data_designer.slurm.contracts.records._heartbeat import HEARTBEAT_SCHEMA, HeartbeatRecord, Phase
from data_designer.slurm.contracts.records._inputs import (
    INPUTS_SCHEMA,
    InputFile,
    InputRole,
    InputsManifest,
    SeedRewrite,
)
from data_designer.slurm.contracts.records._manifest import (
    ATTEMPT_COLUMN,
    EXIT_CLIENT_ERROR,
    EXIT_DRAINED,
    EXIT_INVALID_CONFIG,
    EXIT_OK,
    INDEX_COLUMN,
    MANIFEST_SCHEMA,
    PLAN_DIGEST_COLUMN,
    PROVENANCE_COLUMNS,
    RUN_ID_COLUMN,
    SHARD_COLUMN,
    ColumnType,
    Drained,
    DrainSignal,
    ModelUsage,
    OutputManifest,
    OutputPart,
    ReplicaRequests,
    Routing,
    Timings,
)
from data_designer.slurm.contracts.records._merge import (
    MERGE_JOB_SCHEMA,
    MERGE_MANIFEST_SCHEMA,
    MergeFile,
    MergeJobRecord,
    MergeManifest,
    MergeSource,
)
from data_designer.slurm.contracts.records._observation import OBSERVATION_SCHEMA, ObservationRecord
from data_designer.slurm.contracts.records._ports import PORT_SCHEMA, PortRecord
from data_designer.slurm.contracts.records._progress import (
    PROGRESS_SCHEMA,
    WorkerError,
    WorkerFailure,
    WorkerProgress,
    WorkerState,
)
from data_designer.slurm.contracts.records._retry import (
    CANCELLATION_SCHEMA,
    RESUME_SCHEMA,
    RETRY_SCHEMA,
    CancellationRecord,
    Requester,
    ResumeClaim,
    RetryIntent,
    RetryShard,
)
from data_designer.slurm.contracts.records._run import RUN_SCHEMA, RunRecord
from data_designer.slurm.contracts.records._schema import (
    RECORD_SCHEMA_NAME_PATTERN,
    RecordEnvelope,
    RecordSchema,
    RecordSchemaName,
)
from data_designer.slurm.contracts.records._status import (
    EXIT_CODES,
    EXIT_NOT_OURS,
    STATUS_SCHEMA,
    FinalStatus,
    StatusRecord,
)
from data_designer.slurm.contracts.records._submission import SUBMISSION_SCHEMA, SubmissionRecord, SubmittedJob

__all__ = [
    "ATTEMPT_COLUMN",
    "ATTEMPT_SCHEMA",
    "CANCELLATION_SCHEMA",
    "CLAIM_SCHEMA",
    "CLIENT_ERROR_MESSAGE_LIMIT",
    "CLIENT_ERROR_SCHEMA",
    "ENDPOINTS_SCHEMA",
    "ENV_ATTEMPT_DIR",
    "ENV_ENDPOINTS",
    "EXIT_CLIENT_ERROR",
    "EXIT_CODES",
    "EXIT_DRAINED",
    "EXIT_INVALID_CONFIG",
    "EXIT_NOT_OURS",
    "EXIT_OK",
    "FACTS_SCHEMA",
    "HEARTBEAT_SCHEMA",
    "INDEX_COLUMN",
    "INPUTS_SCHEMA",
    "MANIFEST_SCHEMA",
    "MERGE_JOB_SCHEMA",
    "MERGE_MANIFEST_SCHEMA",
    "OBSERVATION_SCHEMA",
    "PLAN_DIGEST_COLUMN",
    "PORT_SCHEMA",
    "PROGRESS_SCHEMA",
    "PROVENANCE_COLUMNS",
    "RECORD_SCHEMA_NAME_PATTERN",
    "RESUME_SCHEMA",
    "RETRY_SCHEMA",
    "RUN_ID_COLUMN",
    "RUN_SCHEMA",
    "SHARD_COLUMN",
    "STATUS_SCHEMA",
    "SUBMISSION_SCHEMA",
    "AliasEndpoints",
    "AttemptRecord",
    "CancellationRecord",
    "ClaimOwner",
    "ClientCause",
    "ClientErrorRecord",
    "ColumnType",
    "DrainSignal",
    "Drained",
    "EndpointsRecord",
    "FinalStatus",
    "HeartbeatRecord",
    "IndexRange",
    "InputFile",
    "InputRole",
    "InputsManifest",
    "MergeFile",
    "MergeJobRecord",
    "MergeManifest",
    "MergeSource",
    "ModelUsage",
    "ObservationRecord",
    "OutputManifest",
    "OutputPart",
    "Phase",
    "PortRecord",
    "RecordEnvelope",
    "RecordSchema",
    "RecordSchemaName",
    "ReplicaRecord",
    "ReplicaRequests",
    "Requester",
    "ResumeClaim",
    "RetryIntent",
    "RetryShard",
    "Routing",
    "RunRecord",
    "SeedRewrite",
    "StatusRecord",
    "SubmissionRecord",
    "SubmittedJob",
    "Timings",
    "WorkerError",
    "WorkerFailure",
    "WorkerProgress",
    "WorkerState",
]
