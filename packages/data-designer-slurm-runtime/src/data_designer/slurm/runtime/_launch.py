"""``python -m data_designer.slurm.runtime._launch``: start one server task on its node with a probed port.

The supervisor runs this as every server replica's ``srun`` step task. On the node it was placed on,
it binds port 0 on the replica's bind address to learn a port that is free there, publishes it
(write-once record ``ports/<alias>-<replica>.<task>.json`` in the attempt directory, with the node,
``SLURM_STEP_GPUS`` and ``CUDA_VISIBLE_DEVICES`` it saw), closes the socket and ``exec``s the server
argv template bound to that host and port (and the per-attempt API key from the environment, which
it also hands to vLLM as ``VLLM_API_KEY``). The process keeps its pid, so signals from ``srun`` reach
the server itself.

Standalone on purpose: with pyxis the whole step runs inside the server's image, whose ``python3`` has
none of our packages, so the supervisor runs this file by path (``python3 -I /path/to/_launch.py``).
It imports the standard library only, runs on Python 3.8 and later, and re-implements the three things
it shares with the rest of the project byte for byte (tests hold it to them): the planner's
``bind_argv``, the canonical JSON of ``planner/_digest.py`` and the write-once record protocol of
``runtime/store/_record_io.py`` (temporary file, fsync, ``link(2)``, fsync of the directory).

A replica that spans nodes (``--rank-templates``: one argv template per node rank, the step's task
``SLURM_PROCID`` running its own) also needs a rendezvous: rank 0's launcher probes a second free
port, the **master port**, and publishes it in its port record; every other rank's launcher waits
(up to ``--join-timeout-s``) for that record and takes the port from it. ``{master_addr}`` is the
step's first node as the supervisor resolved it (``--master-addr``), ``{master_port}`` that port.

Between closing the probe socket and the server binding the port, another process could take it;
the server then fails to bind and exits, which the supervisor reports with the server's log tail.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import secrets
import socket
import stat
import string
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

EXIT_LAUNCH_FAILED = 97
"""The launcher itself failed (bad arguments, no free port, unwritable attempt directory, exec failed)."""

SERVER_API_KEY_ENV = "DDSLURM_SERVER_API_KEY"
"""The per-attempt key's variable (the planner's ``SERVER_API_KEY_ENV``; a test keeps them equal)."""
VLLM_API_KEY_ENV = "VLLM_API_KEY"
"""Where vLLM reads its API key from: set to the per-attempt key whenever one is present."""
PORT_SCHEMA_NAME = "replica-port"
PORT_SCHEMA_VERSION = 1
"""The port record's schema (``supervisor/_records.py`` ``PORT_SCHEMA``; a test keeps them equal)."""

_FORMATTER = string.Formatter()
_UTC = timezone(timedelta(0))  # the datetime module's UTC constant is Python 3.11+


def port_record_name(alias: str, replica: int, task: int) -> str:
    return f"{alias}-{replica}.{task}.json"


def probe_port(host: str) -> int:
    """A port that is free on ``host`` of this node right now (bind port 0, read it back, close)."""
    return probe_ports(host, 1)[0]


def probe_ports(host: str, count: int) -> tuple[int, ...]:
    """``count`` distinct ports free on ``host`` right now (all held open together while probing, then closed)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            probe = stack.enter_context(socket.socket(family, socket.SOCK_STREAM))
            probe.bind((host, 0))
            ports.append(int(probe.getsockname()[1]))
    return tuple(ports)


def wait_for_master_port(path: str, timeout_s: float, *, interval_s: float = 0.2) -> int:
    """The master port rank 0's launcher published in its port record at ``path`` (TimeoutError after ``timeout_s``).

    The record is checked as the store reads it: schema, checksum over the canonical envelope, a positive port.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        port = _master_port_in(path)
        if port is not None:
            return port
        if time.monotonic() >= deadline:
            raise TimeoutError(f"rank 0 published no master port in {path!r} within {timeout_s:g}s")
        time.sleep(interval_s)


def _master_port_in(path: str) -> int | None:
    try:
        with open(path, "rb") as stream:
            body = json.loads(stream.read(64 * 1024))
    except (OSError, ValueError):
        return None  # not there yet (or not complete: records appear by link(2), whole)
    if not isinstance(body, dict) or body.get("schema_name") != PORT_SCHEMA_NAME:
        raise ValueError(f"{path!r} is not a port record")
    checksum = body.pop("checksum", None)
    if checksum != hashlib.sha256(canonical_json(body)).hexdigest():
        raise ValueError(f"{path!r} fails its checksum")
    payload = body.get("payload")
    port = payload.get("master_port") if isinstance(payload, dict) else None
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise ValueError(f"{path!r} holds no master port")
    return port


def bind_argv(argv: Sequence[str], values: Mapping[str, str]) -> tuple[str, ...]:
    """The planner's ``bind_argv``: ``{name}`` -> ``values[name]``, ``{{``/``}}`` -> braces (KeyError: no value)."""
    out = []
    for element in argv:
        parts = []
        for literal, field, _spec, _conversion in _FORMATTER.parse(element):
            parts.append(literal)
            if field is not None:
                parts.append(values[field])
        out.append("".join(parts))
    return tuple(out)


def canonical_json(value: Any) -> bytes:
    """The project's canonical JSON for plain values (strings, integers, null, lists, string-keyed objects)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return text.encode("ascii")


def format_timestamp(when: datetime) -> str:
    """``written_at``: UTC, always six fractional digits (``runtime/store/_record_io.py`` ``format_timestamp``)."""
    return when.astimezone(_UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_datetime(when: datetime) -> str:
    """A payload time as pydantic writes an aware datetime in UTC: ``Z``, fraction only when non-zero."""
    when = when.astimezone(_UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{when.microsecond:06d}Z" if when.microsecond else "Z")


def record_bytes(schema_name: str, schema_version: int, payload: dict[str, Any], written_at: datetime) -> bytes:
    """The exact bytes of a record file: ``canonical_json(envelope) + "\\n"`` with the envelope's checksum."""
    body: dict[str, Any] = {
        "schema_name": schema_name,
        "schema_version": schema_version,
        "written_at": format_timestamp(written_at),
        "payload": payload,
    }
    body["checksum"] = hashlib.sha256(canonical_json(body)).hexdigest()
    return canonical_json(body) + b"\n"


def publish_once(path: str, data: bytes) -> bool:
    """Create ``path`` with ``data`` (temporary file, fsync, ``link(2)``, fsync the directory); False if it exists."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    temp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            # the store's rule (modes_of_directory, planner/_files.py): a setgid directory is a group-shared workspace
            os.fchmod(fd, 0o660 if os.stat(directory).st_mode & stat.S_ISGID else 0o600)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)
        except FileExistsError:
            # A lost NFS reply can turn our own successful link into EEXIST: the link count tells.
            if os.stat(temp).st_nlink < 2:
                return False
        _fsync_directory(directory)
        return True
    finally:
        with contextlib.suppress(OSError):  # already gone: nothing a reader would count is left behind
            os.unlink(temp)


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # some filesystems refuse opening directories; the link is still atomic
        return
    try:
        with contextlib.suppress(OSError):  # fsync on a directory is unsupported on some filesystems
            os.fsync(fd)
    finally:
        os.close(fd)


def server_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: ``environ``, plus ``VLLM_API_KEY`` set to the per-attempt key when there is one."""
    env = dict(environ)
    key = environ.get(SERVER_API_KEY_ENV)
    if key:
        env[VLLM_API_KEY_ENV] = key
    return env


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m data_designer.slurm.runtime._launch")
    parser.add_argument("--port-dir", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--replica", type=int, required=True)
    parser.add_argument("--bind-host", required=True)
    parser.add_argument("--rank-templates", help="JSON: one server argv template per node rank (instead of '--')")
    parser.add_argument("--master-addr", help="the step's first node: what {master_addr} binds to")
    parser.add_argument("--join-timeout-s", type=float, default=600.0, help="how long a rank > 0 waits for rank 0")
    parser.add_argument("template", nargs=argparse.REMAINDER, help="-- then the server argv template")
    return parser


def _templates(args: argparse.Namespace) -> list[list[str]]:
    template = args.template[1:] if args.template[:1] == ["--"] else args.template
    if args.rank_templates is None:
        if not template:
            raise ValueError("no server argv after '--'")
        return [template]
    if template:
        raise ValueError("give the server argv either after '--' or as --rank-templates, not both")
    ranks = json.loads(args.rank_templates)
    if not (
        isinstance(ranks, list)
        and ranks
        and all(isinstance(r, list) and r and all(isinstance(w, str) for w in r) for r in ranks)
    ):
        raise ValueError("--rank-templates is not a JSON list of argv templates")
    if args.master_addr is None:
        raise ValueError("--rank-templates needs --master-addr")
    return ranks


def launch(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[str, ...]:
    """Probe, publish the port record, and return the bound server argv to exec."""
    args = _parser().parse_args(list(argv))
    templates = _templates(args)
    task = int(environ.get("SLURM_PROCID", "0") or "0")
    if args.rank_templates is not None and not 0 <= task < len(templates):
        raise ValueError(f"task {task} has no rank template ({len(templates)} ranks)")
    template = templates[task] if args.rank_templates is not None else templates[0]
    spans_nodes = args.rank_templates is not None and len(templates) > 1
    master_port: int | None = None
    if spans_nodes and task == 0:
        port, master_port = probe_ports(args.bind_host, 2)
    else:
        port = probe_port(args.bind_host)
    if spans_nodes and task > 0:
        head = os.path.join(args.port_dir, port_record_name(args.alias, args.replica, 0))
        master_port = wait_for_master_port(head, args.join_timeout_s)
    payload = {
        "alias": args.alias,
        "replica": args.replica,
        "task": task,
        "bind_host": args.bind_host,
        "port": port,
        "hostname": socket.gethostname(),
        "node": environ.get("SLURMD_NODENAME"),
        "step_gpus": environ.get("SLURM_STEP_GPUS"),
        "cuda_visible_devices": environ.get("CUDA_VISIBLE_DEVICES"),
        "pid": os.getpid(),
        "probed_at": format_datetime(datetime.now(_UTC)),
        "master_port": master_port,
    }
    data = record_bytes(PORT_SCHEMA_NAME, PORT_SCHEMA_VERSION, payload, datetime.now(_UTC))
    path = os.path.join(args.port_dir, port_record_name(args.alias, args.replica, task))
    if not publish_once(path, data):
        raise FileExistsError(f"{path!r} already exists: the attempt directory was reused")
    values = {"host": args.bind_host, "port": str(port), "api_key": environ.get(SERVER_API_KEY_ENV, "")}
    if args.master_addr is not None:
        values["master_addr"] = args.master_addr
    if master_port is not None:
        values["master_port"] = str(master_port)
    return bind_argv(template, values)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        server = launch(sys.argv[1:] if argv is None else argv, os.environ)
        sys.stdout.flush()
        os.execvpe(server[0], list(server), server_environment(os.environ))
    except Exception as exc:  # any failure ends the step: say why in its log (the supervisor shows the tail)
        print(f"launch: {type(exc).__name__}: {exc}", file=sys.stderr)
    return EXIT_LAUNCH_FAILED


if __name__ == "__main__":
    raise SystemExit(main())
