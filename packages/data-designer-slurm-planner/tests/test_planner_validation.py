"""validate_document: every problem of a document at once, each with code, key path, line and fix."""

from __future__ import annotations

import pytest

from data_designer.slurm.contracts import ClusterProfile, InvalidInputError, KeyPath, Problem, Profile
from data_designer.slurm.planner import (
    allowed_keys,
    load_base_run,
    load_benchmark,
    load_profile,
    load_run,
    parse_document,
    validate_document,
)

TOKEN = "nvapi-abcdefghijklmnopqrstuv"

BROKEN = f"""\
schema_version: 1
clusters:
  a:
    workspace_root: relative/ws
    acount: x
    account: {TOKEN}
    partitions:
      gpu: gpu
      cpu: 12
    gpu_request: exclusive
    compute_python:
      interpreter: /usr/bin/python3
    sbatch_options:
      - --qos=high
      - --time=01:00:00
      - "--constraint=a\\nb"
    environment: [hf_token]
"""


def problems_of(text: str, file: str = "p.yaml") -> tuple[Problem, ...]:
    with pytest.raises(InvalidInputError) as caught:
        load_profile(text, file=file)  # validate_document, with the sbatch options resolved beside it
    error = caught.value
    assert error.exit_code == 2
    assert error.info.operation == "profile.load"
    assert error.info.file == file
    return error.problems


def test_every_problem_is_reported_at_once_sorted_by_line() -> None:
    problems = problems_of(BROKEN)
    assert [(p.code, p.key_path, p.line) for p in problems] == [
        ("relative_path", ("clusters", "a", "workspace_root"), 4),
        ("unknown_key", ("clusters", "a", "acount"), 5),
        ("secret_literal", ("clusters", "a", "account"), 6),
        ("string_type", ("clusters", "a", "partitions", "cpu"), 9),
        ("literal_error", ("clusters", "a", "gpu_request"), 10),
        ("reserved_sbatch_option", ("clusters", "a", "sbatch_options", 1), 15),
        ("control_character", ("clusters", "a", "sbatch_options", 2), 16),
        ("env_var_name", ("clusters", "a", "environment", 0), 17),
    ]
    for problem in problems:
        assert problem.file == "p.yaml"
        assert problem.hint, problem
        assert "\n" not in problem.render()
    assert TOKEN not in " ".join(p.render() for p in problems)


def test_the_error_summarises_the_count_and_the_first_problem() -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_profile(BROKEN, file="p.yaml")
    info = caught.value.info
    assert info.code == "invalid_input"
    assert info.message.startswith("8 problems in p.yaml; first: p.yaml:4: clusters.a.workspace_root: ")
    assert info.render_lines()[0] == problems_of(BROKEN)[0].render()
    assert len(info.render_lines()) == 8


def test_unknown_keys_hint_at_the_keys_allowed_there() -> None:
    (unknown,) = [p for p in problems_of(BROKEN) if p.code == "unknown_key"]
    assert unknown.message == "unknown key 'acount'"
    assert unknown.hint is not None
    assert "remove it or fix its spelling" in unknown.hint
    assert "keys allowed here: account, compute_python, container_runtime" in unknown.hint


def test_unknown_top_level_key() -> None:
    text = "schema_version: 1\nclusterz: {}\nclusters:\n  a:\n    workspace_root: /w\n"
    problems = problems_of(text)
    unknown = [p for p in problems if p.code == "unknown_key"]
    assert [(p.key_path, p.line) for p in unknown] == [(("clusterz",), 2)]
    assert unknown[0].hint is not None
    assert unknown[0].hint.endswith("keys allowed here: clusters, default_cluster, schema_version")


def test_a_wrong_type_names_the_value_it_got() -> None:
    problems = problems_of(BROKEN)
    (wrong,) = [p for p in problems if p.code == "string_type"]
    assert "(got 12)" in wrong.message
    assert wrong.hint == "write a string (quote it in YAML)"


def test_missing_keys_point_at_the_enclosing_mapping() -> None:
    text = "schema_version: 1\nclusters:\n  a:\n    partitions: {gpu: g, cpu: c}\n"
    problems = problems_of(text)
    assert [(p.code, p.key_path, p.line) for p in problems] == [
        ("missing_key", ("clusters", "a", "compute_python"), 3),
        ("missing_key", ("clusters", "a", "workspace_root"), 3),
    ]
    assert [p.hint for p in problems] == ["add 'compute_python'", "add 'workspace_root'"]


def test_union_alternatives_are_merged_into_one_problem() -> None:
    text = BROKEN.replace("    gpu_request: exclusive\n", "    gpus_per_node: eight\n")
    (gpus,) = [p for p in problems_of(text) if p.key_path == ("clusters", "a", "gpus_per_node")]
    assert gpus.line == 10
    assert "integer" in gpus.message
    assert "'auto'" in gpus.message
    assert gpus.hint


@pytest.mark.parametrize(
    ("text", "code", "key_path"),
    [
        ("- 1\n", "not_a_document", None),
        ("5\n", "not_a_document", None),
        ("schema_version: 2\nclusters: {a: {}}\n", "literal_error", ("schema_version",)),
        ("schema_version: 1\nclusters: []\n", "dict_type", ("clusters",)),
        ("schema_version: 1\nclusters: {}\n", "too_short", ("clusters",)),
    ],
)
def test_wrongly_shaped_documents_get_a_fix(text: str, code: str, key_path: KeyPath | None) -> None:
    problems = [p for p in problems_of(text) if p.code == code]
    assert len(problems) == 1
    assert problems[0].key_path == key_path
    assert problems[0].hint


def test_syntax_errors_are_reported_alone_at_the_line_of_the_unclosed_bracket() -> None:
    problems = problems_of("schema_version: 1\nclusters: [\n")
    assert [p.code for p in problems] == ["syntax_error"]
    assert problems[0].line == 2
    assert "the '[' opened on line 2 is not closed (noticed on line 3: " in problems[0].message


PROFILE = """\
schema_version: 1
default_cluster: lab
clusters:
  lab:
    workspace_root: /shared/ws
    partitions: {gpu: batch, cpu: cpu}
    compute_python: {interpreter: /opt/dd/bin/python}
  other:
    workspace_root: /shared/ws
    partitions:
      gpu: batch
      cpu: cpu
    compute_python:
      interpreter: /opt/dd/bin/python
"""

RUN = """\
schema_version: 1
name: reviews
data_designer:
  inline:
    columns: [{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}]
records: 100
sharding: {shards: 4}
deployments:
  reader: {engine: vllm, model: /models/reader}
  writer:
    engine: vllm
    model: /models/llama
    replicas: 2
"""


def run_problems(text: str) -> list[tuple[str, KeyPath | None, int | None]]:
    with pytest.raises(InvalidInputError) as caught:
        load_run(text, file="run.yaml")
    return [(p.code, p.key_path, p.line) for p in caught.value.problems]


@pytest.mark.parametrize(
    ("removed", "expected"),
    [
        # A block mapping: the line of its key, not of the first key inside it nor line 1.
        ("      gpu: batch\n", [("missing_key", ("clusters", "other", "partitions", "gpu"), 10)]),
        (
            "    compute_python:\n      interpreter: /opt/dd/bin/python\n",
            [("missing_key", ("clusters", "other", "compute_python"), 8)],
        ),
        # A flow mapping: the line it is written on.
        ("gpu: batch, ", [("missing_key", ("clusters", "lab", "partitions", "gpu"), 6)]),
        (
            "    workspace_root: /shared/ws\n    partitions: {gpu: batch, cpu: cpu}\n",
            [
                ("missing_key", ("clusters", "lab", "partitions"), 4),
                ("missing_key", ("clusters", "lab", "workspace_root"), 4),
            ],
        ),
        # An emptied mapping is a null: reported at its own key.
        ("      interpreter: /opt/dd/bin/python\n", [("model_type", ("clusters", "other", "compute_python"), 13)]),
    ],
)
def test_a_missing_profile_key_is_reported_at_its_parent_mappings_line(
    removed: str, expected: list[tuple[str, KeyPath, int]]
) -> None:
    assert removed in PROFILE
    assert [(p.code, p.key_path, p.line) for p in problems_of(PROFILE.replace(removed, "", 1))] == expected


@pytest.mark.parametrize(
    ("removed", "expected"),
    [
        ("    model: /models/llama\n", ("missing_key", ("deployments", "writer", "model"), 10)),
        ("model: /models/reader", ("missing_key", ("deployments", "reader", "model"), 9)),
        # The discriminating key of a deployment is a key like any other: missing at the deployment's line.
        ("    engine: vllm\n", ("missing_key", ("deployments", "writer", "engine"), 10)),
        ("engine: vllm, ", ("missing_key", ("deployments", "reader", "engine"), 9)),
        ("name: reviews\n", ("missing_key", ("name",), 1)),  # the document root: line 1 is its line
        ("sharding: {shards: 4}\n", ("missing_key", ("sharding",), 1)),
    ],
)
def test_a_missing_run_key_is_reported_at_its_parent_mappings_line(
    removed: str, expected: tuple[str, KeyPath, int]
) -> None:
    assert removed in RUN
    assert run_problems(RUN.replace(removed, "", 1)) == [expected]


def test_a_missing_key_names_the_key_and_the_fix() -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_run(RUN.replace("    model: /models/llama\n", ""), file="run.yaml")
    (problem,) = caught.value.problems
    assert (
        problem.render() == "run.yaml:10: deployments.writer.model: required key 'model' is missing (fix: add 'model')"
    )


def test_an_unknown_engine_is_reported_at_the_engine_key_with_the_engines_allowed() -> None:
    ((code, key_path, line),) = run_problems(RUN.replace("    engine: vllm\n", "    engine: vlm\n"))
    assert (code, key_path, line) == ("literal_error", ("deployments", "writer", "engine"), 11)
    with pytest.raises(InvalidInputError) as caught:
        load_run(RUN.replace("    engine: vllm\n", "    engine: vlm\n"), file="run.yaml")
    (problem,) = caught.value.problems
    assert problem.message == "engine 'vlm' is not one of 'vllm', 'command'"
    assert problem.hint == "use one of: 'vllm', 'command'"


BENCHMARK = """\
schema_version: 1
name: sweep
base:
  inline:
    schema_version: 1
    name: base
    data_designer:
      inline:
        columns: [{name: text, column_type: llm-text, model_alias: writer, prompt: "Write."}]
    records: 100
    sharding: {shards: 1}
    deployments:
      writer:
        engine: vllm
        model: /models/llama
axes:
  - {axis: concurrency, alias: writer, values: [8, 16]}
records: {policy: fixed, records: 100}
"""


@pytest.mark.parametrize(
    ("removed", "expected"),
    [
        ("        model: /models/llama\n", ("missing_key", ("base", "inline", "deployments", "writer", "model"), 13)),
        ("    name: base\n", ("missing_key", ("base", "inline", "name"), 4)),
        ("shards: 1", ("sharding", ("base", "inline", "sharding"), 11)),
    ],
)
def test_an_inline_base_runs_problems_carry_the_benchmark_files_lines(
    removed: str, expected: tuple[str, KeyPath, int]
) -> None:
    assert removed in BENCHMARK
    text = BENCHMARK.replace(removed, "", 1)
    benchmark = load_benchmark(text, file="bench.yaml")
    with pytest.raises(InvalidInputError) as caught:
        load_base_run(benchmark, file="bench.yaml", source=parse_document(text, file="bench.yaml"))
    assert [(p.code, p.key_path, p.line) for p in caught.value.problems] == [expected]
    assert all(p.file == "bench.yaml" for p in caught.value.problems)


def test_duplicate_keys_are_reported_with_validation_problems() -> None:
    text = "schema_version: 1\nschema_version: 1\nclusters: {}\n"
    problems = problems_of(text)
    assert [(p.code, p.line) for p in problems] == [("duplicate_key", 2), ("too_short", 3)]


def test_an_empty_document_is_a_problem() -> None:
    problems = problems_of("# nothing here\n")
    assert [(p.code, p.file) for p in problems] == [("empty_document", "p.yaml")]
    assert problems[0].hint


def test_a_valid_document_returns_the_model() -> None:
    text = "schema_version: 1\nclusters:\n  a:\n    workspace_root: /w\n    partitions: {gpu: g, cpu: c}\n    compute_python: {image: dd}\n"
    profile = validate_document(Profile, parse_document(text, file="p.yaml"), operation="profile.load")
    assert isinstance(profile, Profile)
    assert profile.clusters["a"].compute_python.image == "dd"


def test_a_secret_literal_alone_fails_an_otherwise_valid_document() -> None:
    text = f"schema_version: 1\nclusters:\n  a:\n    workspace_root: /w\n    partitions: {{gpu: g, cpu: c}}\n    compute_python: {{image: {TOKEN}}}\n"
    problems = problems_of(text)
    assert [(p.code, p.key_path, p.line) for p in problems] == [
        ("secret_literal", ("clusters", "a", "compute_python", "image"), 6)
    ]


def test_allowed_keys_follow_the_model() -> None:
    assert allowed_keys(Profile, ()) == ["clusters", "default_cluster", "schema_version"]
    assert allowed_keys(Profile, ("clusters", "any")) == sorted(ClusterProfile.model_fields)
    assert allowed_keys(Profile, ("clusters", "any", "partitions")) == ["cpu", "gpu"]
    assert allowed_keys(Profile, ("clusters", "any", "compute_python")) == ["image", "interpreter"]
    assert allowed_keys(Profile, ("clusters", "any", "huggingface")) == ["hf_home", "offline"]
    assert allowed_keys(Profile, ("clusters", "any", "workspace_root")) == []
    assert allowed_keys(Profile, ("nowhere",)) == []
