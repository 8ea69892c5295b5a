"""The stand-in's interface: ``vllm serve`` parsed as vLLM parses what the planner renders, the
``DDSLURM_VLLM_STAND_IN_*`` knobs, and the exit codes.

The fixed flags and the multi-node flags are parsed strictly (argparse: a malformed value or a missing one exits
:data:`EXIT_BAD_ARGUMENTS`, as vLLM does; no abbreviations); every other word after the model is an engine arg,
kept in order (``--flag value``, ``--flag=value`` and bare switches alike). Defaults are vLLM's.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from data_designer.slurm.runtime.testing._test_server import EXIT_BAD_ARGUMENTS

EXIT_RANKS_REFUSED = 6
"""An inconsistent rank set (rank 0 refuses it; every rank it told exits so too)."""
EXIT_RANKS_MISSING = 7
"""Rank 0: not every rank joined within the join timeout; a headless rank: rank 0 was not reachable, or gave no
verdict, within it (or told it another rank is missing)."""
EXIT_RANK_LOST = 8
"""Rank 0: a headless rank's connection dropped (it died) after it joined."""
EXIT_HEAD_LOST = 9
"""A headless rank: rank 0's connection dropped (it died) after this rank joined."""

API_KEY_ENV = "VLLM_API_KEY"
"""vLLM's API key variable: the only way a key reaches the stand-in."""
_PREFIX = "DDSLURM_VLLM_STAND_IN_"
VLLM_STAND_IN_LOG_ENV = f"{_PREFIX}LOG"
"""The JSON-lines file every process start is appended to (unset or empty: no log)."""
VLLM_STAND_IN_JOIN_TIMEOUT_ENV = f"{_PREFIX}JOIN_TIMEOUT_S"
"""Seconds rank 0 waits for the other ranks, and a headless rank for rank 0 (default 60)."""
VLLM_STAND_IN_START_DELAY_ENV = f"{_PREFIX}START_DELAY_S"
VLLM_STAND_IN_LATENCY_ENV = f"{_PREFIX}LATENCY_S"
VLLM_STAND_IN_CRASH_AT_START_ENV = f"{_PREFIX}CRASH_AT_START"
VLLM_STAND_IN_CRASH_AFTER_ENV = f"{_PREFIX}CRASH_AFTER"
VLLM_STAND_IN_MAX_TOKENS_ENV = f"{_PREFIX}MAX_TOKENS"
VLLM_STAND_IN_REQUEST_LOG_ENV = f"{_PREFIX}REQUEST_LOG"
VLLM_STAND_IN_REPLICA_ID_ENV = f"{_PREFIX}REPLICA_ID"
VLLM_STAND_IN_CRASH_RANK_ENV = f"{_PREFIX}CRASH_RANK"
"""A node rank that dies (``os._exit(EXIT_CRASHED)``) :data:`VLLM_STAND_IN_CRASH_RANK_AFTER_ENV` seconds after the ranks joined."""
VLLM_STAND_IN_CRASH_RANK_AFTER_ENV = f"{_PREFIX}CRASH_RANK_AFTER_S"
VLLM_STAND_IN_CHECK_DEVICES_ENV = f"{_PREFIX}CHECK_DEVICES"
"""``0`` turns off the ``CUDA_VISIBLE_DEVICES`` count check (on by default, where the variable is set)."""
VLLM_STAND_IN_ENVS = (
    VLLM_STAND_IN_LOG_ENV,
    VLLM_STAND_IN_JOIN_TIMEOUT_ENV,
    VLLM_STAND_IN_START_DELAY_ENV,
    VLLM_STAND_IN_LATENCY_ENV,
    VLLM_STAND_IN_CRASH_AT_START_ENV,
    VLLM_STAND_IN_CRASH_AFTER_ENV,
    VLLM_STAND_IN_MAX_TOKENS_ENV,
    VLLM_STAND_IN_REQUEST_LOG_ENV,
    VLLM_STAND_IN_REPLICA_ID_ENV,
    VLLM_STAND_IN_CRASH_RANK_ENV,
    VLLM_STAND_IN_CRASH_RANK_AFTER_ENV,
    VLLM_STAND_IN_CHECK_DEVICES_ENV,
)
"""Every variable the stand-in reads (besides ``VLLM_API_KEY``, ``CUDA_VISIBLE_DEVICES`` and Slurm's)."""

STAND_IN_VERSION = "0.0.0+ddslurm.stand.in"
BACKENDS = ("ray", "mp", "uni", "external_launcher")


class UsageError(Exception):
    """A command line or knob the stand-in refuses: the message goes to stderr, the exit is 2."""

    exit_code = EXIT_BAD_ARGUMENTS


@dataclass(frozen=True)
class VllmServeArgs:
    """What one ``vllm serve`` command line asked for."""

    model: str
    host: str
    port: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    served_model_name: tuple[str, ...] | None
    nnodes: int
    node_rank: int
    master_addr: str
    master_port: int
    headless: bool
    distributed_executor_backend: str | None
    engine_args: tuple[str, ...]
    """The other words after the model, in order, as given."""

    @property
    def served_name(self) -> str:
        """The name the API serves: the first ``--served-model-name``, else the model."""
        return self.served_model_name[0] if self.served_model_name else self.model

    @property
    def gpus(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    def engine_options(self) -> dict[str, str | bool]:
        """The engine args as ``{flag: value}`` (a bare switch maps to True; the last of a repeated flag wins)."""
        options: dict[str, str | bool] = {}
        words = list(self.engine_args)
        while words:
            word = words.pop(0)
            if "=" in word and word.startswith("-"):
                flag, value = word.split("=", 1)
                options[flag] = value
            elif words and not words[0].startswith("-"):
                options[word] = words.pop(0)
            else:
                options[word] = True
        return options

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VllmServeArgs:
        names = data.get("served_model_name")
        fields = dict(data) | {
            "served_model_name": tuple(names) if names is not None else None,
            "engine_args": tuple(data["engine_args"]),
        }
        return cls(**fields)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.format_usage()}{self.prog}: error: {message}")


def _at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if value < low or (high is not None and value > high):
            bounds = f"in [{low}, {high}]" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{value} is not {bounds}")
        return value

    return parse


def _serve_parser() -> _Parser:
    parser = _Parser(prog="vllm serve", allow_abbrev=False, add_help=False)
    parser.add_argument("model", metavar="model_tag")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=_at_least(0, 65535), default=8000)
    parser.add_argument("--tensor-parallel-size", "-tp", type=_at_least(1), default=1)
    parser.add_argument("--pipeline-parallel-size", "-pp", type=_at_least(1), default=1)
    parser.add_argument("--served-model-name", nargs="+", default=None)
    parser.add_argument("--nnodes", "-n", type=_at_least(1), default=1)
    parser.add_argument("--node-rank", "-r", type=_at_least(0), default=0)
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=_at_least(1, 65535), default=29501)
    parser.add_argument("--headless", action="store_true")
    parser.add_argument("--distributed-executor-backend", choices=BACKENDS, default=None)
    parser.add_argument("--api-key", default=None)
    return parser


def parse_serve(argv: Sequence[str]) -> VllmServeArgs:
    """The arguments of ``vllm serve ARGV`` (``argv`` after ``serve``); :class:`UsageError` if refused."""
    parser = _serve_parser()
    args, extra = parser.parse_known_args(list(argv))
    if args.api_key is not None:
        parser.error(f"--api-key on the command line: the key travels in {API_KEY_ENV} (argv is world-readable)")
    if args.model.startswith("-"):
        parser.error(f"the model {args.model!r} looks like an option")
    return VllmServeArgs(
        model=args.model,
        host=args.host,
        port=args.port,
        tensor_parallel_size=args.tensor_parallel_size,
        pipeline_parallel_size=args.pipeline_parallel_size,
        served_model_name=tuple(args.served_model_name) if args.served_model_name is not None else None,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        master_addr=args.master_addr,
        master_port=args.master_port,
        headless=args.headless,
        distributed_executor_backend=args.distributed_executor_backend,
        engine_args=tuple(extra),
    )


def redacted(argv: Sequence[str]) -> list[str]:
    """``argv`` with every ``--api-key`` value replaced (what the log may hold)."""
    words = list(argv)
    for index, word in enumerate(words):
        if word.startswith("--api-key="):
            words[index] = "--api-key=<redacted>"
        elif word == "--api-key" and index + 1 < len(words):
            words[index + 1] = "<redacted>"
    return words


@dataclass(frozen=True)
class Knobs:
    """The stand-in's behaviour, from ``DDSLURM_VLLM_STAND_IN_*`` (never from argv: argv is the planner's)."""

    log: Path | None = None
    join_timeout_s: float = 60.0
    start_delay_s: float = 0.0
    latency_s: float = 0.0
    crash_at_start: bool = False
    crash_after: int | None = None
    max_tokens: int = 16
    request_log: Path | None = None
    replica_id: str | None = None
    crash_rank: int | None = None
    crash_rank_after_s: float = 0.0
    check_devices: bool = True


def knobs_from(environ: Mapping[str, str]) -> Knobs:
    """The knobs set in ``environ`` (unset or empty: the default); :class:`UsageError` naming a bad one."""

    def get(name: str) -> str | None:
        return environ.get(name) or None

    def number(name: str, default: float) -> float:
        text = get(name)
        if text is None:
            return default
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"{name}={text!r} is not a number") from None
        if not 0 <= value < math.inf:
            raise UsageError(f"{name}={text!r} must be finite and not negative")
        return value

    def count(name: str) -> int | None:
        text = get(name)
        if text is None:
            return None
        if not text.isdigit():
            raise UsageError(f"{name}={text!r} is not a whole number")
        return int(text)

    def flag(name: str, default: bool) -> bool:
        text = get(name)
        if text is None:
            return default
        if text.lower() not in ("1", "true", "yes", "0", "false", "no"):
            raise UsageError(f"{name}={text!r} is not one of 1, true, yes, 0, false, no")
        return text.lower() in ("1", "true", "yes")

    log, request_log = get(VLLM_STAND_IN_LOG_ENV), get(VLLM_STAND_IN_REQUEST_LOG_ENV)
    max_tokens = count(VLLM_STAND_IN_MAX_TOKENS_ENV)
    return Knobs(
        log=Path(log) if log else None,
        join_timeout_s=number(VLLM_STAND_IN_JOIN_TIMEOUT_ENV, 60.0),
        start_delay_s=number(VLLM_STAND_IN_START_DELAY_ENV, 0.0),
        latency_s=number(VLLM_STAND_IN_LATENCY_ENV, 0.0),
        crash_at_start=flag(VLLM_STAND_IN_CRASH_AT_START_ENV, False),
        crash_after=count(VLLM_STAND_IN_CRASH_AFTER_ENV),
        max_tokens=16 if max_tokens is None else max_tokens,
        request_log=Path(request_log) if request_log else None,
        replica_id=get(VLLM_STAND_IN_REPLICA_ID_ENV),
        crash_rank=count(VLLM_STAND_IN_CRASH_RANK_ENV),
        crash_rank_after_s=number(VLLM_STAND_IN_CRASH_RANK_AFTER_ENV, 0.0),
        check_devices=flag(VLLM_STAND_IN_CHECK_DEVICES_ENV, True),
    )
