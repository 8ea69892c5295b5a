"""Run and benchmark files: strict loading with every problem at once; config and base-run resolution."""

from __future__ import annotations

import pytest

from data_designer.slurm.contracts import InvalidInputError
from data_designer.slurm.planner._inputs import (
    INLINE_CONFIG_FILE,
    base_run_path,
    config_path,
    load_base_run,
    load_benchmark,
    load_run,
    resolve_config,
)

RUN = """\
schema_version: 1
name: demo
data_designer:
  inline:
    columns: []
records: 10
sharding: {shards: 2}
"""

BENCHMARK = """\
schema_version: 1
name: sweep
base:
  run: /runs/demo.yaml
axes:
  - {axis: concurrency, alias: writer, values: [8, 16]}
records: {policy: fixed, records: 100}
"""


def test_a_minimal_run_loads_with_defaults() -> None:
    run = load_run(RUN, file="run.yaml")
    assert run.submission.warning_lead_s == 300
    assert config_path(run) is None
    document = resolve_config(run)
    assert document.file == INLINE_CONFIG_FILE
    assert document.data == {"columns": []}


def test_every_problem_in_a_run_file_is_reported_with_its_line() -> None:
    text = RUN.replace("records: 10", "records: -1\nrecord: 3").replace("name: demo", "name: Demo!")
    with pytest.raises(InvalidInputError) as caught:
        load_run(text, file="run.yaml")
    found = {(p.key_path, p.line) for p in caught.value.problems}
    assert {(("name",), 2), (("records",), 6), (("record",), 7)} <= found
    assert all(p.file == "run.yaml" for p in caught.value.problems)


def test_a_config_path_must_be_absolute() -> None:
    text = RUN.replace("  inline:\n    columns: []", "  config: configs/c.yaml")
    with pytest.raises(InvalidInputError) as caught:
        load_run(text, file="run.yaml")
    assert [p.code for p in caught.value.problems] == ["relative_path"]


def test_a_config_file_s_syntax_problems_name_that_file() -> None:
    run = load_run(RUN.replace("  inline:\n    columns: []", "  config: /c.yaml"), file="run.yaml")
    assert config_path(run) == "/c.yaml"
    document = resolve_config(run, "columns: [\nx: 1")
    assert document.problems
    assert document.problems[0].file == "/c.yaml"


def test_a_benchmark_and_its_base_run_file() -> None:
    benchmark = load_benchmark(BENCHMARK, file="bench.yaml")
    assert base_run_path(benchmark) == "/runs/demo.yaml"
    with pytest.raises(InvalidInputError, match="was not given"):
        load_base_run(benchmark, file="bench.yaml")
    assert load_base_run(benchmark, RUN, file="bench.yaml").name == "demo"


def test_an_inline_base_run_reports_problems_under_base_inline() -> None:
    text = BENCHMARK.replace("  run: /runs/demo.yaml", "  inline: {schema_version: 1, name: x, records: 0}")
    benchmark = load_benchmark(text, file="bench.yaml")
    assert base_run_path(benchmark) is None
    with pytest.raises(InvalidInputError) as caught:
        load_base_run(benchmark, file="bench.yaml")
    paths = {p.key_path for p in caught.value.problems}
    assert {("base", "inline", key) for key in ("records", "data_designer", "sharding")} <= paths
    assert all(p.file == "bench.yaml" for p in caught.value.problems)
