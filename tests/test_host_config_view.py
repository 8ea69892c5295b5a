"""The planner's reading of a Data Designer config equals the host's own objects; per-shard seeds work in the host.

Configs are built with the host's ``DataDesignerConfigBuilder`` and written with ``write_config``
(YAML and JSON); the planner reads the files as plain data (it never imports the host) and must
name the same aliases, the same columns per alias, the same sampler columns, tools, seed dataset
and processors as the builder, and as the builder the host loads back from the same file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import data_designer.config as dd
import pytest
from pydantic import BaseModel

from data_designer.slurm.contracts import ConfigSummary
from data_designer.slurm.planner import parse_document, read_dd_config

pytestmark = pytest.mark.host

BuilderFactory = Callable[[Path], Any]


class Verdict(BaseModel):
    label: str
    reasons: list[str]


def value(item: Any) -> Any:
    """An enum member's value (the host stores some as enums, some as their values)."""
    return getattr(item, "value", item)


def models() -> list[Any]:
    return [
        dd.ModelConfig(
            alias="writer",
            model="meta/llama-3.1-8b-instruct",
            provider="local-vllm",
            inference_parameters=dd.ChatCompletionInferenceParams(
                temperature=dd.UniformDistribution(params=dd.UniformDistributionParams(low=0.5, high=0.9)),
                max_tokens=512,
            ),
        ),
        dd.ModelConfig(alias="judge", model="nvidia/judge-70b", provider="nvidia"),
        dd.ModelConfig(
            alias="embedder",
            model="nvidia/nv-embed",
            provider="nvidia",
            inference_parameters=dd.EmbeddingInferenceParams(),
        ),
        dd.ModelConfig(
            alias="painter", model="flux", provider="nvidia", inference_parameters=dd.ImageInferenceParams()
        ),
        dd.ModelConfig(alias="unused", model="spare/model", provider="openai"),
    ]


def every_column_kind(tmp: Path) -> Any:
    builder = dd.DataDesignerConfigBuilder(
        model_configs=models(), tool_configs=[dd.ToolConfig(tool_alias="search", providers=["mcp-a", "mcp-b"])]
    )
    builder.add_column(dd.SamplerColumnConfig(name="id", sampler_type="uuid", params=dd.UUIDSamplerParams()))
    builder.add_column(
        dd.SamplerColumnConfig(
            name="domain", sampler_type="category", params=dd.CategorySamplerParams(values=["math", "art"])
        )
    )
    builder.add_column(
        dd.SamplerColumnConfig(
            name="topic",
            sampler_type="subcategory",
            params=dd.SubcategorySamplerParams(category="domain", values={"math": ["algebra"], "art": ["color"]}),
        )
    )
    builder.add_column(
        dd.SamplerColumnConfig(name="score", sampler_type="gaussian", params=dd.GaussianSamplerParams(mean=0, stddev=1))
    )
    builder.add_column(
        dd.SamplerColumnConfig(
            name="day", sampler_type="datetime", params=dd.DatetimeSamplerParams(start="2024-01-01", end="2024-12-31")
        )
    )
    builder.add_column(
        dd.SamplerColumnConfig(
            name="person", sampler_type="person_from_faker", params=dd.PersonFromFakerSamplerParams()
        )
    )
    builder.add_column(
        dd.LLMTextColumnConfig(
            name="question", prompt="Ask about {{ topic }}", model_alias="writer", tool_alias="search"
        )
    )
    builder.add_column(
        dd.LLMCodeColumnConfig(name="code", prompt="Solve {{ question }}", model_alias="writer", code_lang="python")
    )
    builder.add_column(
        dd.LLMStructuredColumnConfig(
            name="verdict", prompt="Classify {{ question }}", model_alias="judge", output_format=Verdict
        )
    )
    builder.add_column(
        dd.LLMJudgeColumnConfig(
            name="grade",
            prompt="Grade {{ code }}",
            model_alias="judge",
            scores=[dd.Score(name="correct", description="Is it right?", options={0: "no", 1: "yes"})],
        )
    )
    builder.add_column(dd.EmbeddingColumnConfig(name="vector", target_column="question", model_alias="embedder"))
    builder.add_column(dd.ImageColumnConfig(name="picture", prompt="Draw {{ topic }}", model_alias="painter"))
    builder.add_column(dd.ExpressionColumnConfig(name="label", expr="{{ domain }}/{{ topic }}"))
    builder.add_column(
        dd.ValidationColumnConfig(
            name="code_ok",
            target_columns=["code"],
            validator_type="code",
            validator_params=dd.CodeValidatorParams(code_lang="python"),
        )
    )
    builder.add_processor(dd.DropColumnsProcessorConfig(name="drop-label", column_names=["label"]))
    builder.add_processor(dd.SchemaTransformProcessorConfig(name="chat", template={"text": "{{ question }}"}))
    builder.add_profiler(dd.JudgeScoreProfilerConfig(model_alias="writer"))
    return builder


def ordered_local_seed(tmp: Path) -> Any:
    seed_file = tmp / "seed.csv"
    seed_file.write_text("city\nOslo\nLima\nPune\n", encoding="utf-8")
    builder = dd.DataDesignerConfigBuilder(model_configs=models()[:2])
    builder.with_seed_dataset(
        dd.LocalFileSeedSource(path=str(seed_file)), selection_strategy=dd.IndexRange(start=0, end=1)
    )
    builder.add_column(dd.LLMTextColumnConfig(name="story", prompt="A story in {{ city }}", model_alias="judge"))
    return builder


def shuffled_hf_seed(tmp: Path) -> Any:
    builder = dd.DataDesignerConfigBuilder(model_configs=models()[2:])
    builder.with_seed_dataset(
        dd.HuggingFaceSeedSource(path="datasets/acme/cities/data/*.parquet", token="HF_TOKEN"),
        sampling_strategy=dd.SamplingStrategy.SHUFFLE,
        selection_strategy=dd.PartitionBlock(index=1, num_partitions=3),
    )
    builder.add_column(dd.EmbeddingColumnConfig(name="vector", target_column="city", model_alias="embedder"))
    builder.add_column(dd.ImageColumnConfig(name="postcard", prompt="{{ city }}", model_alias="painter"))
    builder.add_column(dd.ImageColumnConfig(name="poster", prompt="{{ city }}!", model_alias="painter"))
    return builder


def samplers_only(tmp: Path) -> Any:
    builder = dd.DataDesignerConfigBuilder(model_configs=[dd.ModelConfig(alias="solo", model="m", provider="p")])
    builder.add_column(dd.SamplerColumnConfig(name="n", sampler_type="poisson", params=dd.PoissonSamplerParams(mean=3)))
    builder.add_column(
        dd.SamplerColumnConfig(name="u", sampler_type="uniform", params=dd.UniformSamplerParams(low=0, high=1))
    )
    return builder


FACTORIES: dict[str, BuilderFactory] = {
    "every_column_kind": every_column_kind,
    "ordered_local_seed": ordered_local_seed,
    "shuffled_hf_seed": shuffled_hf_seed,
    "samplers_only": samplers_only,
}


def host_view(builder: Any) -> dict[str, Any]:
    """What the host's own objects say about aliases, columns, tools, seed and processors."""
    columns = builder.get_column_configs()
    profilers = builder.get_profilers()
    defined = [mc.alias for mc in builder.model_configs]
    used = [alias for c in columns for alias in c.get_model_aliases()] + [p.model_alias for p in profilers]
    aliases = list(dict.fromkeys(defined + used))
    seed = builder.get_seed_config()
    return {
        "aliases": aliases,
        "models": {mc.alias: (mc.model, mc.provider, value(mc.generation_type)) for mc in builder.model_configs},
        "alias_columns": {a: [c.name for c in columns if a in c.get_model_aliases()] for a in aliases},
        "profiler_aliases": sorted({p.model_alias for p in profilers}),
        "columns": [(c.name, value(c.column_type), list(c.get_model_aliases()), c.drop) for c in columns],
        "sampler_columns": [c.name for c in builder.get_columns_of_type(dd.DataDesignerColumnType.SAMPLER)],
        "sampler_types": {c.name: value(c.sampler_type) for c in columns if value(c.column_type) == "sampler"},
        "tools": {tc.tool_alias: list(tc.providers) for tc in builder.tool_configs},
        "tool_columns": {c.name: c.tool_alias for c in columns if getattr(c, "tool_alias", None) is not None},
        "seed": None
        if seed is None
        else (value(seed.source.seed_type), value(seed.sampling_strategy), getattr(seed.source, "path", None)),
        "processors": [value(p.processor_type) for p in builder.get_processor_configs()],
    }


def planner_view(summary: ConfigSummary) -> dict[str, Any]:
    """The same facts, from the planner's reading of the file."""
    seed = summary.seed_dataset
    return {
        "aliases": [a.alias for a in summary.aliases],
        "models": {a.alias: (a.model, a.provider, a.generation_type) for a in summary.aliases if a.defined},
        "alias_columns": {a.alias: list(a.columns) for a in summary.aliases},
        "profiler_aliases": sorted(a.alias for a in summary.aliases if a.used_by_profiler),
        "columns": [(c.name, c.column_type, list(c.model_aliases), c.drop) for c in summary.columns],
        "sampler_columns": list(summary.sampler_columns),
        "sampler_types": {c.name: c.sampler_type for c in summary.columns if c.column_type == "sampler"},
        "tools": {t.alias: list(t.providers) for t in summary.tool_aliases if t.defined},
        "tool_columns": {c.name: c.tool_alias for c in summary.columns if c.tool_alias is not None},
        "seed": None if seed is None else (seed.seed_type, seed.sampling_strategy, seed.path),
        "processors": list(summary.processor_types),
    }


def read_file(path: Path) -> ConfigSummary:
    return read_dd_config(parse_document(path.read_text(encoding="utf-8"), file=str(path)))


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_the_planner_reads_what_the_host_builder_wrote(tmp_path: Path, name: str, suffix: str) -> None:
    builder = FACTORIES[name](tmp_path)
    path = tmp_path / f"config{suffix}"
    builder.write_config(path)
    summary = read_file(path)
    expected = host_view(builder)
    assert planner_view(summary) == expected
    # The host, loading the same file back, still agrees: both read the same document.
    assert host_view(dd.DataDesignerConfigBuilder.from_config(path)) == expected
    assert summary.layout == "builder"
    assert summary.library_version == dd.get_library_version()


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_yaml_and_json_written_by_the_host_have_one_digest(tmp_path: Path, name: str) -> None:
    builder = FACTORIES[name](tmp_path)
    builder.write_config(tmp_path / "c.yaml")
    builder.write_config(tmp_path / "c.json")
    assert read_file(tmp_path / "c.yaml").digest == read_file(tmp_path / "c.json").digest


def test_the_every_kind_config_needs_no_fix_but_warns_about_its_profiler(tmp_path: Path) -> None:
    every_column_kind(tmp_path).write_config(tmp_path / "c.yaml")
    summary = read_file(tmp_path / "c.yaml")
    assert [(f.code, f.severity) for f in summary.findings] == [("profiler", "warning")]
    assert [a.alias for a in summary.used_aliases] == ["writer", "judge", "embedder", "painter"]


def test_seed_findings_follow_the_sampling_strategy(tmp_path: Path) -> None:
    ordered_local_seed(tmp_path).write_config(tmp_path / "ordered.yaml")
    shuffled_hf_seed(tmp_path).write_config(tmp_path / "shuffled.yaml")
    ordered = read_file(tmp_path / "ordered.yaml")
    shuffled = read_file(tmp_path / "shuffled.yaml")
    assert [(f.code, f.severity) for f in ordered.findings] == [("seed_ordered", "error")]
    assert ordered.seed_dataset is not None
    assert ordered.seed_dataset.selection == "index_range"
    assert [(f.code, f.severity) for f in shuffled.findings] == [("seed_shuffled", "warning")]
    assert shuffled.seed_dataset is not None
    assert shuffled.seed_dataset.selection == "partition_block"


def test_a_custom_column_loses_its_aliases_in_the_file_so_the_planner_blocks_it(tmp_path: Path) -> None:
    def twice(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "twice": row["n"] * 2}

    double = dd.custom_column_generator(required_columns=["n"], model_aliases=["solo"])(twice)
    builder = samplers_only(tmp_path)
    builder.add_column(dd.CustomColumnConfig(name="twice", generator_function=double))
    assert builder.get_column_config("twice").get_model_aliases() == ["solo"]
    path = tmp_path / "custom.yaml"
    builder.write_config(path)
    with pytest.raises(ValueError, match="generator_function must be callable"):
        dd.DataDesignerConfigBuilder.from_config(path)
    summary = read_file(path)
    assert [(f.code, f.severity, f.column) for f in summary.findings] == [("custom_column", "error", "twice")]
    assert summary.blocking_findings(shards=1) == summary.findings


SHARD_SCRIPT = textwrap.dedent(
    """
    import json, random, sys

    import faker
    import numpy
    import data_designer.config as dd
    from data_designer.interface import DataDesigner
    from data_designer.slurm.planner import derive_sampler_seed, sampler_seed_words

    config, artifacts, out, run_seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    results = []
    for shard in (0, 1, 0):
        builder = dd.DataDesignerConfigBuilder.from_config(config)
        designer = DataDesigner(artifact_path=artifacts)
        # What the runtime worker does right before create (docs/architecture/sharding.md).
        seed = derive_sampler_seed(run_seed, shard)
        numpy.random.seed(list(sampler_seed_words(seed)))
        random.seed(seed)
        faker.Faker.seed(seed)
        frame = designer.create(builder, num_records=12, dataset_name=f"shard-{shard}").load_dataset()
        results.append({
            "category": [str(v) for v in frame["category"]],
            "uniform": [float(v) for v in frame["uniform"]],
            "person": [[p["first_name"], p["last_name"], int(p["age"]), p["city"]] for p in frame["person"]],
            "uuid": [str(v) for v in frame["uuid"]],
        })
    with open(out, "w") as handle:
        json.dump(results, handle)
    """
)


@pytest.mark.slow
def test_per_shard_seeds_make_host_samplers_distinct_and_reproducible(tmp_path: Path) -> None:
    builder = dd.DataDesignerConfigBuilder(model_configs=[dd.ModelConfig(alias="solo", model="m", provider="p")])
    builder.add_column(
        dd.SamplerColumnConfig(
            name="category", sampler_type="category", params=dd.CategorySamplerParams(values=list("abcdefghij"))
        )
    )
    builder.add_column(
        dd.SamplerColumnConfig(name="uniform", sampler_type="uniform", params=dd.UniformSamplerParams(low=0, high=1))
    )
    builder.add_column(
        dd.SamplerColumnConfig(
            name="person", sampler_type="person_from_faker", params=dd.PersonFromFakerSamplerParams()
        )
    )
    builder.add_column(dd.SamplerColumnConfig(name="uuid", sampler_type="uuid", params=dd.UUIDSamplerParams()))
    config = tmp_path / "samplers.yaml"
    builder.write_config(config)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DATA_DESIGNER")}
    env.update({"HOME": str(home), "NO_COLOR": "1"})
    out = tmp_path / "values.json"
    result = subprocess.run(
        [sys.executable, "-c", SHARD_SCRIPT, str(config), str(tmp_path / "artifacts"), str(out), "20240601"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    shard0, shard1, shard0_again = json.loads(out.read_text())
    for column in ("category", "uniform", "person"):
        assert shard0[column] == shard0_again[column], column  # a retried shard draws the same values
        assert shard0[column] != shard1[column], column  # another shard draws others
    uuids = shard0["uuid"] + shard1["uuid"] + shard0_again["uuid"]
    assert len(set(uuids)) == len(uuids)  # uuid4 comes from the OS, never from the seed
