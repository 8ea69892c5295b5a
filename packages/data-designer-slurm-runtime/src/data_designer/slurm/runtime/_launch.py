"""``python -m data_designer.slurm.runtime._launch``: start one server task on its node with a probed port.

The supervisor runs this as every server replica's ``srun`` step task. On the node it was placed on,
it binds port 0 on the replica's bind address to learn a port that is free there, publishes it
(write-once record ``ports/<alias>-<replica>.<task>.json`` in the attempt directory, with the node,
``SLURM_STEP_GPUS`` and ``CUDA_VISIBLE_DEVICES`` it saw), closes the socket and ``exec``s the server
argv template bound to that host and port (and the per-attempt API key from the environment).
The process keeps its pid, so signals from ``srun`` reach the server itself.

Between closing the probe socket and the server binding the port, another process could take it;
the server then fails to bind and exits, which the supervisor reports with the server's log tail.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from data_designer.slurm.planner import SERVER_API_KEY_ENV, bind_argv
from data_designer.slurm.runtime._records import system_clock, write_record_once
from data_designer.slurm.runtime.supervisor._records import PORT_SCHEMA, PortRecord

EXIT_LAUNCH_FAILED = 97
"""The launcher itself failed (bad arguments, no free port, unwritable attempt directory, exec failed)."""


def port_record_name(alias: str, replica: int, task: int) -> str:
    return f"{alias}-{replica}.{task}.json"


def probe_port(host: str) -> int:
    """A port that is free on ``host`` of this node right now (bind port 0, read it back, close)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
    return port


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m data_designer.slurm.runtime._launch")
    parser.add_argument("--port-dir", type=Path, required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--replica", type=int, required=True)
    parser.add_argument("--bind-host", required=True)
    parser.add_argument("template", nargs=argparse.REMAINDER, help="-- then the server argv template")
    return parser


def launch(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[str, ...]:
    """Probe, publish the port record, and return the bound server argv to exec."""
    args = _parser().parse_args(argv)
    template = args.template[1:] if args.template[:1] == ["--"] else args.template
    if not template:
        raise ValueError("no server argv after '--'")
    task = int(environ.get("SLURM_PROCID", "0") or "0")
    port = probe_port(args.bind_host)
    record = PortRecord(
        alias=args.alias,
        replica=args.replica,
        task=task,
        bind_host=args.bind_host,
        port=port,
        hostname=socket.gethostname(),
        node=environ.get("SLURMD_NODENAME"),
        step_gpus=environ.get("SLURM_STEP_GPUS"),
        cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES"),
        pid=os.getpid(),
        probed_at=system_clock(),
    )
    write_record_once(
        args.port_dir / port_record_name(args.alias, args.replica, task), PORT_SCHEMA, record, operation="launch"
    )
    values = {"host": args.bind_host, "port": str(port), "api_key": environ.get(SERVER_API_KEY_ENV, "")}
    return bind_argv(template, values)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        server = launch(sys.argv[1:] if argv is None else argv, os.environ)
        sys.stdout.flush()
        os.execvp(server[0], list(server))
    except Exception as exc:  # any failure ends the step: say why in its log (the supervisor shows the tail)
        print(f"launch: {type(exc).__name__}: {exc}", file=sys.stderr)
    return EXIT_LAUNCH_FAILED


if __name__ == "__main__":
    raise SystemExit(main())
