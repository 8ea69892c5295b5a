"""The one canonical JSON encoding, the sha256 digests built on it, and per-shard sampler seeds.

Every digest in data-designer-slurm (Data Designer configs, plans, manifests) is
``sha256(canonical_json(value))`` written as 64 lowercase hexadecimal characters. The encoding:

* objects have their keys sorted by code point; keys must be strings (an ``int`` key is an error,
  never silently turned into ``"1"``, so ``{1: ...}`` and ``{"1": ...}`` cannot collide);
* no whitespace at all (``","`` and ``":"`` separators);
* ASCII only: every non-ASCII character is written as a JSON ``\\uXXXX`` escape (lowercase hex,
  surrogate pairs above U+FFFF), so the bytes are valid UTF-8 on every platform and a lone
  surrogate read from JSON cannot break the encoding. Strings are not Unicode-normalised;
* ``None``/``bool``/``int`` as JSON ``null``/``true``/``false``/integers (``True`` is never ``1``);
* floats by Python's shortest round-trip ``repr`` (``0.9``, ``1e-07``, ``1e+16``); ``-0.0`` is
  written as ``0.0``; NaN and infinities are errors. An integral float stays a float: ``1.0`` and
  ``1`` are different values, as they are in the YAML/JSON they were read from;
* tuples as arrays; enums by their value; pydantic models by ``model_dump(mode="json")``.
  Anything else (sets, bytes, dates, paths) is an error: convert it first, on purpose.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel

from data_designer.slurm.contracts import InternalError, InvalidInputError, KeyPath

DIGEST_ALGORITHM = "sha256"
SAMPLER_SEED_BITS = 128
"""Width of a derived sampler seed: collisions between shards are negligible at any shard count."""

MAX_RUN_SEED = 2**63 - 1
"""Largest run seed (fits a signed 64-bit integer in any JSON or database consumer)."""

_RANGE_SEED_PURPOSE = "data-designer-slurm/range-seed/v1"
_SEED_PURPOSE = "data-designer-slurm/sampler-seed/v1"


class NotCanonicalError(InternalError):
    """A value has no canonical JSON form (a set, a non-string key, NaN...); ``key_path`` says where."""

    default_code = "not_canonical"


def canonical_json(value: Any) -> bytes:
    """The canonical JSON bytes of ``value`` (see the module docstring for the rules)."""
    plain = _plain(value, ())
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return text.encode("ascii")


def canonical_json_data(value: Any) -> bytes:
    """``canonical_json`` of JSON data as ``model_dump(mode="json")`` gives it (string keys only): one C-speed
    ``json.dumps``, byte-identical to :func:`canonical_json` for such data (a property test holds them equal).
    What it cannot prove equal (a non-finite float, a ``-0.0`` anywhere in the text, a non-JSON value) takes
    :func:`canonical_json`, which also reports the errors."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError):
        return canonical_json(value)
    if "-0.0" in text:
        return canonical_json(value)
    return text.encode("ascii")


def sha256_digest(value: Any) -> str:
    """``sha256(canonical_json(value))`` as 64 lowercase hexadecimal characters."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def derive_sampler_seed(run_seed: int, shard_index: int) -> int:
    """The sampler seed of one shard: 128 bits of ``sha256`` over the run seed and the shard index.

    The same (run seed, shard index) always gives the same seed, whatever the attempt, so a retried
    shard draws the same sampler values; different shards get unrelated seeds. See
    ``docs/architecture/sharding.md`` for how the runtime applies it.
    """
    _require_seed_part("run_seed", run_seed, MAX_RUN_SEED, hint=f"use an integer from 0 to {MAX_RUN_SEED}")
    _require_seed_part("shard_index", shard_index, None, hint="count shards from 0")
    material = canonical_json({"purpose": _SEED_PURPOSE, "run_seed": run_seed, "shard_index": shard_index})
    return int.from_bytes(hashlib.sha256(material).digest()[: SAMPLER_SEED_BITS // 8], "big")


def derive_range_seed(shard_seed: int, shard_start: int, range_start: int) -> int:
    """The sampler seed of one generated range of a shard: the shard's seed when the range starts the shard.

    A later attempt that generates only the indices its predecessors did not publish (a resumed range) seeds
    each range from the shard seed and the range's first index, so resuming from different points draws
    different values and the same resume point draws the same ones. See ``docs/architecture/sharding.md``.
    """
    sampler_seed_words(shard_seed)  # validates the shard seed
    _require_seed_part("shard_start", shard_start, None, hint="count records from 0")
    _require_seed_part("range_start", range_start, None, hint="count records from 0")
    if range_start == shard_start:
        return shard_seed
    material = canonical_json({"purpose": _RANGE_SEED_PURPOSE, "range_start": range_start, "shard_seed": shard_seed})
    return int.from_bytes(hashlib.sha256(material).digest()[: SAMPLER_SEED_BITS // 8], "big")


def sampler_seed_words(seed: int) -> tuple[int, int, int, int]:
    """``seed`` as four 32-bit words, most significant first: what ``numpy.random.seed`` accepts."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**SAMPLER_SEED_BITS:
        raise InvalidInputError(
            f"a sampler seed is a {SAMPLER_SEED_BITS}-bit non-negative integer, got {seed!r}",
            code="invalid_seed",
            hint="derive it with derive_sampler_seed",
        )
    mask = 0xFFFFFFFF
    return (seed >> 96) & mask, (seed >> 64) & mask, (seed >> 32) & mask, seed & mask


def _require_seed_part(name: str, number: int, limit: int | None, *, hint: str) -> None:
    in_range = not isinstance(number, bool) and isinstance(number, int) and number >= 0
    if not in_range or (limit is not None and number > limit):
        raise InvalidInputError(f"{name} {number!r} is out of range", code="invalid_seed", key_path=(name,), hint=hint)


def _plain(value: Any, path: KeyPath) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, Enum):
        return _plain(value.value, path)
    # Subclasses of str and int collapse to the builtin value, so they encode like it.
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _not_canonical(f"{value!r} is not a finite number", path)
        return 0.0 if value == 0.0 else float(value)
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(mode="json"), path)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, child in value.items():
            if isinstance(key, Enum):
                key = key.value
            if not isinstance(key, str):
                raise _not_canonical(f"mapping key {key!r} is not a string", path)
            out[str(key)] = _plain(child, (*path, str(key)))
        return out
    if isinstance(value, list | tuple):
        return [_plain(child, (*path, index)) for index, child in enumerate(value)]
    raise _not_canonical(f"{type(value).__name__} value {value!r} has no canonical JSON form", path)


def _not_canonical(message: str, path: KeyPath) -> NotCanonicalError:
    return NotCanonicalError(
        message,
        key_path=path or None,
        hint="convert it to strings, integers, finite floats, booleans, null, lists and string-keyed mappings",
    )
