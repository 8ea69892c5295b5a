"""The rank set of a replica that spans nodes, played over TCP: rank 0 gathers the ranks, each headless rank joins.

The wire is newline-delimited JSON objects on one connection per headless rank, kept open while the replica lives:

* headless rank -> rank 0: ``{"type": "hello", ...}`` (its :class:`RankView`), later ``{"type": "stopping"}``
  when it is stopped (SIGTERM);
* rank 0 -> headless rank: ``{"type": "joined", "nnodes": N}`` once every rank arrived, or ``{"type": "refused",
  "exit_code": C, "message": M}``; later ``{"type": "stopping"}`` when rank 0 is stopped.

End of file on a connection without ``stopping`` first means the other side died: the replica fails as a unit.
Rank 0 judges the whole set: every hello against its own command line and the ranks already joined
(:func:`rank_problems`), its own command line before it listens (:func:`own_problems`).
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from data_designer.slurm.runtime.testing._test_server import EXIT_BIND_FAILED
from data_designer.slurm.runtime.testing.vllm_stand_in._args import (
    EXIT_HEAD_LOST,
    EXIT_RANK_LOST,
    EXIT_RANKS_MISSING,
    EXIT_RANKS_REFUSED,
    VllmServeArgs,
)

_MAX_LINE = 64 * 1024
_RETRY_S = 0.1


class RankSetError(Exception):
    """The rank set failed: ``message`` for stderr, ``exit_code`` for the process."""

    def __init__(self, exit_code: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.message = message


class PeerStopped(Exception):
    """The other side was stopped (SIGTERM) and said so: the replica stops too, gracefully."""


@dataclass(frozen=True)
class RankView:
    """What one rank tells rank 0 about itself (its hello)."""

    nnodes: int
    node_rank: int
    model: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    served_model_name: tuple[str, ...] | None
    headless: bool
    distributed_executor_backend: str | None
    cuda_visible_devices: str | None
    hostname: str
    pid: int

    @classmethod
    def of(cls, args: VllmServeArgs, environ: Mapping[str, str], hostname: str, pid: int) -> RankView:
        return cls(
            nnodes=args.nnodes,
            node_rank=args.node_rank,
            model=args.model,
            tensor_parallel_size=args.tensor_parallel_size,
            pipeline_parallel_size=args.pipeline_parallel_size,
            served_model_name=args.served_model_name,
            headless=args.headless,
            distributed_executor_backend=args.distributed_executor_backend,
            cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES"),
            hostname=hostname,
            pid=pid,
        )

    @classmethod
    def from_hello(cls, message: Mapping[str, Any]) -> RankView:
        """The view a hello carries; ValueError when it is not one."""
        try:
            names = message["served_model_name"]
            view = cls(
                **{name: message[name] for name in cls.__dataclass_fields__ if name != "served_model_name"},
                served_model_name=tuple(names) if isinstance(names, list) else names,
            )
        except (KeyError, TypeError) as error:
            raise ValueError(f"not a hello: {error}") from None
        ints = (view.nnodes, view.node_rank, view.tensor_parallel_size, view.pipeline_parallel_size, view.pid)
        texts = (view.model, view.hostname)
        optional = (view.distributed_executor_backend, view.cuda_visible_devices)
        if not (
            all(isinstance(v, int) and not isinstance(v, bool) for v in ints)
            and all(isinstance(v, str) for v in texts)
            and all(v is None or isinstance(v, str) for v in optional)
            and isinstance(view.headless, bool)
            and (view.served_model_name is None or all(isinstance(n, str) for n in view.served_model_name))
        ):
            raise ValueError("not a hello: a field has the wrong type")
        return view

    def hello(self) -> dict[str, Any]:
        return {"type": "hello"} | asdict(self)

    @property
    def label(self) -> str:
        return f"node rank {self.node_rank} ({self.hostname}, pid {self.pid})"


def device_count(cuda_visible_devices: str | None) -> int | None:
    """GPUs a ``CUDA_VISIBLE_DEVICES`` value lists (None: unset or empty, nothing to check)."""
    if not cuda_visible_devices:
        return None
    return len([device for device in cuda_visible_devices.split(",") if device.strip()])


def own_problems(rank: RankView, *, check_devices: bool) -> list[str]:
    """What is wrong with one rank's command line (and devices) taken alone."""
    problems = []
    gpus = rank.tensor_parallel_size * rank.pipeline_parallel_size
    if rank.node_rank >= rank.nnodes:
        problems.append(f"--node-rank {rank.node_rank} is not below --nnodes {rank.nnodes}")
    if rank.headless and rank.node_rank == 0:
        problems.append("--headless on node rank 0 (rank 0 serves the API)")
    if not rank.headless and rank.node_rank > 0:
        problems.append(f"--headless is missing on node rank {rank.node_rank} (only rank 0 serves the API)")
    if rank.nnodes > 1 and rank.distributed_executor_backend != "mp":
        backend = rank.distributed_executor_backend
        problems.append(f"--distributed-executor-backend {backend!r} over {rank.nnodes} nodes (the stand-in plays mp)")
    if gpus % rank.nnodes:
        problems.append(
            f"--tensor-parallel-size x --pipeline-parallel-size = {gpus} GPUs do not split over --nnodes {rank.nnodes}"
        )
    else:
        found = device_count(rank.cuda_visible_devices)
        if check_devices and found is not None and found != gpus // rank.nnodes:
            problems.append(
                f"CUDA_VISIBLE_DEVICES={rank.cuda_visible_devices!r} lists {found} GPUs, "
                f"not the {gpus // rank.nnodes} of each node"
            )
    return problems


def rank_problems(rank: RankView, head: RankView, joined: Mapping[int, RankView], *, check_devices: bool) -> list[str]:
    """What rank 0 finds wrong with a rank that said hello: alone, against rank 0, and against the ranks joined."""
    problems = []
    if rank.node_rank == 0:
        problems.append(f"a second node rank 0 (the first is {head.label})")
    elif rank.node_rank in joined:
        problems.append(f"two ranks with --node-rank {rank.node_rank} (the other is {joined[rank.node_rank].label})")
    if head.nnodes <= rank.node_rank < rank.nnodes:
        problems.append(f"--node-rank {rank.node_rank} is not below rank 0's --nnodes {head.nnodes}")
    problems += own_problems(rank, check_devices=check_devices)
    for flag, mine, theirs in (
        ("--nnodes", rank.nnodes, head.nnodes),
        ("the model", rank.model, head.model),
        ("--tensor-parallel-size", rank.tensor_parallel_size, head.tensor_parallel_size),
        ("--pipeline-parallel-size", rank.pipeline_parallel_size, head.pipeline_parallel_size),
        ("--served-model-name", rank.served_model_name, head.served_model_name),
        ("--distributed-executor-backend", rank.distributed_executor_backend, head.distributed_executor_backend),
    ):
        if mine != theirs:
            problems.append(f"{flag} {_shown(mine)} but rank 0 has {_shown(theirs)}")
    return problems


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return " ".join(repr(item) for item in value)
    return repr(value) if not isinstance(value, int) else str(value)


@dataclass(eq=False)
class Channel:
    """One connection between rank 0 and a headless rank, read message by message."""

    sock: socket.socket
    peer: RankView | None = None
    buffer: bytearray = field(default_factory=bytearray)
    pending: list[dict[str, Any]] = field(default_factory=list)

    def send(self, message: Mapping[str, Any]) -> None:
        """Best effort: a peer that is gone is found by the reader, not here."""
        with contextlib.suppress(OSError):
            self.sock.sendall((json.dumps(message) + "\n").encode())

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """The whole messages ``data`` completes; ValueError on a line that is not a JSON object."""
        self.buffer += data
        messages = []
        while (end := self.buffer.find(b"\n")) >= 0:
            line = bytes(self.buffer[:end])
            del self.buffer[: end + 1]
            message = json.loads(line)
            if not isinstance(message, dict):
                raise ValueError(f"not a message: {line[:80]!r}")
            messages.append(message)
        if len(self.buffer) > _MAX_LINE:
            raise ValueError(f"a line longer than {_MAX_LINE} bytes")
        return messages

    def read(self, timeout_s: float | None) -> dict[str, Any] | None:
        """The next message (None at end of file: the other side is gone); TimeoutError after ``timeout_s``,
        ValueError on a malformed line. Blocking: a signal handler that raises interrupts it."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.pending:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                raise
            except OSError:
                data = b""
            if not data:
                return None
            self.pending += self.feed(data)
        return self.pending.pop(0)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def keep_alive(sock: socket.socket) -> None:
    """TCP keepalive, so a node that vanishes without a reset is noticed within seconds, not hours."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 5), ("TCP_KEEPINTVL", 2), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def connect(addr: str, port: int, timeout_s: float) -> Channel:
    """A connection to rank 0 at ``addr:port``, retried until ``timeout_s`` (:data:`EXIT_RANKS_MISSING` then)."""
    deadline = time.monotonic() + timeout_s
    last = "no attempt"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RankSetError(
                EXIT_RANKS_MISSING, f"rank 0 at {addr}:{port} was not reachable within {timeout_s:g}s ({last})"
            )
        try:
            sock = socket.create_connection((addr, port), timeout=min(remaining, 2.0))
        except OSError as error:
            last = error.strerror or str(error)
            time.sleep(min(_RETRY_S, max(remaining, 0)))
            continue
        keep_alive(sock)
        return Channel(sock)


def verdict(channel: Channel, timeout_s: float) -> int:
    """Rank 0's answer to this rank's hello: the number of ranks when joined; else RankSetError or PeerStopped."""
    try:
        message = channel.read(timeout_s)
    except TimeoutError:
        raise RankSetError(EXIT_RANKS_MISSING, f"rank 0 gave no verdict within {timeout_s:g}s") from None
    except ValueError as error:
        raise RankSetError(EXIT_RANKS_REFUSED, f"rank 0 sent a malformed verdict: {error}") from None
    if message is None:
        raise RankSetError(EXIT_HEAD_LOST, "rank 0 went away before every rank joined")
    kind = message.get("type")
    if kind == "joined" and isinstance(message.get("nnodes"), int):
        return int(message["nnodes"])
    if kind == "refused":
        code = message.get("exit_code")
        code = code if code in (EXIT_RANKS_REFUSED, EXIT_RANKS_MISSING, EXIT_RANK_LOST) else EXIT_RANKS_REFUSED
        raise RankSetError(code, f"rank 0 refused the rank set: {message.get('message')}")
    if kind == "stopping":
        raise PeerStopped
    raise RankSetError(EXIT_RANKS_REFUSED, f"rank 0 sent an unknown verdict {kind!r}")


def listen(addr: str, port: int) -> socket.socket:
    """The rendezvous socket on every interface of ``addr``'s family (OSError when the port is taken)."""
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with contextlib.suppress(OSError):
        family = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)[0][0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:  # both families: the headless ranks may resolve the address to either
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


def bind_failure(addr: str, port: int, error: OSError) -> RankSetError:
    return RankSetError(EXIT_BIND_FAILED, f"cannot listen on the master port {addr}:{port}: {error.strerror or error}")
