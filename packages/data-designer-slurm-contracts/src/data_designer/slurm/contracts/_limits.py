"""Caps on authored inputs: each one far above what a real large run needs, low enough to keep planning bounded.

Without caps a hostile or mistyped value costs memory in proportion to it: ``shards: 10000000`` makes ten
million shard plans (past 3 GB), ``replicas`` or ``tensor_parallel`` of ``10**9`` make a billion placements,
and a 50 MB YAML file takes close to a minute to parse. Every cap is checked before anything proportional to
the value is allocated (``data_designer.slurm.planner`` checks runs and benchmarks first thing; the readers
check a file's type and size before reading it), and a value over a cap is an ``InvalidInputError`` (exit 2)
naming the key, the value and the cap. ``benchmarks/bench_limits.py`` measures the planner at the caps.
"""

from __future__ import annotations

MAX_SHARDS = 100_000
"""Shards of one run (``sharding.shards``, or ``records`` over ``records_per_shard``). Each shard is one Slurm
allocation; 100,000 is ten times the largest runs we plan for. A plan at the cap compiles in about 2.5 s, is
12.5 MiB of JSON and peaks near 250 MiB resident, which a shared login node can afford."""

MAX_REPLICAS_PER_DEPLOYMENT = 1_024
"""``replicas`` of one deployment (also as set by a benchmark's ``replicas`` or ``nodes`` axis): 128 nodes of
eight one-GPU replicas inside one allocation."""

MAX_REPLICAS = 2_048
"""Replicas of every deployment of one run together: each is a placement, a server argv and a health check in
the allocation, all in the plan."""

MAX_TENSOR_PARALLEL = 1_024
"""``tensor_parallel`` of a vLLM deployment: far beyond the largest NVLink domain."""

MAX_PIPELINE_PARALLEL = 1_024
"""``pipeline_parallel`` of a vLLM deployment."""

MAX_GPUS_PER_REPLICA = 4_096
"""GPUs of one replica (``tensor_parallel * pipeline_parallel``, or ``gpus_per_replica``): a replica spanning
nodes lists each of its nodes in the plan."""

MAX_ALLOCATION_GPUS = 16_384
"""GPUs of one allocation (every replica of every deployment): 2,048 nodes of eight GPUs, which bounds the
nodes the packing lists."""

MAX_REPEATS = 100
"""``repeats`` of a benchmark: each repeat is one more allocation measured."""

MAX_BENCHMARK_CHILDREN = 5_000
"""Children of a benchmark: the product of every axis's number of values times ``repeats``, checked before the
axes are expanded. Each child is an allocation measured (a real sweep has tens to hundreds); each distinct case
is a compiled plan: 4,900 distinct cases expand in about 2.5 s, peaking near 120 MiB resident."""

MAX_BENCHMARK_REPLICAS = 20_000
"""Replicas over every distinct case of a benchmark (repeats share their case's plan): bounds what the children's
plans hold together when a ``replicas`` or ``nodes`` axis makes each case large."""

MAX_INPUT_FILE_BYTES = 4 * 2**20
"""Size of an authored file: profile, run file, benchmark file, Data Designer config (YAML or JSON). Hand- or
builder-written files are kilobytes; parsing runs at about 1 s per MiB, so the cap bounds it to a few seconds."""

MAX_DOCUMENT_NODES = 100_000
"""Nodes of one authored file: every scalar, list, mapping, mapping key and list item counts one (``{a: [1, 2]}``
is five). Counted while the file is composed and refused at the first node past the cap, before any of it is
validated: under the size cap a dense file (``[1,1,1,...]``, 250,000 keys, an axis of 400,000 values) would
otherwise hold a million nodes and take close to a minute and a gigabyte to read. Real files hold hundreds to a few
thousand nodes; a benchmark axis at its longest (``MAX_AXIS_VALUES``) is 5,000."""

MAX_REPORTED_PROBLEMS = 50
"""Problems reported for one file: the first 50 in file order, then one saying how many more there are (each
problem costs a message, a hint and its redaction; a file with thousands of them is fixed 50 at a time)."""

MAX_AXIS_VALUES = MAX_BENCHMARK_CHILDREN
"""Values of one benchmark axis: an axis longer than the children cap could never expand, so the contract refuses
it while reading, before the children are counted."""

MAX_RECORDS = 10**12
"""Records of one run (``records``) or of each benchmark child (``records.records``, ``records.max_records``).
Every record has a global index in the ``_dd_index`` column (int64, up to ``2**63 - 1``); a trillion records is
far beyond any real dataset and keeps every index, and every sum of records, well inside it."""

MAX_SEED_FILE_BYTES = 2**30
"""Size of one seed dataset file snapshotted into a run directory (it is read whole to be copied and digested).
A larger seed dataset is split into several files named by a directory or a glob."""


def describe_bytes(size: int) -> str:
    """``size`` in bytes for a message: ``4 MiB (4,194,304 bytes)``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.4g} {unit} ({size:,} bytes)"
    return f"{size:,} bytes"
