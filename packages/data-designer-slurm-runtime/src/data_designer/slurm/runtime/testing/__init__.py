"""Test doubles for the scheduler adapter: a stateful fake Slurm, runner wrappers and harnesses.

:class:`FakeSlurm` is a :class:`~data_designer.slurm.runtime.CommandRunner` that emulates the
Slurm CLIs' outputs, so :class:`~data_designer.slurm.runtime.scheduler.SlurmScheduler` and its parsers run
unchanged against it. The conformance suite that runs against both the fake and a real cluster
lives in :mod:`data_designer.slurm.runtime.testing.conformance` (it needs pytest).

:func:`install_shims` writes PATH shims for ``srun`` (pyxis), ``apptainer`` and ``enroot`` that log their argv
and run the command natively, so the container code path runs where no container runtime exists.

:func:`writer_run`, :func:`with_client_argv` and :func:`stand_in_argv` build the small plans the allocation
tests compile (one ``writer`` alias on test-server replicas, the stand-in or a script as the client).

:class:`StubModelServer` and ``python -m data_designer.slurm.runtime.testing.test_server`` are the
in-tree OpenAI-compatible test server (real HTTP) that tests and the demo serve models with.

:func:`install_vllm_stand_in` writes an executable ``vllm`` that plays ``vllm serve`` with that server, each rank of
a replica that spans nodes included (rank 0 gathers the headless ranks, refuses an inconsistent set, and the ranks
fail as a unit); :func:`read_vllm_stand_in_log` reads back what each rank was started with
(:mod:`data_designer.slurm.runtime.testing.vllm_stand_in` documents its interface and exit codes).

:func:`write_run_directory` writes a realistic run directory (every record a real one) of any shard count in
seconds, each shard as its :data:`ShardOutcome` leaves it, and :func:`register_run_jobs` puts the run's jobs into a
:class:`FakeSlurm` in the matching task states, so run-state readers are tested and benchmarked without Slurm.
:func:`write_shard_outcomes` writes the same shard files into a run that ``execute`` or ``benchmark run``
submitted (a benchmark's children, finished).

:func:`write_root_fs`, :func:`build_squashfs` (the real ``mksquashfs``) and :func:`wrap_in_sif` (a minimal SIF
writer, the mirror of the runtime's parser) build real small container images with chosen site-packages versions.
"""

from data_designer.slurm.runtime.testing._attempts import assign_attempt
from data_designer.slurm.runtime.testing._fake_slurm import FailureMode, FakeSlurm
from data_designer.slurm.runtime.testing._fake_state import Behaviour, FakeCluster
from data_designer.slurm.runtime.testing._harness import ClusterHarness, FakeHarness
from data_designer.slurm.runtime.testing._images import (
    build_squashfs,
    squashfs_tools_missing,
    wrap_in_sif,
    write_dist_info,
    write_root_fs,
)
from data_designer.slurm.runtime.testing._plans import (
    STAND_IN_MODULE,
    TEST_SERVER,
    stand_in_argv,
    with_client_argv,
    writer_run,
)
from data_designer.slurm.runtime.testing._ports import closed_port
from data_designer.slurm.runtime.testing._processes import command_lines, processes_mentioning
from data_designer.slurm.runtime.testing._run_dirs import (
    OUTCOME_TASK_STATES,
    PREFLIGHT_ERROR_TEXT,
    SERVER_FAILURE_LINE,
    SHARD_OUTCOMES,
    ShardOutcome,
    outcome_cycle,
    parquet_part,
    register_run_jobs,
    write_run_directory,
    write_shard_outcomes,
)
from data_designer.slurm.runtime.testing._runners import CountingRunner, OutageRunner, ReplyLosingRunner
from data_designer.slurm.runtime.testing._shims import (
    SHIM_LOG_ENV,
    SHIM_LOG_NAME,
    SHIM_TOOLS,
    ShimCall,
    install_shims,
    read_shim_log,
)
from data_designer.slurm.runtime.testing._test_server import (
    EXIT_BAD_ARGUMENTS,
    EXIT_BIND_FAILED,
    EXIT_CRASH_AT_START,
    EXIT_CRASHED,
    TEST_SERVER_MODULE,
    StubModelServer,
    StubServerConfig,
    instance_for_schema,
    request_digest,
    stub_server_argv,
)
from data_designer.slurm.runtime.testing._waiting import run_logs, wait_for_record
from data_designer.slurm.runtime.testing.vllm_stand_in import (
    EXIT_HEAD_LOST,
    EXIT_RANK_LOST,
    EXIT_RANKS_MISSING,
    EXIT_RANKS_REFUSED,
    VLLM_STAND_IN_LOG_ENV,
    VLLM_STAND_IN_LOG_NAME,
    VllmServeArgs,
    VllmStandInStart,
    install_vllm_stand_in,
    read_vllm_stand_in_log,
)

__all__ = [
    "EXIT_BAD_ARGUMENTS",
    "EXIT_BIND_FAILED",
    "EXIT_CRASHED",
    "EXIT_CRASH_AT_START",
    "EXIT_HEAD_LOST",
    "EXIT_RANKS_MISSING",
    "EXIT_RANKS_REFUSED",
    "EXIT_RANK_LOST",
    "OUTCOME_TASK_STATES",
    "PREFLIGHT_ERROR_TEXT",
    "SERVER_FAILURE_LINE",
    "SHARD_OUTCOMES",
    "SHIM_LOG_ENV",
    "SHIM_LOG_NAME",
    "SHIM_TOOLS",
    "STAND_IN_MODULE",
    "TEST_SERVER",
    "TEST_SERVER_MODULE",
    "VLLM_STAND_IN_LOG_ENV",
    "VLLM_STAND_IN_LOG_NAME",
    "Behaviour",
    "ClusterHarness",
    "CountingRunner",
    "FailureMode",
    "FakeCluster",
    "FakeHarness",
    "FakeSlurm",
    "OutageRunner",
    "ReplyLosingRunner",
    "ShardOutcome",
    "ShimCall",
    "StubModelServer",
    "StubServerConfig",
    "VllmServeArgs",
    "VllmStandInStart",
    "assign_attempt",
    "build_squashfs",
    "closed_port",
    "command_lines",
    "install_shims",
    "install_vllm_stand_in",
    "instance_for_schema",
    "outcome_cycle",
    "parquet_part",
    "processes_mentioning",
    "read_shim_log",
    "read_vllm_stand_in_log",
    "register_run_jobs",
    "request_digest",
    "run_logs",
    "squashfs_tools_missing",
    "stand_in_argv",
    "stub_server_argv",
    "wait_for_record",
    "with_client_argv",
    "wrap_in_sif",
    "write_dist_info",
    "write_root_fs",
    "write_run_directory",
    "write_shard_outcomes",
    "writer_run",
]
