"""Strict YAML/JSON documents: scalar rules, duplicate keys, lines of every key path, problems instead of crashes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_designer.slurm.contracts import KeyPath, format_key_path
from data_designer.slurm.planner import Document, detect_format, parse_document

NESTED_YAML = """\
schema_version: 1
clusters:
  a:
    workspace_root: /x
    sbatch_options:
      - --exclusive
      - --gres=gpu:8
"""

NESTED_JSON = """\
{
  "schema_version": 1,
  "clusters": {
    "a": {
      "workspace_root": "/x",
      "sbatch_options": [
        "--exclusive",
        "--gres=gpu:8"
      ]
    }
  }
}
"""


def codes(document: Document) -> list[str]:
    return [p.code for p in document.problems]


def test_yaml_maps_every_key_path_and_list_item_to_its_line() -> None:
    document = parse_document(NESTED_YAML, file="p.yaml")
    assert document.problems == ()
    assert document.data == {
        "schema_version": 1,
        "clusters": {"a": {"workspace_root": "/x", "sbatch_options": ["--exclusive", "--gres=gpu:8"]}},
    }
    assert document.lines[("schema_version",)] == 1
    assert document.lines[("clusters",)] == 2
    assert document.lines[("clusters", "a")] == 3
    assert document.lines[("clusters", "a", "workspace_root")] == 4
    assert document.lines[("clusters", "a", "sbatch_options")] == 5
    assert document.lines[("clusters", "a", "sbatch_options", 0)] == 6
    assert document.lines[("clusters", "a", "sbatch_options", 1)] == 7


def test_json_maps_every_key_path_and_list_item_to_its_line() -> None:
    document = parse_document(NESTED_JSON, file="p.json")
    assert document.problems == ()
    assert document.data == json.loads(NESTED_JSON)
    assert document.lines[("schema_version",)] == 2
    assert document.lines[("clusters",)] == 3
    assert document.lines[("clusters", "a")] == 4
    assert document.lines[("clusters", "a", "workspace_root")] == 5
    assert document.lines[("clusters", "a", "sbatch_options")] == 6
    assert document.lines[("clusters", "a", "sbatch_options", 0)] == 7
    assert document.lines[("clusters", "a", "sbatch_options", 1)] == 8


def test_line_of_falls_back_to_the_nearest_ancestor() -> None:
    document = parse_document(NESTED_YAML, file="p.yaml")
    assert document.line_of(("clusters", "a", "account")) == 3
    assert document.line_of(("clusters", "a", "sbatch_options", 5)) == 5
    assert document.line_of(("nowhere", "x")) == 1
    assert Document(file="f", data=None).line_of(("a",)) is None


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "y", "n", "Yes", "NO", "On", "OFF"])
def test_yaml_1_1_booleans_stay_strings(word: str) -> None:
    document = parse_document(f"value: {word}\n", file="p.yaml")
    assert document.problems == ()
    assert document.data == {"value": word}


@pytest.mark.parametrize(
    ("scalar", "value"),
    [
        ("01:00:00", "01:00:00"),
        ("1:30", "1:30"),
        ("04:00", "04:00"),
        ("2001-12-14", "2001-12-14"),
        ("2001-12-14t21:59:43.10-05:00", "2001-12-14t21:59:43.10-05:00"),
        ("1_000", "1_000"),
        ("0b101", "0b101"),
        ("=", "="),
        ("true", True),
        ("False", False),
        ("~", None),
        ("null", None),
        ("", None),
        ("42", 42),
        ("-7", -7),
        ("+3", 3),
        ("0", 0),
        ("0o17", 15),
        ("0x1F", 31),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        ('"01:00:00"', "01:00:00"),
        ("'yes'", "yes"),
        ('"42"', "42"),
    ],
)
def test_yaml_scalars_follow_yaml_1_2_core_rules(scalar: str, value: object) -> None:
    document = parse_document(f"value: {scalar}\n", file="p.yaml")
    assert document.problems == ()
    assert document.data == {"value": value}
    assert type(document.data["value"]) is type(value)


@pytest.mark.parametrize(("scalar", "value"), [("09", 9), ("010", 10), ("-08", -8)])
def test_yaml_decimal_integers_with_leading_zeros_are_decimal(scalar: str, value: int) -> None:
    document = parse_document(f"value: {scalar}\n", file="p.yaml")
    assert document.problems == ()
    assert document.data == {"value": value}


def test_yaml_duplicate_keys_name_the_key_path_and_both_lines() -> None:
    text = "clusters:\n  a:\n    account: x\n    partitions: {}\n    account: y\n"
    document = parse_document(text, file="p.yaml")
    assert len(document.problems) == 1
    problem = document.problems[0]
    assert problem.code == "duplicate_key"
    assert problem.key_path == ("clusters", "a", "account")
    assert problem.line == 5
    assert "line 3" in problem.message
    assert problem.file == "p.yaml"
    assert problem.hint
    assert document.data == {"clusters": {"a": {"account": "x", "partitions": {}}}}


def test_yaml_top_level_duplicate_keys_are_reported() -> None:
    document = parse_document("a: 1\nb: 2\na: 3\n", file="p.yaml")
    assert [(p.code, p.key_path, p.line) for p in document.problems] == [("duplicate_key", ("a",), 3)]
    assert "line 1" in document.problems[0].message


def test_json_duplicate_keys_name_the_key_path_and_both_lines() -> None:
    text = '{\n  "clusters": {\n    "a": {\n      "account": "x",\n      "account": "y"\n    }\n  }\n}\n'
    document = parse_document(text, file="p.json")
    assert [(p.code, p.key_path, p.line) for p in document.problems] == [
        ("duplicate_key", ("clusters", "a", "account"), 5)
    ]
    assert "line 4" in document.problems[0].message
    assert document.problems[0].hint


@pytest.mark.parametrize("scalar", [".inf", "-.inf", "+.inf", ".Inf", ".NaN", ".nan", "1e999"])
def test_yaml_non_finite_numbers_are_problems(scalar: str) -> None:
    document = parse_document(f"a: 1\nvalue: {scalar}\n", file="p.yaml")
    assert [(p.code, p.key_path, p.line) for p in document.problems] == [("non_finite_number", ("value",), 2)]
    assert document.problems[0].hint


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_nan_and_infinity_are_problems(constant: str) -> None:
    document = parse_document(f'{{"value": {constant}}}', file="p.json")
    assert codes(document) == ["syntax_error"]
    assert document.data is None
    assert document.problems[0].hint


def test_json_overflowing_numbers_are_problems() -> None:
    document = parse_document('{\n"value": 1e999}', file="p.json")
    assert [(p.code, p.key_path, p.line) for p in document.problems] == [("non_finite_number", ("value",), 2)]


# Ten lines of valid YAML before the broken one, so that the opening line (11) and the line where PyYAML notices
# the error (12 or later) differ, as in a real run file.
PREFIX = "".join(f"k{i}: {i}\n" for i in range(1, 11))


@pytest.mark.parametrize(
    ("broken", "line", "fragments"),
    [
        # An unclosed '[' or '{' or quote is reported where it opened, the message naming where it was noticed.
        ("b: [x, y\nc: 2\n", 11, ["the '[' opened on line 11 is not closed", "noticed on line 12"]),
        ("b: [x,\n  y\n", 11, ["the '[' opened on line 11 is not closed", "noticed on line 13", "<stream end>"]),
        ("b: [\n", 11, ["the '[' opened on line 11 is not closed", "noticed on line 12"]),
        ("b: {x: 1\nc: 2\n", 11, ["the '{' opened on line 11 is not closed", "noticed on line 12"]),
        ("b: {x: [1, 2}\n", 11, ["the '[' opened on line 11 is not closed (expected ',' or ']', but got '}')"]),
        ("b: [1, {x: 2]\n", 11, ["the '{' opened on line 11 is not closed"]),
        ("b:\n  c: [1,\n  d: 2\n", 12, ["the '[' opened on line 12 is not closed", "noticed on line 14"]),
        ("b: 'abc\nc: 2\n", 11, ["the quoted string opened on line 11 is not closed", "noticed on line 13"]),
        ('b: "abc\nc: 2\n', 11, ["the quoted string opened on line 11 is not closed", "noticed on line 13"]),
        ('b: "ab\\qc"\n', 11, ["unknown escape character 'q' in the quoted string opened on line 11"]),
        ("b: [a, - c]\n", 11, ["in the '[' opened on line 11"]),
        # Block structure: reported where it was noticed (the block itself may start on line 1).
        ("b:\n  - x\n  y: z\n", 13, ["expected <block end>", "in the list that starts on line 12"]),
        ("b:\n  c: 2\n d: 3\n", 13, ["expected <block end>", "in the mapping that starts on line 1"]),
        ("b:\n  c: 1\n   d: 2\n", 13, ["mapping values are not allowed here"]),
        ("b: c: d\n", 11, ["mapping values are not allowed here"]),
        ("b: 1\n\tc: 2\n", 12, ["found character '\\t' that cannot start any token"]),
        ("b:\n\tc: 2\n", 12, ["found character '\\t' that cannot start any token"]),
        ("b: 1\n---\nc: 2\n", 12, ["expected a single document in the stream, but found another document"]),
    ],
)
def test_yaml_syntax_errors_point_at_the_line_where_the_broken_construct_opens(
    broken: str, line: int, fragments: list[str]
) -> None:
    document = parse_document(PREFIX + broken, file="p.yaml")
    assert codes(document) == ["syntax_error"]
    (problem,) = document.problems
    assert (problem.file, problem.line) == ("p.yaml", line)
    assert problem.message.startswith("invalid YAML: ")
    for fragment in fragments:
        assert fragment in problem.message
    assert problem.hint
    assert "\n" not in problem.render()


@pytest.mark.parametrize(
    ("broken", "hint"),
    [
        ("b: [x, y\nc: 2\n", "close the '[' opened on line 11"),
        ("b: 'abc\n", "close the quoted string opened on line 11 (a quoted string ends with the same quote)"),
        ("b: 1\n\tc: 2\n", "indent with spaces: YAML does not allow tabs here"),
        ("b:\n  - x\n  y: z\n", "check the indentation: the keys of one mapping and the items of one list start"),
        ("b: c: d\n", "check the indentation, or quote a value that contains ': ' or starts with '- '"),
    ],
)
def test_yaml_syntax_errors_hint_at_the_fix(broken: str, hint: str) -> None:
    (problem,) = parse_document(PREFIX + broken, file="p.yaml").problems
    assert problem.hint is not None
    assert problem.hint.startswith(hint)


def test_an_unclosed_bracket_names_the_opening_and_the_noticing_line() -> None:
    (problem,) = parse_document(PREFIX + "b: [x, y\nc: 2\n", file="p.yaml").problems
    assert problem.render() == (
        "p.yaml:11: invalid YAML: the '[' opened on line 11 is not closed "
        "(noticed on line 12: expected ',' or ']', but got ':') (fix: close the '[' opened on line 11)"
    )


def test_yaml_syntax_errors_never_quote_the_file() -> None:
    secret_line = "password_hint: do-not-print-me"
    (problem,) = parse_document(f"{secret_line}\nb: [x, y\nc: 2\n", file="p.yaml").problems
    assert "do-not-print-me" not in problem.render()


@pytest.mark.parametrize(("text", "line"), [('{\n  "a": 1,\n}\n', 3), ("{\n", 2), ('{"a": tru}', 1), ('{"a": 01}', 1)])
def test_json_syntax_errors_become_problems_with_a_line(text: str, line: int) -> None:
    document = parse_document(text, file="p.json")
    assert codes(document) == ["syntax_error"]
    assert document.problems[0].line == line
    assert document.problems[0].message.startswith("invalid JSON: ")


def test_yaml_unreadable_characters_are_one_line_problems() -> None:
    document = parse_document("a: 1\nb: x\x80y\n", file="p.yaml")
    assert codes(document) == ["syntax_error"]
    assert document.problems[0].line == 2
    assert "\n" not in document.problems[0].message


def test_yaml_merge_keys_are_rejected() -> None:
    text = "base: &b\n  x: 1\nc:\n  <<: *b\n  y: 2\n"
    document = parse_document(text, file="p.yaml")
    assert [(p.code, p.key_path, p.line) for p in document.problems] == [("merge_key", ("c",), 4)]
    assert document.problems[0].hint


@pytest.mark.parametrize(
    "scalar",
    [
        "!foo x",
        "!!python/object:os.system x",
        "!!python/name:os.system ''",
        "!!int abc",
        "!!bool maybe",
        "!!timestamp x",
    ],
)
def test_yaml_custom_and_malformed_scalar_tags_are_problems(scalar: str) -> None:
    document = parse_document(f"a: 1\nvalue: {scalar}\n", file="p.yaml")
    assert [(p.code, p.key_path, p.line) for p in document.problems] == [("unsupported_value", ("value",), 2)]
    assert document.problems[0].hint


@pytest.mark.parametrize("collection", ["!foo {b: 1}", "!foo [1]", "!!set {b, c}", "!!omap [b: 1]"])
def test_yaml_tags_on_collections_are_problems(collection: str) -> None:
    document = parse_document(f"a: 1\nvalue: {collection}\n", file="p.yaml")
    assert [(p.code, p.key_path, p.line) for p in document.problems] == [("unsupported_value", ("value",), 2)]


def test_yaml_integers_too_long_for_python_are_problems() -> None:
    document = parse_document("value: " + "9" * 5000 + "\n", file="p.yaml")
    assert [(p.code, p.key_path) for p in document.problems] == [("unsupported_value", ("value",))]


def test_yaml_recursive_aliases_are_problems_not_crashes() -> None:
    document = parse_document("a: &x [*x]\n", file="p.yaml")
    assert document.problems
    assert all(p.line == 1 and p.hint for p in document.problems)


def test_yaml_alias_bombs_do_not_expand() -> None:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 6)]
    document = parse_document("\n".join(lines) + "\n", file="p.yaml")
    assert document.problems
    assert len(json.dumps(document.data, default=str)) < 100_000


@pytest.mark.parametrize(("text", "file"), [("[" * 5000 + "]" * 5000, "p.yaml"), ("[" * 5000 + "]" * 5000, "p.json")])
def test_deeply_nested_documents_are_problems_not_crashes(text: str, file: str) -> None:
    document = parse_document(text, file=file)
    assert document.data is None
    assert len(document.problems) == 1
    assert document.problems[0].hint


def test_non_string_mapping_keys_are_problems() -> None:
    document = parse_document("a: 1\n? [b]\n: 2\n", file="p.yaml")
    assert [(p.code, p.line) for p in document.problems] == [("key_type", 2)]


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "---\n"])
def test_empty_yaml_is_no_data_and_no_problem(text: str) -> None:
    document = parse_document(text, file="p.yaml")
    assert document.data is None
    assert document.problems == ()


@pytest.mark.parametrize(
    ("file", "text", "fmt"),
    [
        ("p.json", "a: 1", "json"),
        ("p.yaml", "a: 1", "yaml"),
        ("p.yaml", '{"a": 1}', "yaml"),
        ("p.yml", "{a: 1}", "yaml"),
        ("profile", '  {"a": 1}', "json"),
        ("profile", "a: 1", "yaml"),
        ("profile", "", "yaml"),
    ],
)
def test_detect_format(file: str, text: str, fmt: str) -> None:
    assert detect_format(file, text) == fmt


def test_an_explicit_format_overrides_detection() -> None:
    assert codes(parse_document("a: 1\n", file="p.json", fmt="yaml")) == []
    assert codes(parse_document("a: 1\n", file="p.yaml", fmt="json")) == ["syntax_error"]


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ((), ""),
        (("a",), "a"),
        (("clusters", "a", "account"), "clusters.a.account"),
        (("clusters", "a", "sbatch_options", 2), "clusters.a.sbatch_options[2]"),
        ((0, "x"), "[0].x"),
        (("a", 0, 1), "a[0][1]"),
    ],
)
def test_format_key_path(path: KeyPath, text: str) -> None:
    assert format_key_path(path) == text


# ---- Hypothesis: any text is read into data or problems, never an exception ----------------------------------

_YAMLISH = st.lists(
    st.sampled_from([*"ab1:-[]{}\"'!&*<#|>?%@`~,.\\\n\t ", "yes", "0x", ".inf", "!!int ", "&a ", "*a", "<<: "])
).map("".join)


def _check(document: Document, file: str) -> None:
    assert document.file == file
    for problem in document.problems:
        assert problem.code
        assert problem.file == file
        assert problem.hint
        assert "\n" not in problem.message
        assert problem.line is None or problem.line >= 1


@settings(max_examples=300)
@given(st.one_of(st.text(), _YAMLISH), st.sampled_from(["p.yaml", "p.json"]))
def test_parse_document_never_raises(text: str, file: str) -> None:
    _check(parse_document(text, file=file), file)


@settings(max_examples=200)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda children: st.lists(children) | st.dictionaries(st.text(), children),
        max_leaves=20,
    )
)
def test_any_json_value_parses_to_itself(value: Any) -> None:
    text = json.dumps(value, indent=2)
    document = parse_document(text, file="p.json")
    _check(document, "p.json")
    assert document.data == value
