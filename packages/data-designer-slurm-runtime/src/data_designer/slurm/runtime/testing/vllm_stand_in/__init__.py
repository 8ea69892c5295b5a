"""A stand-in ``vllm`` command: plays ``vllm serve`` (one node, or each rank of a replica that spans nodes) with the
in-tree stub server, where there is no GPU and no vLLM.

:func:`install_vllm_stand_in` writes an executable ``vllm`` into a directory; put it first on a job's ``PATH`` and
the runtime's real launch path (``srun`` step, launcher, ``exec vllm serve ...``) runs unchanged.

**Command line**, exactly what the planner renders: ``vllm serve MODEL --host H --port P --tensor-parallel-size TP
--pipeline-parallel-size PP --served-model-name ALIAS [engine args...]`` and, over N > 1 nodes,
``--distributed-executor-backend mp --nnodes N --node-rank R --master-addr ADDR --master-port MP``, with
``--headless`` on every rank R > 0. These flags (and ``-tp``, ``-pp``, ``-n``, ``-r``) are parsed strictly with
vLLM's defaults; any other word is an engine arg, recorded and otherwise ignored. ``--api-key`` on argv is refused:
the key comes only from ``VLLM_API_KEY`` (unset or empty: no key). ``vllm --version`` prints a stand-in version.

**Ranks.** Rank 0 of N > 1 listens on the master port (every interface) and waits for node ranks 1..N-1; each
headless rank connects (retrying until the join timeout) and says hello with its nnodes, node rank, model, TP,
PP, served names, ``--headless``, backend and ``CUDA_VISIBLE_DEVICES``. Rank 0 refuses a missing or inconsistent
set, on stderr, naming each rank by node rank, host and pid: a rank that does not join in time, two ranks with
one node rank (a second rank 0 on the same host included), a node rank >= nnodes, mismatched nnodes, model, TP,
PP, served name or backend, ``--headless`` on rank 0 or missing on rank > 0, a backend other than ``mp``, TP x
PP not divisible by N, and ``CUDA_VISIBLE_DEVICES`` (when set) not listing TP x PP / N GPUs. Only once every rank
joined does rank 0 serve the OpenAI API on ``--host``/``--port`` (bound at start; listened on, and ``/health``
200, after the start delay), as the model ``--served-model-name`` (else MODEL). Headless ranks serve no API. With
N = 1 (no ``--nnodes``, or 1) the process just serves. The ranks keep their connections open and fail as a unit.

**Exit codes**: 0 after SIGTERM or SIGINT, or when another rank of the replica was stopped that way (rank 0
tells the headless ranks; a stopped headless rank tells rank 0, which stops and tells the others);
:data:`EXIT_BAD_ARGUMENTS` (2) a command line or knob refused; :data:`EXIT_BIND_FAILED` (3) the API port or the
master port taken; :data:`EXIT_CRASH_AT_START` (4) and :data:`EXIT_CRASHED` (5) the injected failures;
:data:`EXIT_RANKS_REFUSED` (6) an inconsistent rank set (rank 0, and every rank it told); :data:`EXIT_RANKS_MISSING`
(7) a rank missing at the join timeout (rank 0, and the ranks it told), or rank 0 unreachable or silent (a headless
rank); :data:`EXIT_RANK_LOST` (8) rank 0, when a headless rank's connection drops (it died); :data:`EXIT_HEAD_LOST`
(9) a headless rank, when rank 0's connection drops.

**Knobs**, environment only (argv is the planner's): ``DDSLURM_VLLM_STAND_IN_LOG`` (the start log; the installed
script defaults it to ``<directory>/vllm-stand-in.jsonl``), ``..._JOIN_TIMEOUT_S`` (default 60), and for rank 0's
:class:`~data_designer.slurm.runtime.testing.StubServerConfig` ``..._START_DELAY_S``, ``..._LATENCY_S``,
``..._CRASH_AT_START`` (1), ``..._CRASH_AFTER`` (N answered requests), ``..._MAX_TOKENS``, ``..._REQUEST_LOG``,
``..._REPLICA_ID`` (default ``vllm-<host>-<port>``, the ``replica=`` word of every answer); ``..._CRASH_RANK`` (a
node rank) with ``..._CRASH_RANK_AFTER_S`` makes that rank die with :data:`EXIT_CRASHED` that long after the ranks
joined; ``..._CHECK_DEVICES=0`` turns off the ``CUDA_VISIBLE_DEVICES`` check. A knob that does not parse exits 2.

**Start log**: one JSON line per ``vllm serve`` process start, appended in one write: ``{"argv", "args", "error",
"rank", "hostname", "slurm_procid", "slurmd_nodename", "cuda_visible_devices", "api_key_set", "pid", "time"}``
(``argv`` as called, from ``vllm``; ``args`` the parsed :class:`VllmServeArgs`, ``null`` with ``error`` when the
command line was refused; ``time`` UTC). :func:`read_vllm_stand_in_log` reads them back as
:class:`VllmStandInStart`. The API key is never written, only whether ``VLLM_API_KEY`` was set.

Rank 0 keeps the master port while it serves and refuses a rank that connects late (that rank exits 6; rank 0
serves on).
"""

from data_designer.slurm.runtime.testing._test_server import (
    EXIT_BAD_ARGUMENTS,
    EXIT_BIND_FAILED,
    EXIT_CRASH_AT_START,
    EXIT_CRASHED,
)
from data_designer.slurm.runtime.testing.vllm_stand_in._args import (
    EXIT_HEAD_LOST,
    EXIT_RANK_LOST,
    EXIT_RANKS_MISSING,
    EXIT_RANKS_REFUSED,
    VLLM_STAND_IN_CHECK_DEVICES_ENV,
    VLLM_STAND_IN_CRASH_AFTER_ENV,
    VLLM_STAND_IN_CRASH_AT_START_ENV,
    VLLM_STAND_IN_CRASH_RANK_AFTER_ENV,
    VLLM_STAND_IN_CRASH_RANK_ENV,
    VLLM_STAND_IN_ENVS,
    VLLM_STAND_IN_JOIN_TIMEOUT_ENV,
    VLLM_STAND_IN_LATENCY_ENV,
    VLLM_STAND_IN_LOG_ENV,
    VLLM_STAND_IN_MAX_TOKENS_ENV,
    VLLM_STAND_IN_REPLICA_ID_ENV,
    VLLM_STAND_IN_REQUEST_LOG_ENV,
    VLLM_STAND_IN_START_DELAY_ENV,
    VllmServeArgs,
)
from data_designer.slurm.runtime.testing.vllm_stand_in._install import (
    VLLM_STAND_IN_LOG_NAME,
    install_vllm_stand_in,
    vllm_stand_in_script,
)
from data_designer.slurm.runtime.testing.vllm_stand_in._log import VllmStandInStart, read_vllm_stand_in_log

__all__ = [
    "EXIT_BAD_ARGUMENTS",
    "EXIT_BIND_FAILED",
    "EXIT_CRASHED",
    "EXIT_CRASH_AT_START",
    "EXIT_HEAD_LOST",
    "EXIT_RANKS_MISSING",
    "EXIT_RANKS_REFUSED",
    "EXIT_RANK_LOST",
    "VLLM_STAND_IN_CHECK_DEVICES_ENV",
    "VLLM_STAND_IN_CRASH_AFTER_ENV",
    "VLLM_STAND_IN_CRASH_AT_START_ENV",
    "VLLM_STAND_IN_CRASH_RANK_AFTER_ENV",
    "VLLM_STAND_IN_CRASH_RANK_ENV",
    "VLLM_STAND_IN_ENVS",
    "VLLM_STAND_IN_JOIN_TIMEOUT_ENV",
    "VLLM_STAND_IN_LATENCY_ENV",
    "VLLM_STAND_IN_LOG_ENV",
    "VLLM_STAND_IN_LOG_NAME",
    "VLLM_STAND_IN_MAX_TOKENS_ENV",
    "VLLM_STAND_IN_REPLICA_ID_ENV",
    "VLLM_STAND_IN_REQUEST_LOG_ENV",
    "VLLM_STAND_IN_START_DELAY_ENV",
    "VllmServeArgs",
    "VllmStandInStart",
    "install_vllm_stand_in",
    "read_vllm_stand_in_log",
    "vllm_stand_in_script",
]
