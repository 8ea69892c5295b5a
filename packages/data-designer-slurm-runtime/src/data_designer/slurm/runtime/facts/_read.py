"""Cluster facts from Slurm: one ``sinfo`` and one ``scontrol show config`` call, folded by a pure function.

``sinfo`` prints one row per partition, node state and node shape (``SINFO_FORMAT``); rows of one
partition are summed into its node count and grouped into :class:`NodeShape` values (CPUs, memory,
GPUs). The partition's time limit (``%l``) is its MaxTime: ``infinite`` is None, any other text
must be a Slurm duration. A GRES that cannot be read leaves that shape's GPUs None (the fit check
then cannot vouch for GPUs and says so), never 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from data_designer.slurm.contracts import NodeShape, PartitionFacts, SchedulerFacts, parse_time_limit
from data_designer.slurm.runtime.probe import gpus_in_gres
from data_designer.slurm.runtime.scheduler import PartitionRow, SlurmOutputError, SlurmScheduler

_INFINITE = frozenset({"infinite", "UNLIMITED", "n/a", "N/A"})


def scheduler_facts(rows: Sequence[PartitionRow], config: Mapping[str, str], *, read_at: datetime) -> SchedulerFacts:
    """The facts of ``sinfo`` rows and ``scontrol show config``; raises :class:`SlurmOutputError` for unusable rows."""
    by_name: dict[str, list[PartitionRow]] = {}
    for row in rows:
        by_name.setdefault(row.name, []).append(row)
    partitions = [_partition(name, group) for name, group in by_name.items()]
    raw = config.get("MaxArraySize", "").strip()
    max_array_size = int(raw) if raw.isascii() and raw.isdigit() and int(raw) > 0 else None
    name = config.get("ClusterName", "").strip() or None
    return SchedulerFacts(
        read_at=read_at, cluster_name=name, max_array_size=max_array_size, partitions=tuple(partitions)
    )


def read_facts(scheduler: SlurmScheduler, clock: Callable[[], datetime]) -> SchedulerFacts:
    """Ask Slurm (two calls); :class:`UnavailableError` when either fails or prints what cannot be read."""
    read_at = clock()
    return scheduler_facts(scheduler.partitions(), scheduler.cluster_config(), read_at=read_at)


def _partition(name: str, rows: Sequence[PartitionRow]) -> PartitionFacts:
    shapes: dict[tuple[int, int, int | None, str | None], int] = {}
    for row in rows:
        if row.cpus is None or row.cpus < 1 or row.memory_mb is None:
            continue  # a row without numbers (nodes never registered) offers nothing a check could count on
        try:
            gpus: int | None = gpus_in_gres(row.gres)
        except ValueError:
            gpus = None
        key = (row.cpus, row.memory_mb, gpus, row.gres)
        shapes[key] = shapes.get(key, 0) + row.nodes
    limit = rows[0].time_limit
    max_time_s = None
    if limit not in _INFINITE:
        max_time_s = parse_time_limit(limit)
        if max_time_s is None or max_time_s <= 0:
            raise SlurmOutputError(f"partition {name!r} has the time limit {limit!r}, not a duration", command="sinfo")
    ordered = sorted(shapes.items(), key=lambda item: (-item[1], item[0][0], item[0][1]))
    return PartitionFacts(
        name=name,
        default=any(r.default for r in rows),
        nodes=sum(r.nodes for r in rows),
        shapes=tuple(
            NodeShape(cpus=cpus, memory_mb=memory, gpus=gpus, gres=gres, nodes=count)
            for (cpus, memory, gpus, gres), count in ordered
        ),
        max_time_s=max_time_s,
        max_time=limit,
    )
