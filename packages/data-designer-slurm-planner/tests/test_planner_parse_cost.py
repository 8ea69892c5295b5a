"""Parsing cost is bounded before validation: a dense file under the 4 MiB size cap is refused after at most
``MAX_DOCUMENT_NODES`` nodes, a document with thousands of problems reports ``MAX_REPORTED_PROBLEMS`` of them, and a
record count that the ``_dd_index`` column (int64) could not hold is refused.

Each hostile file is generated here at the size issue 28 measured (44-114 s, up to 1.1 GB before this). Parsing stops
early is asserted on deterministic measures (``Document.nodes``, the number of problems), never on wall time;
``benchmarks/bench_parse_cost.py`` prints the seconds and peak RSS.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from data_designer.slurm.contracts import (
    MAX_BENCHMARK_CHILDREN,
    MAX_DOCUMENT_NODES,
    MAX_INPUT_FILE_BYTES,
    MAX_RECORDS,
    MAX_REPORTED_PROBLEMS,
    BenchmarkSpec,
    InvalidInputError,
    RunSpec,
)
from data_designer.slurm.planner import load_benchmark, load_run, parse_document
from data_designer.slurm.planner._limits import run_limit_problems

CONFIG: dict[str, Any] = {
    "model_configs": [{"alias": "writer", "model": "m", "provider": "local"}],
    "columns": [{"name": "text", "column_type": "llm-text", "model_alias": "writer", "prompt": "Write."}],
}
RUN: dict[str, Any] = {
    "schema_version": 1,
    "name": "hostile",
    "data_designer": {"inline": CONFIG},
    "records": 100,
    "sharding": {"shards": 1},
    "deployments": {"writer": {"engine": "vllm", "model": "/models/writer"}},
}


def _bench(values: list[int]) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "name": "hostile",
        "base": {"inline": copy.deepcopy(RUN)},
        "axes": [{"axis": "concurrency", "alias": "writer", "values": values}],
        "records": {"policy": "fixed", "records": 10},
    }


def axis_file(fmt: str) -> str:
    """A benchmark file with one sweep axis of 400,000 values."""
    values = list(range(1, 400_001))
    if fmt == "json":
        return json.dumps(_bench(values))
    head = json.dumps(_bench([1]))  # JSON is YAML: the base run as one flow mapping, then the long axis in YAML
    return head.replace("[1]", "[" + ", ".join(map(str, values)) + "]")


def equal_values_file(fmt: str) -> str:
    """A run file whose ``records`` is a list of a million equal values."""
    if fmt == "json":
        return json.dumps({**RUN, "records": [1] * 1_000_000})
    return "schema_version: 1\nname: hostile\nrecords: [" + ", ".join(["1"] * 1_000_000) + "]\n"


def unknown_keys_file(fmt: str, count: int = 250_000) -> str:
    """A run file with ``count`` unknown top-level keys."""
    keys = {f"k{index:06d}": 1 for index in range(count)}
    if fmt == "json":
        return json.dumps({**RUN, **keys})
    return "".join(f"k{index:06d}: 1\n" for index in range(count)) + "schema_version: 1\n"


HOSTILE = [
    ("axis", axis_file, ("axes", 0, "values")),
    ("equal_values", equal_values_file, ("records",)),
    ("unknown_keys", unknown_keys_file, None),
]


@pytest.mark.parametrize("fmt", ["yaml", "json"])
@pytest.mark.parametrize(("name", "make", "container"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_dense_file_under_the_size_cap_stops_parsing_at_the_node_cap(
    name: str, make: Any, container: tuple[str | int, ...] | None, fmt: str
) -> None:
    text = make(fmt)
    assert len(text.encode()) <= MAX_INPUT_FILE_BYTES
    file = f"/inputs/{name}.{fmt}"
    document = parse_document(text, file=file)
    assert document.nodes == MAX_DOCUMENT_NODES + 1  # stopped at the first node past the cap
    assert document.data is None
    [problem] = document.problems
    assert problem.code == "over_limit"
    assert problem.file == file
    assert problem.key_path == container  # the list or mapping that holds too many values
    assert f"{MAX_DOCUMENT_NODES:,}" in problem.message
    assert problem.hint
    if fmt == "yaml":
        assert problem.line is not None


@pytest.mark.parametrize(("name", "make", "container"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_the_loaders_refuse_a_dense_file_as_invalid_input(
    name: str, make: Any, container: tuple[str | int, ...] | None
) -> None:
    load = load_benchmark if name == "axis" else load_run
    with pytest.raises(InvalidInputError) as caught:
        load(make("json"), file=f"/inputs/{name}.json")
    assert caught.value.info.exit_code == 2
    assert [p.code for p in caught.value.problems] == ["over_limit"]
    assert caught.value.info.file == f"/inputs/{name}.json"


def test_a_document_under_the_node_cap_is_read_whole_and_counted() -> None:
    document = parse_document(json.dumps({"a": [1, 2, 3], "b": {"c": None}}), file="small.json")
    assert document.problems == ()
    assert document.nodes == 1 + 2 * 2 + 3 + 2  # root, two entries, three items, one entry
    assert parse_document("a: [1, 2, 3]\nb: {c: null}\n", file="small.yaml").nodes == document.nodes


def test_a_small_node_cap_stops_yaml_composition_at_it() -> None:
    document = parse_document("a: [1, 2, 3, 4, 5]\n", file="p.yaml", max_nodes=4)
    assert document.nodes == 5
    assert [(p.code, p.key_path, p.line) for p in document.problems] == [("over_limit", ("a",), 1)]


def test_thousands_of_unknown_keys_report_the_first_problems_and_a_count_of_the_rest() -> None:
    count = 20_000  # 40,000 nodes: under the node cap, so every key reaches validation
    with pytest.raises(InvalidInputError) as caught:
        load_run(unknown_keys_file("json", count), file="/inputs/keys.json")
    problems = caught.value.problems
    assert len(problems) == MAX_REPORTED_PROBLEMS + 1
    assert [p.code for p in problems[:-1]] == ["unknown_key"] * MAX_REPORTED_PROBLEMS
    assert problems[0].key_path == ("k000000",)
    assert problems[0].line is not None
    more = problems[-1]
    assert more.code == "over_limit"
    assert more.file == "/inputs/keys.json"
    assert f"{count - MAX_REPORTED_PROBLEMS:,} more" in more.message
    assert more.hint
    assert caught.value.info.message.startswith(f"{count} problems in /inputs/keys.json; first: ")


def test_a_few_problems_are_all_reported() -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_run(unknown_keys_file("json", 3), file="/inputs/keys.json")
    assert [p.code for p in caught.value.problems] == ["unknown_key"] * 3


def test_a_benchmark_axis_longer_than_the_children_cap_is_refused_by_the_contract() -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_benchmark(json.dumps(_bench(list(range(1, MAX_BENCHMARK_CHILDREN + 2)))), file="/b.json")
    [problem] = caught.value.problems
    assert problem.code == "over_limit"
    assert problem.key_path == ("axes", 0, "values")
    assert f"{MAX_BENCHMARK_CHILDREN:,}" in problem.message
    assert problem.hint
    BenchmarkSpec.model_validate(_bench(list(range(1, MAX_BENCHMARK_CHILDREN + 1))))  # at the cap: fine


# --- records: the _dd_index column is int64 ------------------------------------------------------------------------


@pytest.mark.parametrize("records", [MAX_RECORDS + 1, 2**63, 10**30])
def test_records_beyond_the_cap_or_int64_are_refused_with_file_and_line(records: int) -> None:
    text = json.dumps({**RUN, "records": records}, indent=1)
    with pytest.raises(InvalidInputError) as caught:
        load_run(text, file="/inputs/run.json")
    [problem] = caught.value.problems
    assert problem.code == "over_limit"
    assert problem.key_path == ("records",)
    assert f"{MAX_RECORDS:,}" in problem.message
    assert problem.hint
    assert problem.file == "/inputs/run.json"
    assert problem.line == 1 + next(i for i, line in enumerate(text.splitlines()) if '"records"' in line)
    assert caught.value.info.exit_code == 2


def test_records_at_the_cap_are_planned() -> None:
    run = RunSpec.model_validate({**RUN, "records": MAX_RECORDS})
    assert run_limit_problems(run) == []
    assert MAX_RECORDS < 2**63  # every index of every shard fits the int64 _dd_index column


@pytest.mark.parametrize(
    "policy",
    [
        {"policy": "fixed", "records": 2**63},
        {"policy": "scaled", "per_concurrency": 2**63, "min_records": 1, "max_records": 2**64},
    ],
)
def test_benchmark_records_beyond_the_cap_are_refused(policy: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_benchmark(json.dumps({**_bench([1, 2]), "records": policy}), file="/b.json")
    assert {p.code for p in caught.value.problems} == {"over_limit"}
    assert all(p.key_path is not None and p.key_path[0] == "records" for p in caught.value.problems)
