"""The canonical JSON encoding, its sha256 digests, and per-shard sampler seeds."""

from __future__ import annotations

import hashlib
import json
import random
from enum import Enum, IntEnum
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from data_designer.slurm.contracts import InvalidInputError, KeyPath, Problem
from data_designer.slurm.planner import (
    MAX_RUN_SEED,
    SAMPLER_SEED_BITS,
    NotCanonicalError,
    canonical_json,
    derive_sampler_seed,
    sampler_seed_words,
    sha256_digest,
)

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=30,
)
OBJECTS = st.dictionaries(st.text(), JSON_VALUES, min_size=1, max_size=6)


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same value with every mapping's keys inserted in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: shuffled(child, rng) for key, child in items}
    if isinstance(value, list):
        return [shuffled(child, rng) for child in value]
    return value


class Color(Enum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


def test_the_encoding_is_sorted_compact_ascii() -> None:
    value = {"b": 1, "a": [1.5, True, None, "é", "😀"], "c": {"z": 0.9, "y": 1e-7}}
    assert canonical_json(value) == b'{"a":[1.5,true,null,"\\u00e9","\\ud83d\\ude00"],"b":1,"c":{"y":1e-07,"z":0.9}}'
    # Pinned: a change here changes every digest the project has ever recorded.
    assert sha256_digest(value) == "8830b6f4303a1c691c5a22595dffe9dfa4c634576a4dceb355d5f376e95ff766"


def test_the_digest_is_64_lowercase_hex_of_the_canonical_bytes() -> None:
    value = {"k": [1, 2.5, "x"]}
    digest = sha256_digest(value)
    assert digest == hashlib.sha256(canonical_json(value)).hexdigest()
    assert len(digest) == 64
    assert digest == digest.lower()


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ((1, 2), [1, 2]),
        (-0.0, 0.0),
        (Color.RED, "red"),
        (Level.HIGH, 3),
        ({Color.RED: 1}, {"red": 1}),
        (
            Problem(code="c", message="m", line=3),
            {"code": "c", "message": "m", "line": 3, "file": None, "key_path": None, "hint": None},
        ),
    ],
)
def test_equivalent_python_values_encode_alike(left: Any, right: Any) -> None:
    assert canonical_json(left) == canonical_json(right)


@pytest.mark.parametrize(("left", "right"), [(1, 1.0), (True, 1), (False, 0), (None, False), ("1", 1), ([], {})])
def test_different_json_values_encode_differently(left: Any, right: Any) -> None:
    assert canonical_json(left) != canonical_json(right)
    assert sha256_digest(left) != sha256_digest(right)


@pytest.mark.parametrize(
    ("value", "key_path", "fragment"),
    [
        ({"a": float("nan")}, ("a",), "not a finite number"),
        ({"a": [0, float("inf")]}, ("a", 1), "not a finite number"),
        ({"a": {1: "x"}}, ("a",), "mapping key 1 is not a string"),
        ({"s": {1, 2}}, ("s",), "set value"),
        ({"b": b"x"}, ("b",), "bytes value"),
    ],
)
def test_values_without_a_canonical_form_are_errors_naming_where(value: Any, key_path: KeyPath, fragment: str) -> None:
    with pytest.raises(NotCanonicalError) as caught:
        canonical_json(value)
    assert caught.value.info.key_path == key_path
    assert fragment in str(caught.value)
    assert caught.value.info.code == "not_canonical"


@given(OBJECTS, st.randoms(use_true_random=False))
def test_the_digest_ignores_key_order(value: dict[str, Any], rng: random.Random) -> None:
    reordered = shuffled(value, rng)
    assert canonical_json(reordered) == canonical_json(value)
    assert sha256_digest(reordered) == sha256_digest(value)


@given(OBJECTS, st.data())
def test_the_digest_changes_when_any_value_changes(value: dict[str, Any], data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(sorted(value)))
    changed = {**value, key: [value[key]]}  # wrapping in a list always makes a different JSON value
    assert sha256_digest(changed) != sha256_digest(value)
    renamed = {(k + "\x00" if k == key else k): v for k, v in value.items()}
    assert sha256_digest(renamed) != sha256_digest(value)


@given(JSON_VALUES)
def test_the_encoding_round_trips_and_is_plain_ascii(value: Any) -> None:
    encoded = canonical_json(value)
    assert encoded.isascii()
    assert json.loads(encoded) == json.loads(json.dumps(value))
    assert canonical_json(json.loads(encoded)) == encoded


def test_sampler_seeds_are_pinned_deterministic_and_128_bits() -> None:
    # Pinned: a change here changes the sampler values of every recorded plan.
    assert derive_sampler_seed(7, 0) == 45883409148438855485259697525544788985
    assert derive_sampler_seed(7, 1) == 186991364304028816826475300303659080791
    assert derive_sampler_seed(7, 0) == derive_sampler_seed(7, 0)
    expected = sha256_digest({"purpose": "data-designer-slurm/sampler-seed/v1", "run_seed": 7, "shard_index": 0})
    assert derive_sampler_seed(7, 0) == int(expected[: SAMPLER_SEED_BITS // 4], 16)


def test_every_shard_of_a_run_gets_its_own_seed_and_runs_differ() -> None:
    run_a = {derive_sampler_seed(1, shard) for shard in range(5000)}
    run_b = {derive_sampler_seed(2, shard) for shard in range(5000)}
    assert len(run_a) == 5000
    assert len(run_b) == 5000
    assert not run_a & run_b


@given(st.integers(0, MAX_RUN_SEED), st.integers(0, 2**40), st.integers(0, 2**40))
def test_distinct_shards_never_share_a_seed(run_seed: int, first: int, second: int) -> None:
    if first != second:
        assert derive_sampler_seed(run_seed, first) != derive_sampler_seed(run_seed, second)


@given(st.integers(0, 2**SAMPLER_SEED_BITS - 1))
def test_seed_words_are_four_32_bit_words_most_significant_first(seed: int) -> None:
    words = sampler_seed_words(seed)
    assert len(words) == 4
    assert all(0 <= w < 2**32 for w in words)
    assert (words[0] << 96) | (words[1] << 64) | (words[2] << 32) | words[3] == seed


@pytest.mark.parametrize(("run_seed", "shard"), [(-1, 0), (MAX_RUN_SEED + 1, 0), (0, -1), (True, 0), (0, False)])
def test_out_of_range_seed_inputs_are_invalid_input(run_seed: int, shard: int) -> None:
    with pytest.raises(InvalidInputError) as caught:
        derive_sampler_seed(run_seed, shard)
    assert caught.value.info.code == "invalid_seed"


@pytest.mark.parametrize("seed", [-1, 2**SAMPLER_SEED_BITS, True])
def test_seed_words_reject_what_is_not_a_derived_seed(seed: int) -> None:
    with pytest.raises(InvalidInputError):
        sampler_seed_words(seed)
