"""Layout arithmetic of a plan (pure): shards -> record ranges, replicas -> nodes and GPUs, shards -> array chunks.

Packing is first-fit in declared order: each replica that fits on one node takes the first node
with enough free GPUs (a new node when none has); a replica needing more GPUs than a node has
spans whole nodes of its own and must use a multiple of the node's GPUs. Replicas without GPUs
share the first node. GPU indices are 0-based positions among the GPUs the job holds on a node.

``MaxArraySize`` caps the array *index* (indices are ``< max_array_size``), so a chunk holds at
most ``max_array_size`` tasks, numbered from 0 in every chunk; ``index_offset`` is the global
position of a chunk's index 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from data_designer.slurm.contracts import ArrayTaskBinding, ChunkLayout


def shard_ranges(records: int, *, shards: int | None = None, records_per_shard: int | None = None) -> list[range]:
    """Global record-index ranges of every shard: equal shares (the first ones one larger), or fixed-size shards.

    Raises ValueError when a shard would be empty (more shards than records).
    """
    if (shards is None) == (records_per_shard is None):
        raise ValueError("give exactly one of shards and records_per_shard")
    if records_per_shard is not None:
        return [range(start, min(start + records_per_shard, records)) for start in range(0, records, records_per_shard)]
    assert shards is not None
    if shards > records:
        raise ValueError(f"{shards} shards for {records} records would leave shards empty")
    base, extra = divmod(records, shards)
    out: list[range] = []
    start = 0
    for shard in range(shards):
        stop = start + base + (1 if shard < extra else 0)
        out.append(range(start, stop))
        start = stop
    return out


@dataclass(frozen=True)
class Placement:
    """Where one replica runs: its nodes (0-based) and, on each of them, the GPU indices it takes."""

    node_indices: tuple[int, ...]
    gpu_indices: tuple[int, ...]

    @property
    def gpus_per_node(self) -> int:
        return len(self.gpu_indices)


@dataclass(frozen=True)
class Packing:
    """The result of packing replicas onto nodes."""

    placements: tuple[Placement, ...]
    nodes: int
    gpus_used_per_node: tuple[int, ...]


class PackingError(ValueError):
    """A replica cannot be placed: ``index`` is its position in the request list."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


def pack_replicas(gpus_per_replica: Sequence[int], gpus_per_node: int) -> Packing:
    """Place replicas (GPUs each, in declared order) first-fit onto nodes of ``gpus_per_node`` GPUs.

    Raises PackingError for a replica spanning nodes whose GPU count is not a multiple of ``gpus_per_node``.
    """
    used: list[int] = []
    placements: list[Placement] = []
    for index, need in enumerate(gpus_per_replica):
        if need == 0:
            if not used:
                used.append(0)
            placements.append(Placement(node_indices=(0,), gpu_indices=()))
        elif need <= gpus_per_node:
            node = next((n for n, taken in enumerate(used) if gpus_per_node - taken >= need), None)
            if node is None:
                node = len(used)
                used.append(0)
            first = used[node]
            used[node] += need
            placements.append(Placement(node_indices=(node,), gpu_indices=tuple(range(first, first + need))))
        else:
            if need % gpus_per_node:
                raise PackingError(
                    index,
                    f"{need} GPUs span nodes of {gpus_per_node} GPUs but are not a multiple of {gpus_per_node}",
                )
            span = need // gpus_per_node
            first_node = len(used)
            used.extend([gpus_per_node] * span)
            placements.append(
                Placement(
                    node_indices=tuple(range(first_node, first_node + span)),
                    gpu_indices=tuple(range(gpus_per_node)),
                )
            )
    if not used:
        used.append(0)
    return Packing(placements=tuple(placements), nodes=len(used), gpus_used_per_node=tuple(used))


def chunk_shards(shards: int, *, max_array_size: int, throttle: int | None = None) -> tuple[ChunkLayout, ...]:
    """Array chunks for ``shards`` first attempts: at most ``max_array_size`` tasks each, indices from 0."""
    chunks: list[ChunkLayout] = []
    for number, offset in enumerate(range(0, shards, max_array_size)):
        count = min(max_array_size, shards - offset)
        spec = f"0-{count - 1}" + (f"%{throttle}" if throttle is not None else "")
        chunks.append(
            ChunkLayout(
                chunk=number,
                array_spec=spec,
                index_offset=offset,
                tasks=tuple(ArrayTaskBinding(index=i, shard=offset + i, attempt=1) for i in range(count)),
            )
        )
    return tuple(chunks)
