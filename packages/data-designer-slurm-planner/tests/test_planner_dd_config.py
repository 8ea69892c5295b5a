"""Reading a Data Designer config as plain data: aliases, columns, seed dataset, digest and findings."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from data_designer.slurm.contracts import ConfigFinding, ConfigSummary, InvalidInputError, KeyPath
from data_designer.slurm.planner import Document, config_digest, parse_document, read_dd_config

# The shape DataDesignerConfigBuilder.write_config writes (keys sorted, every default spelled out), trimmed.
BUILDER_YAML = """\
data_designer:
  columns:
  - column_type: sampler
    drop: false
    name: topic
    params:
      sampler_type: category
      values: [science, art]
    sampler_type: category
  - column_type: llm-text
    model_alias: writer
    name: essay
    prompt: Write about {{ topic }}
    tool_alias: search
  - column_type: llm-judge
    model_alias: judge
    name: grade
    prompt: Grade {{ essay }}
    scores:
    - description: d
      name: q
      options: {'1': bad, '2': good}
  - column_type: embedding
    model_alias: embedder
    name: vector
    target_column: essay
  - column_type: expression
    drop: true
    expr: '{{ topic }}!'
    name: shout
  model_configs:
  - alias: writer
    inference_parameters:
      generation_type: chat-completion
      max_tokens: 256
      temperature: 0.9
    model: meta/llama-3.1-8b-instruct
    provider: local-vllm
  - alias: judge
    model: nvidia/judge
    provider: nvidia
  - alias: embedder
    inference_parameters:
      encoding_format: float
    model: nvidia/nv-embed
    provider: nvidia
  - alias: spare
    inference_parameters:
      generation_type: image
    model: flux
    provider: nvidia
  processors:
  - column_names: [shout]
    name: drop
    processor_type: drop_columns
  profilers: null
  seed_config: null
  tool_configs:
  - providers: [mcp-search]
    tool_alias: search
library_version: 1.0.0rc1
"""


def read(text: str, file: str = "config.yaml") -> ConfigSummary:
    return read_dd_config(parse_document(text, file=file))


def read_data(data: Any) -> ConfigSummary:
    return read_dd_config(Document(file="<inline>", data=data))


def problems_of(data: Any) -> list[tuple[str, KeyPath | None]]:
    with pytest.raises(InvalidInputError) as caught:
        read_data(data)
    return [(p.code, p.key_path) for p in caught.value.problems]


def finding(summary: ConfigSummary, code: str) -> ConfigFinding:
    matches = [f for f in summary.findings if f.code == code]
    assert len(matches) == 1, summary.findings
    return matches[0]


def without_lines(summary: ConfigSummary) -> Any:
    """The summary as JSON data without its file name and line numbers (which differ between YAML and JSON)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in {"line", "file"}}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(summary.model_dump(mode="json"))


def config(**overrides: Any) -> dict[str, Any]:
    """A minimal builder-layout config with one LLM column, changed by ``overrides``."""
    body: dict[str, Any] = {
        "columns": [{"name": "text", "column_type": "llm-text", "model_alias": "writer", "prompt": "hi"}],
        "model_configs": [{"alias": "writer", "model": "m", "provider": "p"}],
    }
    body.update(overrides)
    return {"data_designer": body, "library_version": "1.0.0rc1"}


def test_a_builder_config_names_every_alias_with_its_columns() -> None:
    summary = read(BUILDER_YAML)
    assert summary.layout == "builder"
    assert summary.library_version == "1.0.0rc1"
    assert [(a.alias, a.model, a.provider, a.generation_type, a.columns) for a in summary.aliases] == [
        ("writer", "meta/llama-3.1-8b-instruct", "local-vllm", "chat-completion", ("essay",)),
        ("judge", "nvidia/judge", "nvidia", "chat-completion", ("grade",)),
        ("embedder", "nvidia/nv-embed", "nvidia", "embedding", ("vector",)),
        ("spare", "flux", "nvidia", "image", ()),
    ]
    assert all(a.defined for a in summary.aliases)
    assert [a.alias for a in summary.used_aliases] == ["writer", "judge", "embedder"]
    assert [(c.name, c.column_type, c.model_aliases, c.drop) for c in summary.columns] == [
        ("topic", "sampler", (), False),
        ("essay", "llm-text", ("writer",), False),
        ("grade", "llm-judge", ("judge",), False),
        ("vector", "embedding", ("embedder",), False),
        ("shout", "expression", (), True),
    ]
    assert summary.sampler_columns == ("topic",)
    assert summary.columns[0].sampler_type == "category"
    assert [(t.alias, t.defined, t.providers, t.columns) for t in summary.tool_aliases] == [
        ("search", True, ("mcp-search",), ("essay",))
    ]
    assert summary.processor_types == ("drop_columns",)
    assert summary.seed_dataset is None
    assert summary.findings == ()


def test_lines_and_key_paths_point_into_the_document() -> None:
    summary = read(BUILDER_YAML)
    lines = BUILDER_YAML.splitlines()
    essay = summary.columns[1]
    assert essay.key_path == "data_designer.columns[1]"
    assert essay.line is not None
    assert lines[essay.line - 1].strip() == "- column_type: llm-text"
    judge = summary.alias("judge")
    assert judge is not None
    assert judge.key_path == "data_designer.model_configs[1].alias"
    assert judge.line is not None
    assert lines[judge.line - 1].strip() == "- alias: judge"
    assert summary.alias("missing") is None


def test_yaml_and_json_of_the_same_config_read_and_digest_alike() -> None:
    data = yaml.safe_load(BUILDER_YAML)
    from_yaml = read(BUILDER_YAML)
    from_json = read(json.dumps(data, indent=2), file="config.json")
    assert without_lines(from_json) == without_lines(from_yaml)
    assert from_yaml.digest == from_json.digest == config_digest(data)


def test_the_digest_ignores_key_order_and_formatting_but_not_values() -> None:
    data = yaml.safe_load(BUILDER_YAML)
    reordered = dict(reversed(list(data.items())))
    reordered["data_designer"] = dict(reversed(list(data["data_designer"].items())))
    assert read_data(reordered).digest == read(BUILDER_YAML).digest
    assert read(yaml.safe_dump(data, default_flow_style=True, width=10_000)).digest == read(BUILDER_YAML).digest
    changed = read(BUILDER_YAML.replace("Write about {{ topic }}", "Write on {{ topic }}"))
    assert changed.digest != read(BUILDER_YAML).digest


def test_the_shorthand_layout_and_inline_mappings_read_alike() -> None:
    data = yaml.safe_load(BUILDER_YAML)
    shorthand = read_data(data["data_designer"])
    assert shorthand.layout == "shorthand"
    assert shorthand.library_version is None
    assert shorthand.file == "<inline>"
    assert [(a.alias, a.columns) for a in shorthand.aliases] == [
        (a.alias, a.columns) for a in read(BUILDER_YAML).aliases
    ]
    assert shorthand.columns[1].key_path == "columns[1]"
    assert shorthand.columns[1].line is None


def test_the_generation_type_follows_the_hosts_inference_rule() -> None:
    models = [
        {"alias": "a", "model": "m", "provider": "p"},
        {"alias": "b", "model": "m", "provider": "p", "inference_parameters": {"dimensions": 256}},
        {"alias": "c", "model": "m", "provider": "p", "inference_parameters": {"generation_type": "embedding"}},
        {"alias": "d", "model": "m", "provider": "p", "inference_parameters": {"generation_type": "image"}},
        {"alias": "e", "model": "m", "provider": "p", "inference_parameters": {"temperature": 0.5}},
    ]
    summary = read_data({"columns": [], "model_configs": models})
    assert [a.generation_type for a in summary.aliases] == [
        "chat-completion",
        "embedding",
        "embedding",
        "image",
        "chat-completion",
    ]


def test_a_plugin_column_is_read_by_its_alias_keys_and_flagged() -> None:
    plugin = {
        "name": "debate",
        "column_type": "debate-plugin",
        "model_alias": "writer",
        "judge_model_alias": "judge",
        "critic_model_aliases": ["critic", "writer"],
        "other": "not an alias",
    }
    models = [{"alias": name, "model": "m", "provider": "p"} for name in ("writer", "judge", "critic")]
    summary = read_data(config(columns=[plugin], model_configs=models))
    column = summary.columns[0]
    assert column.builtin is False
    assert column.model_aliases == ("writer", "judge", "critic")
    assert [(a.alias, a.columns) for a in summary.aliases] == [
        ("writer", ("debate",)),
        ("judge", ("debate",)),
        ("critic", ("debate",)),
    ]
    found = finding(summary, "plugin_column")
    assert (found.severity, found.column, found.key_path) == (
        "warning",
        "debate",
        ("data_designer", "columns", 0, "column_type"),
    )


def test_an_ordered_seed_dataset_blocks_sharding_only() -> None:
    seed = {"source": {"seed_type": "local", "path": "/data/seed.parquet"}, "sampling_strategy": "ordered"}
    summary = read_data(config(seed_config=seed))
    assert summary.seed_dataset is not None
    assert (summary.seed_dataset.seed_type, summary.seed_dataset.path, summary.seed_dataset.sampling_strategy) == (
        "local",
        "/data/seed.parquet",
        "ordered",
    )
    found = finding(summary, "seed_ordered")
    assert (found.severity, found.sharded_only) == ("error", True)
    assert found.key_path == ("data_designer", "seed_config", "sampling_strategy")
    assert summary.blocking_findings(shards=1) == ()
    assert summary.blocking_findings(shards=2) == (found,)


def test_the_sampling_strategy_defaults_to_ordered_as_in_the_host() -> None:
    seed = {"source": {"seed_type": "hf", "path": "datasets/me/data/*.parquet", "token": "HF_TOKEN"}}
    summary = read_data(config(seed_config=seed))
    assert summary.seed_dataset is not None
    assert summary.seed_dataset.sampling_strategy == "ordered"
    assert finding(summary, "seed_ordered").severity == "error"


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        (None, None),
        ({"start": 0, "end": 9}, "index_range"),
        ({"index": 1, "num_partitions": 4}, "partition_block"),
        ({}, "partition_block"),
    ],
)
def test_a_shuffled_seed_dataset_is_a_warning_with_its_selection(selection: Any, expected: str | None) -> None:
    seed = {
        "source": {"seed_type": "directory", "path": "relative/dir"},
        "sampling_strategy": "shuffle",
        "selection_strategy": selection,
    }
    summary = read_data(config(seed_config=seed))
    assert summary.seed_dataset is not None
    assert summary.seed_dataset.selection == expected
    shuffled = finding(summary, "seed_shuffled")
    assert (shuffled.severity, shuffled.sharded_only) == ("warning", True)
    relative = finding(summary, "seed_relative_path")
    assert (relative.severity, relative.sharded_only) == ("warning", False)
    assert relative.key_path == ("data_designer", "seed_config", "source", "path")
    assert summary.blocking_findings(shards=8) == ()


def test_a_custom_column_blocks_even_one_shard() -> None:
    custom = {
        "name": "c",
        "column_type": "custom",
        "generator_function": "my_fn",
        "generation_strategy": "cell_by_cell",
    }
    summary = read_data(config(columns=[custom]))
    found = finding(summary, "custom_column")
    assert (found.severity, found.sharded_only, found.column) == ("error", False, "c")
    assert summary.blocking_findings(shards=1) == (found,)


def test_profilers_use_aliases_and_plugin_processors_are_flagged() -> None:
    summary = read_data(
        config(
            profilers=[{"model_alias": "writer", "summary_score_sample_size": 20}],
            processors=[
                {"name": "t", "processor_type": "schema_transform", "template": {"a": "{{ text }}"}},
                {"name": "dedupe", "processor_type": "dedupe-plugin"},
            ],
        )
    )
    writer = summary.alias("writer")
    assert writer is not None
    assert (writer.columns, writer.used_by_profiler) == (("text",), True)
    assert summary.processor_types == ("schema_transform", "dedupe-plugin")
    assert finding(summary, "profiler").severity == "warning"
    plugin = finding(summary, "plugin_processor")
    assert (plugin.severity, plugin.sharded_only, plugin.key_path) == (
        "warning",
        True,
        ("data_designer", "processors", 1, "processor_type"),
    )


def test_an_alias_missing_from_model_configs_is_an_error() -> None:
    columns = [
        {"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "x"},
        {"name": "b", "column_type": "image", "model_alias": "painter", "prompt": "y"},
    ]
    summary = read_data(config(columns=columns))
    painter = summary.aliases[-1]
    assert (painter.alias, painter.defined, painter.model, painter.columns) == ("painter", False, None, ("b",))
    found = finding(summary, "undefined_alias")
    assert (found.severity, found.column, found.key_path) == (
        "error",
        "b",
        ("data_designer", "columns", 1, "model_alias"),
    )


@pytest.mark.parametrize("model_configs", [None, []])
def test_no_model_configs_means_the_hosts_defaults_a_warning(model_configs: Any) -> None:
    summary = read_data(config(model_configs=model_configs))
    assert [(a.alias, a.defined) for a in summary.aliases] == [("writer", False)]
    found = finding(summary, "default_model_configs")
    assert found.severity == "warning"
    assert "'writer'" in found.message


def test_findings_convert_to_problems() -> None:
    summary = read_data(config(seed_config={"source": {"seed_type": "local", "path": "/s.parquet"}}))
    problem = finding(summary, "seed_ordered").to_problem("c.yaml")
    assert (problem.code, problem.file, problem.key_path) == (
        "seed_ordered",
        "c.yaml",
        ("data_designer", "seed_config", "sampling_strategy"),
    )
    assert problem.hint is not None


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([1, 2], [("not_a_dd_config", None)]),
        ({"model_configs": []}, [("not_a_dd_config", None)]),
        ({"data_designer": [1]}, [("wrong_type", ("data_designer",))]),
        ({"data_designer": {"model_configs": []}}, [("missing_key", ("data_designer", "columns"))]),
        ({"columns": "a"}, [("wrong_type", ("columns",))]),
        ({"columns": ["a"]}, [("wrong_type", ("columns", 0))]),
        ({"columns": [{"column_type": "expression"}]}, [("missing_key", ("columns", 0, "name"))]),
        ({"columns": [{"name": "x"}]}, [("missing_key", ("columns", 0, "column_type"))]),
        ({"columns": [{"name": "x", "column_type": "llm-text"}]}, [("missing_key", ("columns", 0, "model_alias"))]),
        (
            {"columns": [{"name": "x", "column_type": "llm-code", "model_alias": 3}]},
            [("wrong_type", ("columns", 0, "model_alias"))],
        ),
        ({"columns": [{"name": "x", "column_type": "sampler"}]}, [("missing_key", ("columns", 0, "sampler_type"))]),
        (
            {"columns": [{"name": "x", "column_type": "expression"}, {"name": "x", "column_type": "expression"}]},
            [("duplicate_column", ("columns", 1, "name"))],
        ),
        (
            {"columns": [], "model_configs": [{"alias": "a"}, {"alias": "a"}]},
            [("duplicate_alias", ("model_configs", 1, "alias"))],
        ),
        ({"columns": [], "model_configs": [{"model": "m"}]}, [("missing_key", ("model_configs", 0, "alias"))]),
        (
            {"columns": [], "seed_config": {"source": {"seed_type": "local"}, "sampling_strategy": "random"}},
            [("invalid_value", ("seed_config", "sampling_strategy"))],
        ),
        (
            {"columns": [], "seed_config": {"sampling_strategy": "shuffle"}},
            [("missing_key", ("seed_config", "source"))],
        ),
        (
            {"columns": [], "seed_config": {"source": {"seed_type": "hf", "path": "d", "token": "hf-literal"}}},
            [("secret_literal", ("seed_config", "source", "token"))],
        ),
        (
            {"columns": [{"name": "x", "column_type": "expression", "expr": "nvapi-" + "a" * 20}]},
            [("secret_literal", ("columns", 0, "expr"))],
        ),
        ({"columns": [], "processors": [{"name": "p"}]}, [("missing_key", ("processors", 0, "processor_type"))]),
        (
            {"columns": [{"name": "x", "column_type": "p", "model_aliases": ["a", 1]}]},
            [("wrong_type", ("columns", 0, "model_aliases", 1))],
        ),
        ({"columns": [], "extra": {"k": float("nan")}}, [("not_plain_data", ("extra", "k"))]),
    ],
)
def test_what_is_not_a_data_designer_config_is_invalid_input(data: Any, expected: list[tuple[str, str | None]]) -> None:
    assert problems_of(data) == expected


def test_every_structural_problem_is_reported_at_once_with_its_line() -> None:
    text = """\
data_designer:
  columns:
  - name: a
    column_type: llm-text
  - column_type: sampler
    name: b
  model_configs:
  - model: m
"""
    with pytest.raises(InvalidInputError) as caught:
        read(text)
    problems = caught.value.problems
    assert [(p.code, p.key_path, p.line) for p in problems] == [
        ("missing_key", ("data_designer", "columns", 0, "model_alias"), 3),
        ("missing_key", ("data_designer", "columns", 1, "sampler_type"), 5),
        ("missing_key", ("data_designer", "model_configs", 0, "alias"), 8),
    ]
    assert caught.value.exit_code == 2
    assert caught.value.info.operation == "read_dd_config"


def test_syntax_problems_of_the_document_come_first() -> None:
    with pytest.raises(InvalidInputError) as caught:
        read("data_designer:\n  columns: [\n", file="broken.yaml")
    assert [p.code for p in caught.value.problems] == ["syntax_error"]
    with pytest.raises(InvalidInputError) as duplicate:
        read("columns: []\ncolumns: []\n")
    assert [p.code for p in duplicate.value.problems] == ["duplicate_key"]
