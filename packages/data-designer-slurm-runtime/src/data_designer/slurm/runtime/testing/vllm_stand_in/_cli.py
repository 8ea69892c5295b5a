"""``vllm serve MODEL ...`` played by the stand-in: parse, log the start, then play this process's rank.

Node rank 0 checks its own command line, binds the API port (``--host``/``--port``), gathers the other ranks when
the replica spans nodes (``--nnodes`` > 1), and only then serves the OpenAI API with the stub server (``/health``
answers 200 once it listens, after the start delay). A node rank > 0 of a replica over N > 1 nodes joins rank 0
and serves nothing; it ends when rank 0 does. Messages go to stderr as ``vllm stand-in rank R: ...``.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType

from data_designer.slurm.runtime.testing._test_server import (
    EXIT_BAD_ARGUMENTS,
    EXIT_BIND_FAILED,
    EXIT_CRASH_AT_START,
    EXIT_CRASHED,
    StubModelServer,
    StubServerConfig,
)
from data_designer.slurm.runtime.testing.vllm_stand_in._args import (
    API_KEY_ENV,
    EXIT_HEAD_LOST,
    EXIT_RANKS_REFUSED,
    STAND_IN_VERSION,
    VLLM_STAND_IN_CRASH_RANK_ENV,
    Knobs,
    UsageError,
    VllmServeArgs,
    knobs_from,
    parse_serve,
)
from data_designer.slurm.runtime.testing.vllm_stand_in._log import append_start, start_line
from data_designer.slurm.runtime.testing.vllm_stand_in._ranks import (
    PeerStopped,
    RankSetError,
    RankView,
    connect,
    own_problems,
    verdict,
)
from data_designer.slurm.runtime.testing.vllm_stand_in._rendezvous import STOPPING, Watcher, gather

Say = Callable[[str], None]
_VERDICT_GRACE_S = 5.0  # a headless rank waits this much longer than rank 0's own join timeout for its verdict
_REPLICA_ID_CHARS = re.compile(r"[^A-Za-z0-9._:-]")


class Terminated(BaseException):
    """Raised in the main thread by SIGTERM (or a rank that was stopped), so every wait unwinds."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``vllm ARGV`` (the words after ``vllm``); the exit status is one of the documented codes."""
    words = list(sys.argv[1:] if argv is None else argv)
    environ = os.environ
    if words[:1] == ["--version"]:
        print(STAND_IN_VERSION)
        return 0
    if words[:1] != ["serve"]:
        print("usage: vllm serve model_tag [options]", file=sys.stderr)
        print(f"vllm (ddslurm stand-in): error: only 'serve' is played, not {words[:1]!r}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    try:
        knobs = knobs_from(environ)
    except UsageError as error:
        print(f"vllm stand-in: {error}", file=sys.stderr)
        return error.exit_code
    args: VllmServeArgs | None = None
    refusal: str | None = None
    try:
        args = parse_serve(words[1:])
    except UsageError as error:
        refusal = str(error)
    if knobs.log is not None:
        try:
            append_start(knobs.log, start_line(words, args, refusal, environ))
        except OSError as error:
            print(f"vllm stand-in: cannot append to the log {str(knobs.log)!r}: {error.strerror}", file=sys.stderr)
            return EXIT_BAD_ARGUMENTS
    if args is None:
        print(refusal, file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    me = RankView.of(args, environ, socket.gethostname(), os.getpid())
    say = functools.partial(_say, args.node_rank)
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        if args.node_rank > 0 and args.nnodes > 1:
            return serve_headless(args, knobs, me, say)
        return serve_head(args, knobs, me, environ, say)
    except (KeyboardInterrupt, Terminated):  # stopped before a role could say so
        say("stopped")
        return 0


def serve_head(args: VllmServeArgs, knobs: Knobs, me: RankView, environ: Mapping[str, str], say: Say) -> int:
    """Rank 0 (and the only rank of a one-node replica): check, bind, gather the ranks, serve until stopped."""
    problems = own_problems(me, check_devices=knobs.check_devices)
    if problems:
        say(f"rank set refused: {me.label}: {'; '.join(problems)}")
        return EXIT_RANKS_REFUSED
    try:
        config = stub_config(args, knobs, environ, me.hostname)
    except ValueError as error:
        say(f"bad stand-in settings: {error}")
        return EXIT_BAD_ARGUMENTS
    try:
        server = StubModelServer(config, allow_crash=True)
    except OSError as error:
        say(f"cannot bind {config.host}:{config.port}: {error.strerror or error}")
        return EXIT_BIND_FAILED
    watcher: Watcher | None = None
    try:
        if args.nnodes > 1:
            ranks = gather(me, args, timeout_s=knobs.join_timeout_s, check_devices=knobs.check_devices)
            say(f"every rank joined: {', '.join(c.peer.label for c in ranks.channels if c.peer is not None)}")
            watcher = Watcher(ranks, args.nnodes, say).start()
        arm_crash(knobs, me.node_rank, say)
        if config.crash_at_start:
            time.sleep(config.start_delay_s)
            say("simulated crash at start")
            return EXIT_CRASH_AT_START
        server.serve_forever(on_ready=lambda ready: say(f"serving {config.model!r} on {config.host}:{ready.port}"))
    except RankSetError as error:
        say(error.message)
        return error.exit_code
    except PeerStopped as stopped:
        say(f"{stopped}: stopping")
    except OSError as error:
        say(f"cannot listen on {config.host}:{server.port}: {error.strerror or error}")
        return EXIT_BIND_FAILED
    except (KeyboardInterrupt, Terminated):
        if watcher is not None:
            watcher.stop()
        say("stopped")
    finally:
        server.close()
    return 0


def serve_headless(args: VllmServeArgs, knobs: Knobs, me: RankView, say: Say) -> int:
    """A node rank > 0: join rank 0, then hold the connection until rank 0 ends (or this rank is stopped)."""
    channel = None
    try:
        channel = connect(args.master_addr, args.master_port, knobs.join_timeout_s)
        channel.send(me.hello())
        nnodes = verdict(channel, knobs.join_timeout_s + _VERDICT_GRACE_S)
        say(f"joined rank 0 at {args.master_addr}:{args.master_port} ({nnodes} ranks); headless, no API")
        arm_crash(knobs, me.node_rank, say)
        while True:
            try:
                message = channel.read(None)
            except ValueError:
                continue
            if message is None:
                say("rank 0 went away: this rank ends with it")
                return EXIT_HEAD_LOST
            if message.get("type") == "stopping":
                say("rank 0 stopped the replica")
                return 0
    except RankSetError as error:
        say(error.message)
        return error.exit_code
    except PeerStopped:
        say("rank 0 stopped before every rank joined")
        return 0
    except (KeyboardInterrupt, Terminated):
        if channel is not None:
            channel.send(STOPPING)
        say("stopped")
        return 0
    finally:
        if channel is not None:
            channel.close()


def stub_config(args: VllmServeArgs, knobs: Knobs, environ: Mapping[str, str], hostname: str) -> StubServerConfig:
    """The stub server rank 0 runs: the served name, ``--host``/``--port``, ``VLLM_API_KEY`` and the knobs."""
    default_id = _REPLICA_ID_CHARS.sub("-", f"vllm-{hostname.split('.')[0]}-{args.port or os.getpid()}")[:64]
    return StubServerConfig(
        model=args.served_name,
        replica_id=knobs.replica_id or default_id,
        host=args.host,
        port=args.port,
        start_delay_s=knobs.start_delay_s,
        latency_s=knobs.latency_s,
        crash_at_start=knobs.crash_at_start,
        crash_after=knobs.crash_after,
        max_tokens=knobs.max_tokens,
        api_key=environ.get(API_KEY_ENV) or None,
        request_log=knobs.request_log,
    )


def arm_crash(knobs: Knobs, node_rank: int, say: Say) -> None:
    """The :data:`VLLM_STAND_IN_CRASH_RANK_ENV` knob: this rank dies hard a while after the ranks joined."""
    if knobs.crash_rank != node_rank:
        return

    def crash() -> None:
        say(f"simulated crash ({VLLM_STAND_IN_CRASH_RANK_ENV}={node_rank})")
        sys.stderr.flush()
        os._exit(EXIT_CRASHED)

    timer = threading.Timer(knobs.crash_rank_after_s, crash)
    timer.daemon = True
    timer.start()


def _say(rank: int, message: str) -> None:
    print(f"vllm stand-in rank {rank}: {message}", file=sys.stderr, flush=True)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated
