"""The allocation's nodes and their addresses, from Slurm (``scontrol``, through the command runner)."""

from __future__ import annotations

from collections.abc import Mapping

from data_designer.slurm.runtime.scheduler import CommandRunner
from data_designer.slurm.runtime.supervisor._environment import SetupError

SCONTROL_TIMEOUT_S = 30.0


def parse_node_addresses(text: str) -> dict[str, str]:
    """``NodeName -> NodeAddr`` from ``scontrol -o show node`` (one node per line)."""
    addresses: dict[str, str] = {}
    for line in text.splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        name, address = fields.get("NodeName"), fields.get("NodeAddr")
        if name and address:
            addresses[name] = address
    return addresses


def allocation_nodes(environ: Mapping[str, str], runner: CommandRunner) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(node names in allocation order, their addresses); a node Slurm gives no address for is reached by name."""
    nodelist = environ.get("SLURM_JOB_NODELIST", "")
    if not nodelist:
        raise SetupError("invalid_config", "SLURM_JOB_NODELIST is not set: the supervisor runs only inside a Slurm job")
    names_result = runner.run(["scontrol", "show", "hostnames", nodelist], timeout_s=SCONTROL_TIMEOUT_S)
    names = tuple(names_result.stdout.split())
    if not names_result.ok or not names:
        raise SetupError("invalid_config", f"cannot expand the node list {nodelist!r}: {names_result.describe()}")
    shown = runner.run(["scontrol", "-o", "show", "node", ",".join(names)], timeout_s=SCONTROL_TIMEOUT_S)
    addresses = parse_node_addresses(shown.stdout) if shown.ok else {}
    return names, tuple(addresses.get(name, name) for name in names)
