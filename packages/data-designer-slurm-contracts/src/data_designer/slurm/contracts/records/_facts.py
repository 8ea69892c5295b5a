"""``<workspace>/cluster/facts.json``: the cluster facts last read from Slurm (a mutable cache, replaced atomically).

Any process that reads the facts afresh may replace it (last writer wins; every version is a whole,
valid record). Readers reuse it while it is younger than the documented age and treat a missing,
corrupt or future-dated record as absent (they ask Slurm again).
"""

from __future__ import annotations

from data_designer.slurm.contracts._cluster_facts import SchedulerFacts
from data_designer.slurm.contracts.records._schema import RecordSchema

FACTS_SCHEMA: RecordSchema[SchedulerFacts] = RecordSchema("cluster-facts", 1, SchedulerFacts)
