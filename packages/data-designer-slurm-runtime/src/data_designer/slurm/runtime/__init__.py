"""The imperative shell of data-designer-slurm: files, scheduler adapter, state store, supervisor."""

from data_designer.slurm.runtime._claims import (
    CLAIM_SCHEMA,
    AlreadyClaimed,
    AttemptClaim,
    Claimed,
    attempt_numbers,
    claim,
    next_attempt_number,
    owner_from_environment,
)
from data_designer.slurm.runtime._files import read_text, write_text_atomic
from data_designer.slurm.runtime._records import (
    Clock,
    ReadResult,
    RecordAppended,
    RecordConflict,
    RecordCorrupt,
    RecordMissing,
    RecordOk,
    RecordSchema,
    RecordUnreadable,
    RecordWritten,
    RecordWrongSchema,
    append_record,
    decode_record,
    encode_record,
    format_timestamp,
    is_temporary_name,
    publish_bytes_once,
    publish_bytes_replace,
    read_record,
    replace_record,
    sequence_numbers,
    system_clock,
    write_record_once,
)
from data_designer.slurm.runtime._run_layout import (
    RunId,
    RunIdFactory,
    RunLayout,
    check_component,
    format_attempt,
    format_shard,
    parse_attempt,
    parse_shard,
    run_id_factory,
)

__all__ = [
    "CLAIM_SCHEMA",
    "AlreadyClaimed",
    "AttemptClaim",
    "Claimed",
    "Clock",
    "ReadResult",
    "RecordAppended",
    "RecordConflict",
    "RecordCorrupt",
    "RecordMissing",
    "RecordOk",
    "RecordSchema",
    "RecordUnreadable",
    "RecordWritten",
    "RecordWrongSchema",
    "RunId",
    "RunIdFactory",
    "RunLayout",
    "append_record",
    "attempt_numbers",
    "check_component",
    "claim",
    "decode_record",
    "encode_record",
    "format_attempt",
    "format_shard",
    "format_timestamp",
    "is_temporary_name",
    "next_attempt_number",
    "owner_from_environment",
    "parse_attempt",
    "parse_shard",
    "publish_bytes_once",
    "publish_bytes_replace",
    "read_record",
    "read_text",
    "replace_record",
    "run_id_factory",
    "sequence_numbers",
    "system_clock",
    "write_record_once",
    "write_text_atomic",
]

# Scheduler adapter (issue 3).
from data_designer.slurm.runtime._command import (
    SLURM_COMMANDS,
    CommandResult,
    CommandRunner,
    SubprocessRunner,
    allowlisted_environment,
)
from data_designer.slurm.runtime._probe import DEFAULT_PROBE_TIMEOUT_S, gpus_in_gres, probe_cluster
from data_designer.slurm.runtime._sacct_parse import SACCT_FORMAT, SacctRecords, parse_sacct
from data_designer.slurm.runtime._scheduler import SlurmScheduler
from data_designer.slurm.runtime._slurm_parse import (
    AssociationRow,
    JobRecord,
    PartitionRow,
    SbatchReply,
    SlurmOutputError,
    parse_sacctmgr_associations,
    parse_sbatch,
    parse_scontrol_config,
    parse_sinfo,
)
from data_designer.slurm.runtime._squeue_parse import SQUEUE_FORMAT, parse_squeue

__all__ += [
    "SACCT_FORMAT",
    "SLURM_COMMANDS",
    "SQUEUE_FORMAT",
    "AssociationRow",
    "CommandResult",
    "CommandRunner",
    "JobRecord",
    "PartitionRow",
    "SacctRecords",
    "SbatchReply",
    "SlurmOutputError",
    "SlurmScheduler",
    "SubprocessRunner",
    "allowlisted_environment",
    "parse_sacct",
    "parse_sacctmgr_associations",
    "parse_sbatch",
    "parse_scontrol_config",
    "parse_sinfo",
    "parse_squeue",
]

# Profile probe (issue 3); its import sits with the adapter's imports above (ruff E402/I001).
__all__ += ["DEFAULT_PROBE_TIMEOUT_S", "gpus_in_gres", "probe_cluster"]
