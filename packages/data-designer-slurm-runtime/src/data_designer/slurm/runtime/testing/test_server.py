"""``python -m data_designer.slurm.runtime.testing.test_server --port P --model M --replica-id R``: one stub replica.

The server itself (and its in-process form) lives in :mod:`data_designer.slurm.runtime.testing._test_server`;
this module is only its command line. Output contract, for supervisors: stderr gets
``stub-server R: bound HOST:PORT`` as soon as the port is held, stdout gets exactly one line
``ready HOST:PORT`` (flushed) once it listens, and the exit status is one of the ``EXIT_*`` constants
(0 after SIGTERM or SIGINT). Do not import this module from the package ``__init__``: ``python -m``
would then find it already imported and warn.

``--fail-once-at-start PATH`` is the once-only startup failure: the replica that creates ``PATH`` exclusively
exits :data:`EXIT_CRASH_AT_START` after the start delay, every later one (the other replicas, other runs, a
retry) finds ``PATH`` and serves. An absolute ``PATH`` shared by a benchmark's children fails exactly one child
once; a relative one is taken from the server's working directory (the run directory under the supervisor), so
each run's first server fails once.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from data_designer.slurm.runtime.testing._test_server import (
    DEFAULT_MAX_NUM_SEQS,
    EXIT_BAD_ARGUMENTS,
    EXIT_BIND_FAILED,
    EXIT_CRASH_AT_START,
    EXIT_CRASHED,
    FAIL_STATUSES,
    TEST_SERVER_MODULE,
    StubModelServer,
    StubServerConfig,
)


class _Terminated(BaseException):
    """Raised in the main thread by SIGTERM, so ``serve_forever`` unwinds and the socket is closed."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m {TEST_SERVER_MODULE}",
        description="A deterministic OpenAI-compatible model server for tests, with vLLM's /metrics.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (only this one)")
    parser.add_argument("--port", type=int, required=True, help="port to bind; 0 picks a free one")
    parser.add_argument("--model", required=True, help="the served model name (requests for others get 404)")
    parser.add_argument(
        "--permissive",
        action="store_true",
        help="answer requests naming any model (/v1/models still lists only --model)",
    )
    parser.add_argument("--replica-id", required=True, help="stamped into every answer as replica=<id>")
    parser.add_argument("--start-delay-s", type=float, default=0.0, help="seconds bound but not listening")
    parser.add_argument("--latency-s", type=float, default=0.0, help="seconds added to every inference request")
    parser.add_argument(
        "--max-num-seqs",
        type=int,
        default=DEFAULT_MAX_NUM_SEQS,
        metavar="N",
        help="inference requests running at once (each for --latency-s); the others wait (vllm:num_requests_waiting)",
    )
    parser.add_argument(
        "--fail-fraction",
        type=float,
        default=0.0,
        metavar="F",
        help="answer --fail-status to this fraction of inference requests, by arrival: the n-th fails when "
        "floor(nF) > floor((n-1)F)",
    )
    parser.add_argument(
        "--fail-status", type=int, default=500, choices=sorted(FAIL_STATUSES), help="the injected failures' status"
    )
    parser.add_argument("--no-metrics", action="store_true", help="GET /metrics answers 404 (a server without it)")
    parser.add_argument("--crash-at-start", action="store_true", help=f"exit {EXIT_CRASH_AT_START} after the delay")
    parser.add_argument(
        "--fail-once-at-start",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"exit {EXIT_CRASH_AT_START} after the delay if this replica creates PATH first; else serve "
        "(one failure at start, then every start and retry succeeds)",
    )
    parser.add_argument(
        "--crash-after", type=int, default=None, metavar="N", help=f"exit {EXIT_CRASHED} after N answered requests"
    )
    parser.add_argument(
        "--crash-claim",
        type=Path,
        default=None,
        metavar="PATH",
        help="with --crash-after: only the replica that creates PATH first crashes (one of several replicas dies)",
    )
    parser.add_argument("--max-tokens", type=int, default=16, help="words in a full text answer (at least 2)")
    parser.add_argument("--api-key-env", default=None, metavar="NAME", help="require 'Bearer $NAME' on /v1/*")
    parser.add_argument(
        "--require-env",
        action="append",
        default=[],
        metavar="NAME",
        help="refuse to start (exit 2) unless NAME is set and not empty, like a gated model without HF_TOKEN",
    )
    parser.add_argument("--request-log", type=Path, default=None, help="append one JSON line per request")
    parser.add_argument("--ignore-sigterm", action="store_true", help="ignore SIGTERM (to test KILL escalation)")
    return parser


def _config(args: argparse.Namespace) -> StubServerConfig:
    api_key: str | None = None
    if args.api_key_env is not None:
        api_key = os.environ.get(args.api_key_env) or None
        if api_key is None:
            raise ValueError(f"--api-key-env {args.api_key_env!r} names an unset or empty variable")
    for name in args.require_env:
        if not os.environ.get(name):
            raise ValueError(f"--require-env {name!r}: the variable is unset or empty")
    crash_after = args.crash_after
    if crash_after is not None and args.crash_claim is not None and not _claim(args.crash_claim):
        crash_after = None  # another replica claimed the crash
    config = StubServerConfig(
        model=args.model,
        replica_id=args.replica_id,
        host=args.host,
        port=args.port,
        start_delay_s=args.start_delay_s,
        latency_s=args.latency_s,
        crash_at_start=args.crash_at_start,
        crash_after=crash_after,
        max_tokens=args.max_tokens,
        api_key=api_key,
        request_log=args.request_log,
        ignore_sigterm=args.ignore_sigterm,
        permissive=args.permissive,
        max_num_seqs=args.max_num_seqs,
        fail_fraction=args.fail_fraction,
        fail_status=args.fail_status,
        metrics=not args.no_metrics,
    )
    if args.fail_once_at_start is not None and not config.crash_at_start and _claim(args.fail_once_at_start):
        return dataclasses.replace(config, crash_at_start=True)  # claimed last: a refused config consumes nothing
    return config


def _claim(path: Path) -> bool:
    """Create ``path`` exclusively; False when it exists (another replica took it)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    except OSError as error:  # a missing directory is a bad argument, named, not a traceback
        raise ValueError(f"cannot create the claim file {str(path)!r}: {error.strerror}") from None
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Run one replica until SIGTERM/SIGINT (0) or a failure; the status is one of the ``EXIT_*`` constants."""
    args = _parser().parse_args(argv)
    try:
        config = _config(args)
    except ValueError as error:
        print(f"stub-server: {error}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    signal.signal(signal.SIGTERM, signal.SIG_IGN if config.ignore_sigterm else _raise_terminated)
    try:
        server = StubModelServer(config, allow_crash=True)
    except OSError as error:
        print(f"stub-server {config.replica_id}: cannot bind {config.host}:{config.port}: {error}", file=sys.stderr)
        return EXIT_BIND_FAILED
    print(f"stub-server {config.replica_id}: bound {config.host}:{server.port}", file=sys.stderr, flush=True)
    try:
        if config.crash_at_start:
            time.sleep(config.start_delay_s)
            cause = (
                "--crash-at-start"
                if args.crash_at_start
                else f"--fail-once-at-start: created {args.fail_once_at_start}"
            )
            print(f"stub-server {config.replica_id}: simulated crash at start ({cause})", file=sys.stderr)
            return EXIT_CRASH_AT_START
        server.serve_forever(on_ready=_announce)
    except OSError as error:
        print(
            f"stub-server {config.replica_id}: cannot listen on {config.host}:{server.port}: {error}", file=sys.stderr
        )
        return EXIT_BIND_FAILED
    except (KeyboardInterrupt, _Terminated):
        print(f"stub-server {config.replica_id}: stopped", file=sys.stderr)
    finally:
        server.close()
    return 0


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def _announce(server: StubModelServer) -> None:
    config = server.config
    print(f"ready {config.host}:{server.port}", flush=True)
    print(f"stub-server {config.replica_id}: model {config.model!r} ready_at {server.ready_at}", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
