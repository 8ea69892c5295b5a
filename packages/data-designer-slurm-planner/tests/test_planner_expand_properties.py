"""expand() is a function of its inputs: same benchmark (any key order, YAML or JSON, any process) -> same digest."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data_designer.slurm.contracts import BenchmarkPlan, BenchmarkSpec, ClusterProfile
from data_designer.slurm.planner import parse_document, validate_document
from data_designer.slurm.planner._expand import expand
from data_designer.slurm.planner._inputs import load_base_run, resolve_config

ORDERED_KEYS = frozenset({"deployments", "external"})
"""Mappings whose declared order is meaningful (replicas pack in it): never shuffled."""

PROFILE: dict[str, Any] = {
    "workspace_root": "/ws",
    "partitions": {"gpu": "gpu", "cpu": "cpu"},
    "gpus_per_node": 4,
    "compute_python": {"interpreter": "/venv/bin/python"},
}

BASE: dict[str, Any] = {
    "schema_version": 1,
    "name": "base",
    "data_designer": {
        "inline": {
            "model_configs": [{"alias": "writer", "model": "m", "provider": "local"}],
            "columns": [{"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "x"}],
        }
    },
    "records": 100,
    "sharding": {"shards": 2},
    "deployments": {"writer": {"engine": "vllm", "model": "/m/writer"}},
}

UNIQUE_INTS = st.lists(st.integers(1, 512), min_size=1, max_size=3, unique=True)
AXES = st.fixed_dictionaries(
    {},
    optional={
        "concurrency": UNIQUE_INTS.map(lambda v: {"axis": "concurrency", "alias": "writer", "values": v}),
        "tensor_parallel": st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=3, unique=True).map(
            lambda v: {"axis": "tensor_parallel", "alias": "writer", "values": v}
        ),
        "engine_arg": UNIQUE_INTS.map(
            lambda v: {"axis": "engine_arg", "alias": "writer", "arg": "max-num-seqs", "values": v}
        ),
        "model": st.lists(st.sampled_from(["/m/a", "/m/b", "/m/c"]), min_size=1, max_size=3, unique=True).map(
            lambda v: {"axis": "model", "alias": "writer", "values": v}
        ),
    },
)
POLICIES = st.one_of(
    st.integers(1, 10_000).map(lambda n: {"policy": "fixed", "records": n}),
    st.tuples(st.integers(1, 50), st.integers(1, 500), st.integers(0, 5000)).map(
        lambda t: {"policy": "scaled", "per_concurrency": t[0], "min_records": t[1], "max_records": t[1] + t[2]}
    ),
)
BENCHMARKS = st.builds(
    lambda axes, order, repeats, records, exclusive: {
        "schema_version": 1,
        "name": "sweep",
        "base": {"inline": BASE},
        "axes": [axes[key] for key in order if key in axes],
        "repeats": repeats,
        "records": records,
        "exclusive": exclusive,
    },
    AXES,
    st.permutations(["concurrency", "tensor_parallel", "engine_arg", "model"]),
    st.integers(1, 3),
    POLICIES,
    st.booleans(),
)


def shuffled(value: Any, rng: random.Random, key: str = "") -> Any:
    """The same value with every mapping's keys in a random order (except where order is meaningful)."""
    if isinstance(value, dict):
        items = list(value.items())
        if key not in ORDERED_KEYS:
            rng.shuffle(items)
        return {k: shuffled(v, rng, k) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


def expand_text(text: str, file: str) -> BenchmarkPlan:
    source = parse_document(text, file=file)
    bench = validate_document(BenchmarkSpec, source, operation="test")
    base = load_base_run(bench, file=file)
    profile = ClusterProfile.model_validate(PROFILE)
    return expand(bench, profile, cluster="c", base=base, config=resolve_config(base), source=source)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BENCHMARKS, st.randoms(use_true_random=False))
def test_key_order_and_format_do_not_change_the_digest(spec: dict[str, Any], rng: random.Random) -> None:
    plan = expand_text(json.dumps(spec), "bench.json")
    again = expand_text(yaml.safe_dump(shuffled(spec, rng), sort_keys=False), "bench.yaml")
    assert again.digest == plan.digest
    assert again == plan
    cases = math.prod(len(axis["values"]) for axis in spec["axes"])
    assert len(plan.children) == cases * spec["repeats"]
    assert len({child.child_id for child in plan.children}) == len(plan.children)
    assert [child.repeat for child in plan.children] == list(range(spec["repeats"])) * cases


def test_a_fresh_process_under_another_hash_seed_gives_the_same_digest(tmp_path: Path) -> None:
    spec = {
        "schema_version": 1,
        "name": "sweep",
        "base": {"inline": BASE},
        "axes": [
            {"axis": "concurrency", "alias": "writer", "values": [8, 16]},
            {"axis": "engine_arg", "alias": "writer", "arg": "max-num-seqs", "values": [64, 128]},
        ],
        "repeats": 2,
        "records": {"policy": "fixed", "records": 10},
    }
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(spec), encoding="utf-8")
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump({"schema_version": 1, "clusters": {"c": PROFILE}}), encoding="utf-8")
    expected = expand_text(json.dumps(spec), str(bench)).digest
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "TZ": "Asia/Kolkata", "LC_ALL": "C"}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "data_designer.slurm.planner",
                "expand",
                str(bench),
                "--profile",
                str(profile),
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd="/",
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert BenchmarkPlan.model_validate_json(done.stdout).digest == expected
