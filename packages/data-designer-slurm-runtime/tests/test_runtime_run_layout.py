"""Run ids and run-directory path arithmetic: ids round-trip, every path stays inside the run directory."""

from __future__ import annotations

import os
import string
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from data_designer.slurm.contracts import InvalidInputError, Name
from data_designer.slurm.runtime.store._layout import (
    RunId,
    RunLayout,
    check_component,
    format_attempt,
    format_shard,
    parse_attempt,
    parse_shard,
    run_id_factory,
)

T0 = datetime(2026, 11, 29, 12, 30, 45, tzinfo=UTC)
ROOT = Path("/shared/workspace")
RUN = "demo-20261129T123045Z-0a1b2c"

names = st.from_regex(r"\A[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?\Z")
times = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)).map(
    lambda when: when.replace(microsecond=0)
)
suffixes = st.text(alphabet="0123456789abcdef", min_size=6, max_size=6)
run_ids = st.builds(RunId, names, times, suffixes)


def layout() -> RunLayout:
    return RunLayout.of(ROOT, RUN)


def test_a_run_id_parses_into_its_parts() -> None:
    run_id = RunId.parse(RUN)
    assert run_id == RunId("demo", T0, "0a1b2c")
    assert str(run_id) == RUN


def test_the_factory_uses_the_injected_clock_and_token() -> None:
    make = run_id_factory(lambda: T0.replace(microsecond=999_999), lambda: "abcdef")
    assert str(make("my.run_1")) == "my.run_1-20261129T123045Z-abcdef"
    plus_one = datetime(2026, 11, 29, 13, 30, 45, tzinfo=timezone(timedelta(hours=1)))
    assert str(run_id_factory(lambda: plus_one, lambda: "000000")("x")) == "x-20261129T123045Z-000000"


def test_the_default_factory_draws_distinct_suffixes() -> None:
    make = run_id_factory(lambda: T0)
    ids = {str(make("demo")) for _ in range(50)}
    assert len(ids) > 1
    assert all(RunId.parse(text).name == "demo" for text in ids)


@given(run_ids)
def test_run_ids_round_trip(run_id: RunId) -> None:
    text = str(run_id)
    assert RunId.parse(text) == run_id
    assert str(RunId.parse(text)) == text
    assert check_component(text, "run id") == text


@given(names)
def test_every_contract_name_makes_a_valid_run_id(name: str) -> None:
    from pydantic import TypeAdapter

    assert TypeAdapter(Name).validate_python(name) == name
    assert RunId.parse(str(run_id_factory(lambda: T0, lambda: "abcdef")(name))).name == name


@pytest.mark.parametrize(
    "text",
    [
        "",
        "demo",
        "Demo-20261129T123045Z-0a1b2c",
        "demo-20261129T123045Z-0A1B2C",
        "demo-20261129T123045Z-0a1b2",
        "demo-20261129t123045z-0a1b2c",
        "demo-20261332T123045Z-0a1b2c",
        "demo-20261129T250000Z-0a1b2c",
        "-20261129T123045Z-0a1b2c",
        "../20261129T123045Z-0a1b2c",
        "a/b-20261129T123045Z-0a1b2c",
        "..-20261129T123045Z-0a1b2c",
        "demo\x00-20261129T123045Z-0a1b2c",
        "demo-20261129T123045Z-0a1b2c\n",
        "demo-20261129T123045Z-0a1b2c/..",
        "x" * 65 + "-20261129T123045Z-0a1b2c",
    ],
)
def test_malformed_run_ids_are_rejected(text: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        RunId.parse(text)
    assert caught.value.info.code == "invalid_run_id"


@given(st.text(max_size=100))
def test_arbitrary_text_either_is_a_run_id_or_is_rejected_cleanly(text: str) -> None:
    try:
        run_id = RunId.parse(text)
    except InvalidInputError:
        return
    assert str(run_id) == text
    assert "/" not in text
    assert text != ".."


def test_run_id_parts_are_validated() -> None:
    with pytest.raises(InvalidInputError):
        RunId("demo", datetime(2026, 1, 1), "abcdef")
    with pytest.raises(InvalidInputError):
        RunId("demo", T0.replace(microsecond=1), "abcdef")
    with pytest.raises(InvalidInputError):
        RunId("de/mo", T0, "abcdef")
    with pytest.raises(InvalidInputError):
        RunId("demo", T0, "xyz123")


def test_the_layout_of_a_run() -> None:
    run = layout()
    base = ROOT / "runs" / RUN
    attempt = base / "shards" / "00007" / "attempts" / "0002"
    assert run.run_dir == base
    assert run.run_record == base / "run.json"
    assert run.inputs_dir == base / "inputs"
    assert run.input_file("run.yaml") == base / "inputs" / "run.yaml"
    assert run.input_file("seeds", "people.parquet") == base / "inputs" / "seeds" / "people.parquet"
    assert run.inputs_manifest == base / "inputs" / "manifest.json"
    assert run.plan_record == base / "plan.json"
    assert run.submissions_dir == base / "submissions"
    assert run.submission_record(3) == base / "submissions" / "0003.json"
    assert run.shards_dir == base / "shards"
    assert run.shard_dir(7) == base / "shards" / "00007"
    assert run.attempts_dir(7) == base / "shards" / "00007" / "attempts"
    assert run.attempt_dir(7, 2) == attempt
    assert run.claim(7, 2) == attempt / "claim"
    assert run.attempt_record(7, 2) == attempt / "attempt.json"
    assert run.heartbeat(7, 2) == attempt / "heartbeat.json"
    assert run.progress(7, 2) == attempt / "progress.json"
    assert run.logs_dir(7, 2) == attempt / "logs"
    assert run.log_file(7, 2, "server-chat-0") == attempt / "logs" / "server-chat-0.log"
    assert run.output_dir(7, 2) == attempt / "output"
    assert run.output_part(7, 2, 0) == attempt / "output" / "part-00000.parquet"
    assert run.output_manifest(7, 2) == attempt / "output" / "manifest.json"
    assert run.status(7, 2) == attempt / "status.json"
    assert run.merge_dir == base / "merge"
    assert run.benchmark_record == base / "benchmark.json"


def test_numbers_are_padded_and_parsed_back_only_canonically() -> None:
    assert format_shard(0) == "00000"
    assert format_shard(123456) == "123456"
    assert format_attempt(1) == "0001"
    assert format_attempt(10000) == "10000"
    assert parse_shard("00000") == 0
    assert parse_shard("123456") == 123456
    assert parse_attempt("0001") == 1
    for stray in ("0", "01", "0000", "00001", "-001", "+001", "١٢٣٤", " 001", ".0001", "0001.tmp"):
        assert parse_attempt(stray) is None, stray
    for stray in ("0", "000000", "01234a", "٠٠٠٠٠"):
        assert parse_shard(stray) is None, stray


@given(st.integers(min_value=0, max_value=10**7))
def test_shard_and_attempt_names_round_trip(number: int) -> None:
    assert parse_shard(format_shard(number)) == number
    if number >= 1:
        assert parse_attempt(format_attempt(number)) == number


@pytest.mark.parametrize("bad", [-1, True, 1.0, "1"])
def test_invalid_numbers_are_rejected(bad: object) -> None:
    with pytest.raises(InvalidInputError):
        layout().shard_dir(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        layout().attempt_dir(0, bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        layout().attempt_dir(0, 0)
    with pytest.raises(InvalidInputError):
        layout().submission_record(0)


@pytest.mark.parametrize(
    "hostile", ["", ".", "..", "../x", "a/b", "/etc", "a\x00b", "a\nb", ".hidden", "a\\b", "x" * 256, "é" * 128]
)
def test_hostile_component_names_are_rejected(hostile: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        layout().log_file(0, 1, hostile)
    assert caught.value.info.code == "invalid_path_component"
    with pytest.raises(InvalidInputError):
        layout().input_file("ok", hostile)


def test_an_input_needs_a_name() -> None:
    with pytest.raises(InvalidInputError):
        layout().input_file()


def test_the_root_must_be_absolute_and_printable() -> None:
    with pytest.raises(InvalidInputError):
        RunLayout.of("relative/workspace", RUN)
    with pytest.raises(InvalidInputError):
        RunLayout.of("/shared/work\nspace", RUN)
    with pytest.raises(InvalidInputError):
        RunLayout.of("/shared/100%", RUN)
    with pytest.raises(InvalidInputError):
        RunLayout.of("/shared/a\\b", RUN)
    with pytest.raises(InvalidInputError):
        RunLayout.of(ROOT, "../../etc")


def inside(path: Path, directory: Path) -> bool:
    normal = PurePosixPath(os.path.normpath(path))
    return normal.is_relative_to(PurePosixPath(directory)) and ".." not in path.parts


hostile_text = st.one_of(
    st.sampled_from(["..", ".", "../..", "a/../../b", "/abs", ".tmp"]),
    st.lists(st.sampled_from([*string.printable, "\x00", "é", "/", ".."]), max_size=12).map("".join),
)


@given(
    run_id=run_ids,
    shard=st.integers(min_value=0, max_value=10**6),
    attempt=st.integers(min_value=1, max_value=10**5),
    part=st.integers(min_value=0, max_value=10**6),
    step=hostile_text,
    inputs=st.lists(hostile_text, min_size=1, max_size=3),
)
def test_every_path_stays_inside_the_run_directory(
    run_id: RunId, shard: int, attempt: int, part: int, step: str, inputs: list[str]
) -> None:
    run = RunLayout(ROOT, run_id)
    assert run.run_dir.parent == ROOT / "runs"
    paths = [
        run.run_record,
        run.inputs_manifest,
        run.plan_record,
        run.submission_record(attempt),
        run.claim(shard, attempt),
        run.attempt_record(shard, attempt),
        run.heartbeat(shard, attempt),
        run.progress(shard, attempt),
        run.output_part(shard, attempt, part),
        run.output_manifest(shard, attempt),
        run.status(shard, attempt),
        run.merge_dir,
        run.benchmark_record,
    ]
    for path in paths:
        assert inside(path, run.run_dir), path
    makers: list[Callable[[], Path]] = [lambda: run.log_file(shard, attempt, step), lambda: run.input_file(*inputs)]
    for make in makers:
        try:
            path = make()
        except InvalidInputError:
            continue
        assert inside(path, run.run_dir), path
        assert "\x00" not in str(path)
        assert not any(part.startswith(".") for part in path.relative_to(run.run_dir).parts)
