"""The error tree: categories, exit codes, structured payloads and their human rendering."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from data_designer.slurm.contracts import (
    EXIT_CODE_BY_CATEGORY,
    CheckFailedError,
    ConflictError,
    ErrorCategory,
    ErrorInfo,
    ExitCode,
    InternalError,
    InvalidInputError,
    NotFoundError,
    Problem,
    SlurmExtensionError,
    UnavailableError,
    format_key_path,
)

ERROR_CLASSES: list[tuple[type[SlurmExtensionError], ErrorCategory, int, str]] = [
    (InternalError, ErrorCategory.INTERNAL, 1, "internal_error"),
    (InvalidInputError, ErrorCategory.INVALID_INPUT, 2, "invalid_input"),
    (NotFoundError, ErrorCategory.NOT_FOUND, 3, "not_found"),
    (ConflictError, ErrorCategory.CONFLICT, 4, "conflict"),
    (UnavailableError, ErrorCategory.UNAVAILABLE, 5, "unavailable"),
    (CheckFailedError, ErrorCategory.CHECK_FAILED, 6, "check_failed"),
]


@pytest.mark.parametrize(("cls", "category", "exit_code", "default_code"), ERROR_CLASSES)
def test_each_error_class_has_its_category_exit_code_and_default_code(
    cls: type[SlurmExtensionError], category: ErrorCategory, exit_code: int, default_code: str
) -> None:
    error = cls("it broke")
    assert isinstance(error, SlurmExtensionError)
    assert isinstance(error, Exception)
    assert str(error) == "it broke"
    assert error.exit_code == exit_code
    assert isinstance(error.exit_code, ExitCode)
    assert error.info.category == category
    assert error.info.exit_code == exit_code
    assert error.info.code == default_code
    assert error.info.message == "it broke"
    assert error.info.operation == ""
    assert error.problems == ()


def test_the_root_error_is_an_internal_error() -> None:
    error = SlurmExtensionError("unexpected")
    assert error.exit_code == ExitCode.INTERNAL
    assert int(error.exit_code) == 1
    assert error.info.category == ErrorCategory.INTERNAL


def test_every_category_maps_to_a_distinct_nonzero_exit_code() -> None:
    assert set(EXIT_CODE_BY_CATEGORY) == set(ErrorCategory)
    codes = list(EXIT_CODE_BY_CATEGORY.values())
    assert len(set(codes)) == len(codes)
    assert ExitCode.OK not in codes
    assert sorted(int(c) for c in codes) == [1, 2, 3, 4, 5, 6, 130]


def test_error_info_carries_every_structured_field() -> None:
    problem = Problem(code="relative_path", message="path 'x' is relative", file="p.yaml", line=3, key_path=("a", "b"))
    error = ConflictError(
        "exists",
        code="file_exists",
        operation="profile.init",
        file="/tmp/p.yaml",
        key_path=("clusters", "a"),
        line=7,
        hint="pass --force",
        problems=[problem],
    )
    info = error.info
    assert info == ErrorInfo(
        category=ErrorCategory.CONFLICT,
        exit_code=4,
        code="file_exists",
        operation="profile.init",
        message="exists",
        file="/tmp/p.yaml",
        key_path=("clusters", "a"),
        line=7,
        hint="pass --force",
        problems=(problem,),
    )
    assert error.problems == (problem,)
    assert ErrorInfo.model_validate_json(info.model_dump_json()) == info


def test_a_key_path_is_its_keys_and_renders_as_text_only_where_shown() -> None:
    problem = Problem(code="c", message="is wrong", key_path=("deployments", "a.b", "engine_args", "x", 2))
    assert problem.render() == "deployments.a.b.engine_args.x[2]: is wrong"
    assert problem.model_dump(mode="json")["key_path"] == ["deployments", "a.b", "engine_args", "x", 2]
    assert Problem.model_validate_json(problem.model_dump_json()) == problem  # "a.b" stays one key
    assert (format_key_path(()), format_key_path(("--shard",))) == ("", "--shard")


def test_error_info_json_names_category_by_value() -> None:
    info = NotFoundError("gone", code="profile_not_found").info
    dumped = info.model_dump(mode="json")
    assert dumped["category"] == "not_found"
    assert dumped["exit_code"] == 3
    assert dumped["code"] == "profile_not_found"
    assert dumped["problems"] == []


def test_with_operation_stamps_only_an_unset_operation() -> None:
    error = InvalidInputError("bad")
    assert error.with_operation("profile.validate") is error
    assert error.info.operation == "profile.validate"
    error.with_operation("other")
    assert error.info.operation == "profile.validate"


@pytest.mark.parametrize(
    ("problem", "expected"),
    [
        (
            Problem(
                code="c",
                message="is wrong",
                file="p.yaml",
                line=4,
                key_path=("clusters", "a", "account"),
                hint="fix it",
            ),
            "p.yaml:4: clusters.a.account: is wrong (fix: fix it)",
        ),
        (
            Problem(code="c", message="is wrong", file="p.yaml", key_path=("k",), hint="h"),
            "p.yaml: k: is wrong (fix: h)",
        ),
        (Problem(code="c", message="is wrong", line=4, key_path=("k",), hint="h"), "k: is wrong (fix: h)"),
        (Problem(code="c", message="is wrong", file="p.yaml", line=1, hint="h"), "p.yaml:1: is wrong (fix: h)"),
        (Problem(code="c", message="is wrong", file="p.yaml", line=1, key_path=("k",)), "p.yaml:1: k: is wrong"),
        (Problem(code="c", message="is wrong"), "is wrong"),
        (Problem(code="c", message="is wrong", key_path=(), hint=""), "is wrong"),
    ],
)
def test_problem_renders_file_line_key_message_and_fix(problem: Problem, expected: str) -> None:
    assert problem.render() == expected


def test_render_lines_gives_one_line_per_problem() -> None:
    problems = [
        Problem(code="a", message="first", file="f.yaml", line=2, key_path=("x",), hint="h1"),
        Problem(code="b", message="second", file="f.yaml", line=5, key_path=("y",), hint="h2"),
    ]
    error = InvalidInputError.from_problems(problems, operation="op", file="f.yaml")
    assert error.info.render_lines() == ["f.yaml:2: x: first (fix: h1)", "f.yaml:5: y: second (fix: h2)"]


def test_render_lines_without_problems_renders_the_error_itself() -> None:
    error = NotFoundError("profile '/p' does not exist", file="/p", hint="create it")
    assert error.info.render_lines() == ["/p: profile '/p' does not exist (fix: create it)"]


def test_from_problems_with_one_problem_takes_its_code_and_location() -> None:
    problem = Problem(
        code="relative_path", message="path 'x' is relative", file="f.yaml", line=3, key_path=("k",), hint="h"
    )
    error = InvalidInputError.from_problems([problem], operation="profile.load")
    assert error.info.code == "relative_path"
    assert error.info.message == problem.render()
    assert error.info.file == "f.yaml"
    assert (error.info.line, error.info.key_path, error.info.hint) == (3, ("k",), "h")
    assert error.info.operation == "profile.load"
    assert error.problems == (problem,)
    assert error.exit_code == 2


def test_from_problems_with_several_problems_summarises_and_keeps_all() -> None:
    problems = [
        Problem(code="a", message="first", file="f.yaml", line=2, key_path=("x",), hint="h1"),
        Problem(code="b", message="second", file="f.yaml", line=5, key_path=("y",), hint="h2"),
        Problem(code="c", message="third", file="f.yaml", line=9, key_path=("z",), hint="h3"),
    ]
    error = InvalidInputError.from_problems(problems, file="f.yaml")
    assert error.info.code == "invalid_input"
    assert error.info.message.startswith("3 problems in f.yaml; first: ")
    assert error.info.message.endswith(problems[0].render())
    assert (error.info.line, error.info.key_path) == (2, ("x",))
    assert error.problems == tuple(problems)


def test_problem_and_error_info_are_frozen_and_forbid_extra_keys() -> None:
    problem = Problem(code="c", message="m")
    with pytest.raises(ValidationError):
        problem.message = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        Problem.model_validate({"code": "c", "message": "m", "severity": "high"})
    info = InternalError("x").info
    with pytest.raises(ValidationError):
        info.exit_code = 0  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        ErrorInfo.model_validate({**info.model_dump(), "traceback": "..."})
