"""Cluster facts for planning and the fit check: one path for ``execute`` and ``execute --dry-run --cluster-check``.

Facts come from the workspace's cache while it is fresh (``runtime.facts``: younger than
``FACTS_MAX_AGE``), else from Slurm (``sinfo`` and ``scontrol show config``). The profile's
``gpus_per_node`` wins over the partition's GRES; ``auto`` takes the GPU partition's GRES when all its
nodes agree. A compiled plan is then checked against the partition it names (``planner.check_fit``)
and refused with one located problem per violation (exit 2), before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable

from data_designer.slurm.contracts import (
    ClusterFacts,
    ClusterProfile,
    ExecutionPlan,
    InvalidInputError,
    Problem,
    SchedulerFacts,
)
from data_designer.slurm.planner import check_fit
from data_designer.slurm.runtime.facts import FactsLookup, lookup_facts
from data_designer.slurm.runtime.scheduler import SlurmScheduler
from data_designer.slurm.runtime.store import Clock

DEFAULT_MAX_ARRAY_SIZE = 1001
"""Slurm's default MaxArraySize, assumed by a dry run unless told otherwise (and when Slurm prints none)."""


def cluster_facts(profile: ClusterProfile, scheduler: SlurmScheduler, clock: Clock) -> tuple[ClusterFacts, FactsLookup]:
    """The facts to compile with (and check against), and the lookup they came from (cached or asked now)."""
    lookup = lookup_facts(scheduler, profile.workspace_root, clock)
    return resolve_facts(profile, lookup.facts), lookup


def resolve_facts(profile: ClusterProfile, facts: SchedulerFacts) -> ClusterFacts:
    """GPUs per node (the profile's number, or for ``auto`` the GRES of the GPU partition), MaxArraySize, partitions."""
    gpus = profile.gpus_per_node if isinstance(profile.gpus_per_node, int) else _gpus_of_partition(profile, facts)
    return ClusterFacts(
        gpus_per_node=gpus,
        max_array_size=facts.max_array_size or DEFAULT_MAX_ARRAY_SIZE,
        partitions=facts.partitions,
    )


def _gpus_of_partition(profile: ClusterProfile, facts: SchedulerFacts) -> int:
    name = profile.partitions.gpu
    partition = facts.partition(name)
    counts = {shape.gpus for shape in partition.shapes} if partition is not None else set()
    if partition is None or not partition.shapes:
        detail = f"partition {name!r} is not in sinfo"
    elif None in counts:
        unreadable = next(s.gres for s in partition.shapes if s.gpus is None)
        detail = f"cannot read the GRES of partition {name!r}: {unreadable!r} is not a GRES list"
    else:
        detail = f"partition {name!r} has nodes with {', '.join(str(c) for c in sorted(c for c in counts if c is not None))} GPUs"
    known = {c for c in counts if c is not None}
    if None not in counts and len(known) == 1 and min(known) > 0:
        return known.pop()
    raise InvalidInputError(
        f"gpus_per_node is 'auto' and cannot be resolved: {detail}",
        code="unresolved",
        operation="execute.facts",
        key_path=("gpus_per_node",),
        hint="set gpus_per_node to a number, or use a GPU partition whose nodes all have the same GPU GRES",
    )


def refuse_misfit(plan: ExecutionPlan, facts: ClusterFacts, locate: Callable[[Problem], Problem]) -> None:
    """Exit 2 with every way ``plan`` does not fit the cluster, each located (``locate``) in the run file or profile."""
    problems = check_fit(plan, facts)
    if problems:
        located = [locate(problem) for problem in problems]
        raise InvalidInputError.from_problems(located, operation="execute.fit")
