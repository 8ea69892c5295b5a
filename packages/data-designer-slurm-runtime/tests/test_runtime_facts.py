"""Cluster facts: sinfo rows and scontrol config folded into partitions, and the workspace cache (fresh vs stale)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from data_designer.slurm.contracts import NodeShape, UnavailableError
from data_designer.slurm.runtime.facts import (
    FACTS_MAX_AGE,
    cached_facts,
    facts_path,
    lookup_facts,
    read_facts,
    save_facts,
    scheduler_facts,
)
from data_designer.slurm.runtime.scheduler import SlurmOutputError, SlurmScheduler, parse_sinfo
from data_designer.slurm.runtime.store import PRIVATE_MODES
from data_designer.slurm.runtime.testing import FakeSlurm

READ_AT = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
SINFO = """\
cpu*|up|infinite|1|mix|node1|4|4000|gpu:2
cpu*|up|infinite|3|idle|node[2-4]|4|4000|gpu:2
gpu|up|1-00:00:00|2|idle|node[1-2]|8|64000|gpu:a100:4(S:0-1)
gpu|up|1-00:00:00|1|down*|node3|8|64000|gpu:a100:4(S:0-1)
gpu|up|1-00:00:00|1|idle|node4|4|4000|gpu:2
short|up|30:00|4|idle|node[1-4]|4|4000|weird[gres
"""
CONFIG = {"MaxArraySize": "11", "ClusterName": "ddslurm"}


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_rows_of_one_partition_are_summed_and_grouped_by_shape() -> None:
    facts = scheduler_facts(parse_sinfo(SINFO), CONFIG, read_at=READ_AT)
    assert (facts.cluster_name, facts.max_array_size, facts.read_at) == ("ddslurm", 11, READ_AT)
    cpu, gpu, short = facts.partitions
    assert (cpu.name, cpu.default, cpu.nodes, cpu.max_time_s, cpu.max_time) == ("cpu", True, 4, None, "infinite")
    assert cpu.shapes == (NodeShape(cpus=4, memory_mb=4000, gpus=2, gres="gpu:2", nodes=4),)
    assert (gpu.nodes, gpu.max_time_s) == (4, 86400)
    assert [(s.cpus, s.memory_mb, s.gpus, s.nodes) for s in gpu.shapes] == [(8, 64000, 4, 3), (4, 4000, 2, 1)]
    assert gpu.nodes_fitting(cpus=8, memory_mb=32000, gpus=4) == 3
    assert gpu.nodes_fitting(cpus=4, gpus=2) == 4
    assert (short.max_time_s, short.shapes[0].gpus) == (1800, None)  # an unreadable GRES is unknown, not 0


def test_no_max_array_size_is_none_and_a_bad_time_limit_is_unreadable() -> None:
    assert scheduler_facts((), {}, read_at=READ_AT).max_array_size is None
    with pytest.raises(SlurmOutputError, match="not a duration"):
        scheduler_facts(parse_sinfo("gpu|up|soon|1|idle|n1|4|4000|gpu:2\n"), CONFIG, read_at=READ_AT)


def test_read_facts_asks_sinfo_and_scontrol_once_each() -> None:
    fake = FakeSlurm(node_cpus=4, node_memory_mb=4000, partitions={"cpu": "infinite", "short": "30:00"})
    facts = read_facts(SlurmScheduler(fake), Clock(READ_AT))
    assert [argv[0] for argv in fake.calls] == ["sinfo", "scontrol"]
    assert [(p.name, p.default, p.max_time_s) for p in facts.partitions] == [
        ("cpu", True, None),
        ("short", False, 1800),
    ]
    assert facts.partitions[0].shapes == (NodeShape(cpus=4, memory_mb=4000, gpus=2, gres="gpu:2", nodes=4),)


def test_an_unanswering_scheduler_is_unavailable() -> None:
    fake = FakeSlurm()
    fake.fail("sinfo")
    with pytest.raises(UnavailableError):
        read_facts(SlurmScheduler(fake), Clock(READ_AT))


def test_fresh_facts_are_reused_and_stale_ones_asked_again(tmp_path: Path) -> None:
    fake = FakeSlurm()
    clock = Clock(READ_AT)
    first = lookup_facts(SlurmScheduler(fake), tmp_path, clock)
    assert first.asked
    assert not facts_path(tmp_path).exists()  # a lookup writes nothing
    written = save_facts(tmp_path, first.facts, PRIVATE_MODES, clock)
    assert written == tmp_path / "cluster" / "facts.json"
    assert written.stat().st_mode & 0o777 == 0o600

    clock.now = READ_AT + FACTS_MAX_AGE  # exactly the documented age: still fresh
    again = lookup_facts(SlurmScheduler(fake), tmp_path, clock)
    assert (again.asked, again.facts) == (False, first.facts)
    assert fake.count_calls("sinfo") == 1

    clock.now = READ_AT + FACTS_MAX_AGE + timedelta(seconds=1)
    stale = lookup_facts(SlurmScheduler(fake), tmp_path, clock)
    assert stale.asked
    assert stale.facts.read_at == clock.now
    assert fake.count_calls("sinfo") == 2

    clock.now = READ_AT
    assert lookup_facts(SlurmScheduler(fake), tmp_path, clock, refresh=True).asked  # the probe's refresh


def test_a_corrupt_or_future_cache_counts_as_no_facts(tmp_path: Path) -> None:
    clock = Clock(READ_AT)
    facts = read_facts(SlurmScheduler(FakeSlurm()), clock)
    save_facts(tmp_path, facts, PRIVATE_MODES, clock)
    clock.now = READ_AT - timedelta(minutes=1)  # read "in the future": a clock that jumped
    assert cached_facts(tmp_path, clock) is None
    clock.now = READ_AT
    assert cached_facts(tmp_path, clock) == facts
    path = facts_path(tmp_path)
    path.write_bytes(path.read_bytes().replace(b'"ddslurm"', b'"other"').replace(b"fakeslurm", b"fakeslurn"))
    assert cached_facts(tmp_path, clock) is None  # the checksum no longer matches
    path.write_text("{", encoding="utf-8")
    assert cached_facts(tmp_path, clock) is None
