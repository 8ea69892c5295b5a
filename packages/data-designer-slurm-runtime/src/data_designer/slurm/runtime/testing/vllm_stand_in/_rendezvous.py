"""Rank 0's side of the rank set: gather the headless ranks on the master port, then watch them while serving.

:func:`gather` returns once every node rank 1..N-1 said a hello rank 0 accepts, and tells each ``joined``; it
refuses the set (telling every connected rank ``refused``, then raising :class:`RankSetError`) at the first
inconsistent hello or a rank that drops, or when the join timeout passes with a rank missing. A second rank 0 on
the same host finds the master port taken: it says hello to the first as node rank 0, which refuses the set.

:class:`Watcher` holds the accepted connections while the API is served: the first one that ends without a
``stopping`` message ends the process at once (``os._exit(EXIT_RANK_LOST)``); a ``stopping`` one interrupts the
main thread as SIGTERM would, so rank 0 stops gracefully and tells the others. Rank 0 keeps the master port
(as vLLM's rendezvous store does) and refuses any rank that connects after the set was complete.
"""

from __future__ import annotations

import _thread
import contextlib
import errno
import os
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from data_designer.slurm.runtime.testing.vllm_stand_in._args import (
    EXIT_RANK_LOST,
    EXIT_RANKS_MISSING,
    EXIT_RANKS_REFUSED,
    VllmServeArgs,
)
from data_designer.slurm.runtime.testing.vllm_stand_in._ranks import (
    Channel,
    PeerStopped,
    RankSetError,
    RankView,
    bind_failure,
    connect,
    keep_alive,
    listen,
    rank_problems,
    verdict,
)

STOPPING = {"type": "stopping"}
_DUPLICATE_WAIT_S = 5.0


@dataclass(frozen=True)
class RankSet:
    """The ranks that joined rank 0, and the master port it keeps (a late rank is refused there)."""

    listener: socket.socket
    channels: list[Channel]


def gather(head: RankView, args: VllmServeArgs, *, timeout_s: float, check_devices: bool) -> RankSet:
    """Node ranks 1..N-1, each told ``joined`` (see the module docstring for what is refused)."""
    try:
        listener = listen(args.master_addr, args.master_port)
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise bind_failure(args.master_addr, args.master_port, error) from None
        raise _as_duplicate(head, args, error) from None
    channels: list[Channel] = []
    try:
        joined = _collect(listener, channels, head, timeout_s=timeout_s, check_devices=check_devices)
    except RankSetError as error:
        for channel in channels:
            channel.send({"type": "refused", "exit_code": error.exit_code, "message": error.message})
            channel.close()
        if error.exit_code == EXIT_RANKS_REFUSED:
            raise RankSetError(error.exit_code, f"rank set refused: {error.message}") from None
        raise
    except BaseException:  # a peer stopped, or this rank was (SIGTERM): the others stop with it
        for channel in channels:
            channel.send(STOPPING)
            channel.close()
        listener.close()
        raise
    for channel in channels:
        if channel not in joined:
            channel.close()  # a connection that never said hello
    for channel in joined:
        channel.sock.setblocking(True)
        channel.send({"type": "joined", "nnodes": head.nnodes})
    return RankSet(listener, joined)


def _collect(
    listener: socket.socket, channels: list[Channel], head: RankView, *, timeout_s: float, check_devices: bool
) -> list[Channel]:
    deadline = time.monotonic() + timeout_s
    joined: dict[int, Channel] = {}
    listener.setblocking(False)
    with selectors.DefaultSelector() as selector:
        selector.register(listener, selectors.EVENT_READ)
        while len(joined) < head.nnodes - 1:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = [rank for rank in range(1, head.nnodes) if rank not in joined]
                raise RankSetError(
                    EXIT_RANKS_MISSING,
                    f"node ranks {missing} did not join within {timeout_s:g}s (joined: {sorted(joined) or 'none'})",
                )
            for key, _ in selector.select(remaining):
                if key.fileobj is listener:
                    with contextlib.suppress(OSError):  # nothing to accept after all, or it went away at once
                        sock, _ = listener.accept()
                        keep_alive(sock)
                        sock.setblocking(False)
                        channels.append(Channel(sock))
                        selector.register(sock, selectors.EVENT_READ, channels[-1])
                    continue
                channel: Channel = key.data
                try:
                    data = channel.sock.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(channel.sock)
                    if channel.peer is not None:
                        raise RankSetError(EXIT_RANK_LOST, f"{channel.peer.label} went away before every rank joined")
                    channels.remove(channel)  # connected and left without a word: not a rank
                    channel.close()
                    continue
                try:
                    messages = channel.feed(data)
                except ValueError as error:
                    raise RankSetError(
                        EXIT_RANKS_REFUSED, f"a malformed message from {_origin(channel)}: {error}"
                    ) from None
                for message in messages:
                    _take(message, channel, head, joined, check_devices=check_devices)
    return list(joined.values())


def _take(
    message: dict[str, object], channel: Channel, head: RankView, joined: dict[int, Channel], *, check_devices: bool
) -> None:
    kind = message.get("type")
    if kind == "stopping":
        raise PeerStopped(f"{_origin(channel)} was stopped before every rank joined")
    if kind != "hello" or channel.peer is not None:
        raise RankSetError(EXIT_RANKS_REFUSED, f"an unexpected {kind!r} message from {_origin(channel)}")
    try:
        rank = RankView.from_hello(message)
    except ValueError as error:
        raise RankSetError(EXIT_RANKS_REFUSED, f"a malformed hello from {_origin(channel)}: {error}") from None
    others = {number: other.peer for number, other in joined.items() if other.peer is not None}
    problems = rank_problems(rank, head, others, check_devices=check_devices)
    if problems:
        raise RankSetError(EXIT_RANKS_REFUSED, f"{rank.label}: {'; '.join(problems)}")
    channel.peer = rank
    joined[rank.node_rank] = channel


def _origin(channel: Channel) -> str:
    if channel.peer is not None:
        return channel.peer.label
    try:
        host, port = channel.sock.getpeername()[:2]
    except OSError:
        return "a connection"
    return f"a connection from {host}:{port}"


def _as_duplicate(head: RankView, args: VllmServeArgs, error: OSError) -> RankSetError:
    """Why a rank 0 whose master port is taken fails: the first rank 0's refusal of a second one, when the port's
    holder is a stand-in; else the bind failure."""
    try:
        channel = connect(args.master_addr, args.master_port, _DUPLICATE_WAIT_S)
    except RankSetError:
        return bind_failure(args.master_addr, args.master_port, error)
    try:
        channel.send(head.hello())
        verdict(channel, _DUPLICATE_WAIT_S)
    except RankSetError as refused:
        if refused.exit_code == EXIT_RANKS_REFUSED:
            return refused
    except PeerStopped:
        pass
    finally:
        channel.close()
    return bind_failure(args.master_addr, args.master_port, error)


class Watcher:
    """Watches the headless ranks' connections while rank 0 serves (a daemon thread), and refuses late ranks."""

    def __init__(self, ranks: RankSet, nnodes: int, say: Callable[[str], None]) -> None:
        self.listener = ranks.listener
        self.channels = ranks.channels
        self.nnodes = nnodes
        self.say = say
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vllm-stand-in-ranks", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Rank 0 stops gracefully: tell every rank (they exit 0), and let their connections end unremarked."""
        self.stopping.set()
        for channel in self.channels:
            channel.send(STOPPING)

    def _run(self) -> None:
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self.listener, selectors.EVENT_READ)
                for channel in self.channels:
                    selector.register(channel.sock, selectors.EVENT_READ, channel)
                while selector.get_map():
                    for key, _ in selector.select():
                        if key.fileobj is self.listener:
                            self._refuse_late()
                        else:
                            self._read(selector, key.data)
        except (OSError, ValueError):
            if not self.stopping.is_set():
                raise

    def _refuse_late(self) -> None:
        with contextlib.suppress(OSError):
            sock, (host, port, *_) = self.listener.accept()
            late = Channel(sock)
            message = f"a connection from {host}:{port} came after all {self.nnodes} ranks joined"
            self.say(f"refused {message}")
            late.send({"type": "refused", "exit_code": EXIT_RANKS_REFUSED, "message": message})
            late.close()

    def _read(self, selector: selectors.BaseSelector, channel: Channel) -> None:
        try:
            data = channel.sock.recv(4096)
        except OSError:
            data = b""
        try:
            stopped = any(message.get("type") == "stopping" for message in channel.feed(data))
        except ValueError:
            stopped = False
        if stopped:
            selector.unregister(channel.sock)
            if not self.stopping.is_set():
                self.stopping.set()  # the others stop too: their connections may end before rank 0 tells them
                self.say(f"{_origin(channel)} was stopped: stopping the replica")
                _thread.interrupt_main(signal.SIGTERM)
            return
        if data:
            return
        selector.unregister(channel.sock)
        if self.stopping.is_set():
            return
        self.say(f"{_origin(channel)} went away: the replica is lost")
        sys.stderr.flush()
        os._exit(EXIT_RANK_LOST)
