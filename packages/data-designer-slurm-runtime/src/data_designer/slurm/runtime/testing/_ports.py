"""Local ports for tests: one that nothing listens on."""

from __future__ import annotations

import socket


def closed_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that was free a moment ago: bound, never listened on, closed, so connections to it are
    refused (until something else takes it)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
    return port
