"""vLLM as the planner sees it: the supported releases, the ``vllm serve`` options each accepts and what each takes,
the flags the runtime owns, and engine args checked against one release and rendered into argv.

**Engine args** are a deployment's ``engine_args`` mapping: a ``vllm serve`` long option written without its leading
dashes, mapped to its value (``max-num-seqs: 256``). Rendering is deterministic (keys in code-point order, so the
authored order does not matter) and never goes through a shell:

* ``true`` renders the bare flag (``--enforce-eager``); ``null`` (an empty YAML value) does the same;
* ``false`` renders the negation (``--no-enforce-eager``), which the supported vLLM must accept; a flag without one
  (``--disable-log-stats``) is left off by removing the key;
* an integer renders as ``--max-num-seqs 256``, a float in its shortest round-trip form (``--gpu-memory-utilization
  0.9``);
* a string is one argv element whatever it holds, so JSON stays whole: ``--compilation-config '{"mode": 3}'``; a
  value that starts with ``-`` is attached (``--flag=-x``) so argparse cannot take it for an option;
* a dotted key (``compilation-config.mode: 3``) is vLLM's per-field form of a JSON flag: the part before the first
  dot must be a flag, and it renders as one element ``--compilation-config.mode=3`` (vLLM reads the value as JSON,
  so ``true``, ``false`` and ``null`` render as those words).

**Checks** (:func:`check_engine_args`) hold the args to the ``vllm serve`` of one release (a key of the data, the
one the deployment will run), or, without one, to every supported release at once, so what plans cleanly parses:

* the option exists in that release (``engine_arg_unknown``; ``engine_arg_version`` when only another release has
  it) and is not one the runtime sets (``engine_arg_controlled``);
* the value fits what the option takes (``engine_arg_kind``): a switch takes ``true``/``null``, or ``false`` when it
  has a ``--no-`` form (else ``engine_arg_no_negation``); an option that takes a value needs one (``true`` and
  ``null`` render the bare flag: "expected one argument") that its argparse ``type`` converts: ``int()``,
  ``float()``, vLLM's human-readable ints (``32k``), JSON, a JSON object for a config; a number given to a text
  option is fine, it is rendered as text. ``engine_arg_choice`` when argparse has ``choices`` and the converted
  value is not one of them. An option whose converter is not mirrored (``type: any``) takes any value;
* a dotted key needs an option that parses a JSON object (``dotted`` in the data): vLLM folds every
  ``--x.key=value`` into one ``--x '{...}'`` given after all other arguments, so a JSON given whole as well would
  be dropped (``engine_arg_json_conflict``); a config's keys, dotted or in its JSON, must be fields of its
  dataclass where pydantic forbids others (``engine_arg_field``, when the data lists the fields);
* no option is given twice under two names (``engine_arg_conflict``: ``x`` with ``no-x``, ``enable-x`` with
  ``disable-x``, two aliases), and no number is infinite or NaN (``engine_arg_not_finite``).

The option data come from the released wheels of each supported vLLM (``data/vllm_serve_flags.json``, written by
``scripts/extract-vllm-flags``, which records the wheel, its sha256 and the files read, and whose docstring defines
the format); vLLM is never imported. Reading that package resource is the only I/O here, and it is the same for
every call.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
from collections.abc import Mapping
from importlib import resources
from typing import Literal

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from data_designer.slurm.contracts import EngineArgValue, InternalError, InvalidInputError, KeyPath, Problem
from data_designer.slurm.planner._versions import satisfies

SUPPORTED_VLLM = ">=0.32,<0.34"
"""The vLLM releases a ``vllm`` deployment supports (a PEP 440 specifier): the two newest minor lines on PyPI when
this was written; ``data/vllm_serve_flags.json`` holds the ``vllm serve`` flags of the newest patch of each."""

_RUNTIME_BINDS = "the runtime binds the server where the client and its health checks can reach it"
_NOT_PLANNED_GPUS = "the plan gives each replica tensor_parallel x pipeline_parallel GPUs and no more"
_DATA_PARALLEL = "use 'replicas': each replica is its own server on its own GPUs and the client spreads requests"
_MULTI_NODE = "the runtime launches a replica whose pipeline stages span nodes and wires the nodes itself"

CONTROLLED_FLAGS: Mapping[str, str] = {
    # Where the server listens and who may call it: the runtime binds a probed port, on loopback or (for a replica
    # that spans nodes) on all interfaces with a per-attempt API key. Anything else would leave the client and the
    # health checks unable to reach the server, or the server open without a key.
    "--host": _RUNTIME_BINDS,
    "--port": f"{_RUNTIME_BINDS}; it picks a free port in the allocation",
    "--uds": f"{_RUNTIME_BINDS}; the client speaks TCP",
    "--api-key": "the runtime generates a key for each attempt of a replica that spans nodes",
    "--ssl-keyfile": "the client and the health checks speak plain HTTP inside the allocation",
    "--ssl-certfile": "the client and the health checks speak plain HTTP inside the allocation",
    "--grpc": "the client needs the OpenAI-compatible HTTP server, which --grpc replaces",
    "--grpc-port": "the client needs the OpenAI-compatible HTTP server (--grpc-port needs vLLM's Rust frontend)",
    # What is served: the positional model and the alias. vLLM rejects --served-model-name before the positional.
    "--model": "use the deployment's 'model' key",
    "--served-model-name": "the deployment's alias is the served name; rename the deployment instead",
    # A config file would set options past every check here (host, port, parallelism included).
    "--config": "write the options under 'engine_args' instead of in a vLLM config file",
    # vLLM would print its help and exit 0: a server that never starts, and no error to say why.
    "--help": "'vllm serve --help' prints the options and exits instead of serving",
    "-h": "'vllm serve --help' prints the options and exits instead of serving",
    # A token in argv is readable by every user of the node (/proc/*/cmdline) and lands in job records.
    "--hf-token": "list HF_TOKEN under the deployment's 'environment' to pass it through from the job",
    # The GPUs a replica uses: the plan sizes steps and allocations from tensor_parallel x pipeline_parallel.
    "--tensor-parallel-size": "use the deployment's 'tensor_parallel' key",
    "-tp": "use the deployment's 'tensor_parallel' key",
    "--pipeline-parallel-size": "use the deployment's 'pipeline_parallel' key",
    "-pp": "use the deployment's 'pipeline_parallel' key",
    "--prefill-context-parallel-size": f"it multiplies the GPUs a replica needs; {_NOT_PLANNED_GPUS}",
    "-pcp": f"it multiplies the GPUs a replica needs; {_NOT_PLANNED_GPUS}",
    "--device-ids": "Slurm assigns each replica its GPUs (CUDA_VISIBLE_DEVICES)",
    # Data parallelism inside one server would need GPUs (and ports, and cross-node wiring) the plan did not give it.
    "--data-parallel-size": _DATA_PARALLEL,
    "-dp": _DATA_PARALLEL,
    "--data-parallel-size-local": _DATA_PARALLEL,
    "-dpl": _DATA_PARALLEL,
    "--data-parallel-rank": _DATA_PARALLEL,
    "-dpn": _DATA_PARALLEL,
    "--data-parallel-start-rank": _DATA_PARALLEL,
    "-dpr": _DATA_PARALLEL,
    "--data-parallel-address": _DATA_PARALLEL,
    "-dpa": _DATA_PARALLEL,
    "--data-parallel-rpc-port": _DATA_PARALLEL,
    "-dpp": _DATA_PARALLEL,
    "--data-parallel-backend": _DATA_PARALLEL,
    "-dpb": _DATA_PARALLEL,
    "--data-parallel-hybrid-lb": _DATA_PARALLEL,
    "-dph": _DATA_PARALLEL,
    "--data-parallel-external-lb": _DATA_PARALLEL,
    "-dpe": _DATA_PARALLEL,
    "--data-parallel-multi-port-external-lb": _DATA_PARALLEL,
    "-dpm": _DATA_PARALLEL,
    "--data-parallel-supervisor-port": _DATA_PARALLEL,
    # Multi-node: which processes run where, the rendezvous address and the executor that joins them are the
    # runtime's (MULTI_NODE_FLAGS); on one node vLLM picks its executor itself.
    "--headless": _MULTI_NODE,
    "--nnodes": _MULTI_NODE,
    "-n": _MULTI_NODE,
    "--node-rank": _MULTI_NODE,
    "-r": _MULTI_NODE,
    "--master-addr": _MULTI_NODE,
    "--master-port": _MULTI_NODE,
    "--distributed-executor-backend": _MULTI_NODE,
}
"""Flags a user's engine args must not set, each with why (and what to use instead)."""

RENDERED_FLAGS: tuple[str, ...] = (
    "--host",
    "--port",
    "--served-model-name",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
)
"""Flags the planner writes into every vLLM server argv, before the engine args; all of them are controlled (the
per-attempt API key reaches vLLM as ``VLLM_API_KEY``, never on argv)."""

MULTI_NODE_FLAGS: tuple[str, ...] = (
    "--headless",
    "--nnodes",
    "--node-rank",
    "--master-addr",
    "--master-port",
    "--distributed-executor-backend",
)
"""Flags reserved for the runtime's launch of a replica that spans nodes (all controlled)."""

_DATA_FILE = "vllm_serve_flags.json"
_RELEASE = re.compile(r"(\d+(?:\.\d+)*)(?:\.post\d+)?(?:\+[0-9A-Za-z.]+)?")
_VERSION_HINT = "set 'vllm_version' on the deployment, or use a registered image whose vLLM has it"

Choice = str | int | float | None


class _Option(BaseModel):
    """One argparse action of ``vllm serve``: its option strings and what it takes (scripts/extract-vllm-flags)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    options: tuple[str, ...] = Field(min_length=1)
    kind: Literal["switch", "value", "optional_value", "multi_value", "unknown"]
    negative: tuple[str, ...] = ()
    type: (
        Literal["int", "int_with_suffix", "int_with_suffix_or_auto", "float", "str", "json", "json_config"]
        | Literal["str_or_json", "any"]
        | None
    ) = None
    nargs: Literal["+", "*"] | int | None = None
    nullable: bool = False
    choices: tuple[Choice, ...] | None = None
    choices_unchecked: bool = False
    dotted: bool = False
    fields: tuple[str, ...] | None = None
    why: str | None = None


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    schema_version: Literal[2]
    origin: tuple[dict[str, object], ...]
    versions: dict[str, tuple[_Option, ...]] = Field(min_length=1)


@functools.cache
def _options_by_version() -> Mapping[str, Mapping[str, _Option]]:
    text = resources.files("data_designer.slurm.planner").joinpath("data", _DATA_FILE).read_text(encoding="utf-8")
    try:
        data = _Data.model_validate_json(text)
    except ValidationError as exc:
        raise InternalError(f"{_DATA_FILE} is not vllm serve option data: {exc}", code="vllm_flags_data") from exc
    result: dict[str, dict[str, _Option]] = {}
    for version, actions in data.versions.items():
        index: dict[str, _Option] = {}
        for action in actions:
            for flag in action.options:
                if not flag.startswith("-") or flag in index:
                    raise InternalError(
                        f"{_DATA_FILE}: vllm {version}: bad or repeated {flag!r}", code="vllm_flags_data"
                    )
                index[flag] = action
        result[version] = index
    return result


def serve_flag_versions() -> tuple[str, ...]:
    """The vLLM versions whose ``vllm serve`` flags are known, oldest first."""
    return tuple(sorted(_options_by_version(), key=Version))


def _versions(version: str | None) -> tuple[str, ...]:
    if version is None:
        return serve_flag_versions()
    if version not in _options_by_version():
        raise InvalidInputError(
            f"no vllm serve flags are known for vllm {version!r}",
            code="unknown_vllm_version",
            hint=f"use one of {', '.join(serve_flag_versions())}",
        )
    return (version,)


def known_serve_flags(version: str | None = None) -> frozenset[str]:
    """Option strings ``vllm serve`` accepts (``--max-num-seqs``, ``--no-enforce-eager``, ``-tp``...).

    ``version`` is one of :func:`serve_flag_versions`; ``None`` means accepted by every supported version.
    """
    options = _options_by_version()
    return frozenset.intersection(*(frozenset(options[v]) for v in _versions(version)))


def serve_flags_version_for(installed: str) -> str | None:
    """The key of the flag data for an installed vLLM (``0.33.1+cu129`` -> ``0.33.0``): releases of one minor line
    share their ``vllm serve`` flags. None when no data covers it: another line, a pre-release or dev build (their
    flags were never checked), or no version at all."""
    try:
        parsed = Version(installed)
    except InvalidVersion:
        return None
    if parsed.is_prerelease or parsed.epoch:
        return None
    return next((v for v in serve_flag_versions() if Version(v).release[:2] == parsed.release[:2]), None)


def is_supported_vllm_version(version: str) -> bool:
    """Whether a vLLM version string (``0.33.0``, ``0.33.0+cu129``) lies in :data:`SUPPORTED_VLLM`.

    Pre-releases and dev builds are not supported: their flags were never checked.
    """
    return _RELEASE.fullmatch(version) is not None and satisfies(version, SUPPORTED_VLLM)


def check_engine_args(
    args: Mapping[str, EngineArgValue], *, path: KeyPath = ("engine_args",), version: str | None = None
) -> list[Problem]:
    """Every problem of a deployment's engine args for the ``vllm serve`` of ``version`` (a key of the flag data;
    None: every supported version), in key order; the module docstring lists what is checked. ``path`` is the key
    path of the mapping, for the problems' ``key_path``."""
    versions = _versions(version)
    problems: list[Problem] = []
    for key in sorted(args):
        problem = _check_one(key, args[key], versions, (*path, key))
        if problem is not None:
            problems.append(problem)
    problems.extend(_conflicts(args, path, versions))
    if not problems:
        problems.extend(_requirements(args, path))
    return problems


def check_engine_arg_name(key: str, *, path: KeyPath = (), version: str | None = None) -> Problem | None:
    """The problem of an engine arg's name alone (controlled, unknown, not in ``version``), whatever its value:
    for a benchmark axis, whose values are checked one by one with :func:`check_engine_args`."""
    name = key.split(".", 1)[0]
    return _check_name(key, name, _versions(version), path)


def _label(versions: tuple[str, ...]) -> str:
    return f"vllm {versions[0]}" if len(versions) == 1 else f"vllm {SUPPORTED_VLLM}"


def _check_one(key: str, value: EngineArgValue, versions: tuple[str, ...], at: KeyPath) -> Problem | None:
    name, dot, _ = key.partition(".")
    problem = _check_name(key, name, versions, at)
    if problem is not None:
        return problem
    if isinstance(value, float) and not math.isfinite(value):
        return Problem(
            code="engine_arg_not_finite",
            message=f"engine arg {key!r} is {value!r}",
            key_path=at,
            hint="write a finite number",
        )
    for version in versions:
        option = _options_by_version()[version][f"--{name}"]
        check = _check_dotted if dot else _check_value
        problem = check(key, name, value, option, version, at)
        if problem is not None:
            return problem
    return None


def _check_name(key: str, name: str, versions: tuple[str, ...], at: KeyPath) -> Problem | None:
    bare = name.lstrip("-").replace("_", "-")
    # A negation (``no-data-parallel-hybrid-lb``) belongs to its switch; a single-dash alias (``tp``) to its option.
    for flag in (f"--{bare}", f"-{bare}", f"--{bare.removeprefix('no-')}"):
        if flag in CONTROLLED_FLAGS:
            return Problem(
                code="engine_arg_controlled",
                message=f"engine arg {key!r} ({flag}) is set by the runtime",
                key_path=at,
                hint=f"remove it: {CONTROLLED_FLAGS[flag]}",
            )
    options = _options_by_version()
    having = [v for v in serve_flag_versions() if f"--{name}" in options[v]]
    missing = [v for v in versions if v not in having]
    if name != bare or not having:
        return Problem(
            code="engine_arg_unknown",
            message=f"'vllm serve' ({_label(versions)}) has no option --{name}",
            key_path=at,
            hint=_suggestion(name, bare, known_serve_flags(versions[0] if len(versions) == 1 else None)),
        )
    if missing:
        return Problem(
            code="engine_arg_version",
            message=f"'vllm serve' of vllm {', '.join(missing)} has no option --{name} "
            f"(vllm {', '.join(having)} has it)",
            key_path=at,
            hint=_VERSION_HINT
            if len(versions) > 1
            else f"remove it, or serve with a vLLM that has it: {_VERSION_HINT}",
        )
    return None


def _suggestion(name: str, bare: str, known: frozenset[str]) -> str:
    if f"--{bare}" in known:
        return f"write it as {bare!r} (the long option without leading dashes, words joined by '-')"
    if re.fullmatch(r"O\d?", bare) and "--optimization-level" in known:
        return "write 'optimization-level: N' (-O is vLLM's shorthand for it)"
    longs = sorted(flag[2:] for flag in known if flag.startswith("--"))
    close = difflib.get_close_matches(bare, longs, n=1, cutoff=0.75)
    if close:
        return f"did you mean {close[0]!r}?"
    return "write a 'vllm serve' long option without its leading dashes, e.g. 'max-num-seqs'"


_TAKES = {
    "int": "an integer",
    "int_with_suffix": "an integer, with or without a suffix (32k: x1000, 32K: x1024; m, g, t likewise)",
    "int_with_suffix_or_auto": "an integer, with or without a suffix (32k: x1000, 32K: x1024), or 'auto'",
    "float": "a number",
    "str": "text",
    "json": "JSON",
    "json_config": "a JSON object",
    "str_or_json": "text, or a JSON object",
    "any": "a value",
}
_NOT_CONVERTED = object()
_NO_OPTION = _Option(options=("-",), kind="unknown")


def _check_dotted(
    key: str, name: str, value: EngineArgValue, option: _Option, version: str, at: KeyPath
) -> Problem | None:
    if option.dotted:
        # vLLM reads the value as JSON, else as a human-readable int, else as text: any value goes; the field must
        # be one the config has, where the data knows them (``x.list_field+`` appends to a list).
        field = key.split(".")[1].removesuffix("+") if key.count(".") == 1 else key.split(".")[1]
        return _check_fields(key, name, [field], option, version, at)
    return Problem(
        code="engine_arg_kind",
        message=f"engine arg {key!r}: --{name} (vllm {version}) takes no dotted keys; only an option that takes a "
        "JSON object (such as --compilation-config) has fields",
        key_path=at,
        hint=f"write '{name}: VALUE'",
    )


def _check_value(
    key: str, name: str, value: EngineArgValue, option: _Option, version: str, at: KeyPath
) -> Problem | None:
    label = f"--{name} (vllm {version})"
    known = _options_by_version()[version]
    if option.kind == "unknown":
        return None
    if option.kind == "switch":
        if value is None or value is True:
            return None
        if value is False:
            if f"--no-{name}" in known:
                return None
            return Problem(
                code="engine_arg_no_negation",
                message=f"--{name} is a switch without a --no-{name} form",
                key_path=at,
                hint="remove the key to leave the switch off",
            )
        off = f", '{name}: false' to turn it off" if f"--no-{name}" in known else ", or remove the key to leave it off"
        return _kind(
            key, value, f"{label} is a switch and takes no value", at, f"write '{name}: true' to turn it on{off}"
        )
    takes = _TAKES[option.type or "str"]
    if option.kind == "multi_value":
        takes = f"{'one or more' if option.nargs == '+' else 'any number of'} values, each {takes}"
    if value is None or value is True:
        if option.kind == "optional_value" or option.nargs == "*":
            return None  # the bare flag: argparse stores its const (or an empty list)
        why = f"{label} takes {takes}: the bare flag stops vLLM at start"
        return _kind(key, value, why, at, f"give it {takes}, or remove the key to keep vLLM's default")
    if value is False:
        if f"--no-{name}" in known:
            return None  # a separate switch of that name
        return _kind(key, value, f"{label} takes {takes} and has no --no-{name} form", at, "remove the key to unset it")
    if isinstance(option.nargs, int) and option.nargs != 1:
        return _kind(key, value, f"{label} takes exactly {option.nargs} values; an engine arg renders one", at, "")
    converted = _convert(option, value)
    if converted is _NOT_CONVERTED:
        return _kind(key, value, f"{label} takes {takes}", at, f"write {takes}")
    if option.choices is not None and converted not in option.choices:
        return _choice(key, value, option.choices, label, at)
    if isinstance(converted, dict) and option.type == "json_config":
        return _check_fields(key, name, sorted(converted), option, version, at)
    return None


def _check_fields(key: str, name: str, fields: list[str], option: _Option, version: str, at: KeyPath) -> Problem | None:
    """A JSON config's keys against its dataclass's fields (pydantic forbids others, where the data lists them)."""
    unknown = [f for f in fields if option.fields is not None and f not in option.fields]
    if not unknown or option.fields is None:
        return None
    close = difflib.get_close_matches(unknown[0].replace("-", "_"), option.fields, n=1, cutoff=0.75)
    return Problem(
        code="engine_arg_field",
        message=f"engine arg {key!r}: the config of --{name} (vllm {version}) has no field {unknown[0]!r}; "
        "vLLM refuses it at start",
        key_path=at,
        hint=f"did you mean {close[0]!r}?" if close else f"its fields are {', '.join(option.fields)}",
    )


def _kind(key: str, value: EngineArgValue, why: str, at: KeyPath, hint: str) -> Problem:
    return Problem(
        code="engine_arg_kind",
        message=f"engine arg {key!r} is {_shown(value)}, but {why}",
        key_path=at,
        hint=hint or "remove the key",
    )


def _shown(value: EngineArgValue) -> str:
    return (
        {None: "null", True: "true", False: "false"}[value] if value is None or isinstance(value, bool) else repr(value)
    )


def _choice(key: str, value: EngineArgValue, choices: tuple[Choice, ...], label: str, at: KeyPath) -> Problem:
    listed = ", ".join(_shown(c) for c in choices if c is not None)
    words = [str(c) for c in choices if c is not None]
    close = difflib.get_close_matches(str(value), words, n=1, cutoff=0.6)
    return Problem(
        code="engine_arg_choice",
        message=f"engine arg {key!r} is {_shown(value)}, but {label} takes one of {listed}"
        + (" (or an empty value for none)" if None in choices else ""),
        key_path=at,
        hint=f"did you mean {close[0]!r}?" if close else "write one of the values listed",
    )


def _convert(option: _Option, value: str | int | float) -> object:
    """The value argparse stores for the rendered text, as the option's ``type`` converts it (a mirror of vLLM's
    converters, see scripts/extract-vllm-flags); ``_NOT_CONVERTED`` where vLLM would refuse it."""
    try:
        text = _text(value)
        if option.nullable and text in {"", "None"}:  # optional_type
            return None
        kind = option.type or "str"
        if kind == "int":
            return int(text)
        if kind == "int_with_suffix":
            return _human_int(text)
        if kind == "int_with_suffix_or_auto":
            return -1 if text.strip() == "-1" or text.strip().lower() == "auto" else _human_int(text)
        if kind == "float":
            return float(text)
        if kind == "json":
            return json.loads(text)
        if kind == "json_config":
            config = json.loads(_expand_human_ints(text))
            return config if isinstance(config, dict) else _NOT_CONVERTED
        if kind == "str_or_json" and re.match(r"(?s)^\s*{.*}\s*$", text):
            return json.loads(text)
        return text
    except ValueError:  # json.JSONDecodeError is one
        return _NOT_CONVERTED


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _human_int(text: str) -> int:
    """vLLM's ``human_readable_int``: ``25.6k`` -> 25600, ``1K`` -> 1024 (no decimals with a binary suffix)."""
    text = text.strip()
    match = _HUMAN_INT.fullmatch(text)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        return int(number) * _BINARY[suffix]
    return int(text)


def _expand_human_ints(text: str) -> str:
    """vLLM's ``_expand_json_human_readable_numbers``: bare ``80m`` tokens outside JSON strings become integers."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', text)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b", lambda m: str(_human_int(m.group())), parts[i])
    return "".join(parts)


REQUIRED_WITH: Mapping[str, str] = {
    "enable-auto-tool-choice": "tool-call-parser",
    "enable-log-outputs": "enable-log-requests",
}
"""Switches ``vllm serve`` refuses on (``validate_parsed_serve_args``) unless the other option is set too: found by
``nox -s vllm_parser``'s sweep of every option, which feeds both pairs to the real parser."""


def _requirements(args: Mapping[str, EngineArgValue], path: KeyPath) -> list[Problem]:
    problems = []
    for key, needed in REQUIRED_WITH.items():
        on = key in args and args[key] is not False
        given = needed in args and args[needed] is not False and args[needed] is not None
        if on and not given:
            problems.append(
                Problem(
                    code="engine_arg_requires",
                    message=f"engine arg {key!r} needs {needed!r} too: 'vllm serve' refuses --{key} without --{needed}",
                    key_path=(*path, key),
                    hint=f"set '{needed}' as well, or remove {key!r}",
                )
            )
    return problems


def _conflicts(args: Mapping[str, EngineArgValue], path: KeyPath, versions: tuple[str, ...]) -> list[Problem]:
    problems: dict[str, Problem] = {}
    options = _options_by_version()
    for key in sorted(args):
        dotted = sorted(k for k in args if k.startswith(f"{key}."))
        takes_json = any(options[v].get(f"--{key}", _NO_OPTION).dotted for v in versions)
        if "." not in key and dotted and takes_json:  # else the dotted keys are refused on their own
            problems[key] = Problem(
                code="engine_arg_json_conflict",
                message=f"engine args {key!r} and {dotted[0]!r} both set --{key}: vLLM folds dotted keys into one "
                f"JSON given after every other argument, so the JSON of {key!r} would be dropped",
                key_path=(*path, key),
                hint=f"write it once: the whole JSON in {key!r}, or only dotted keys (without {key!r})",
            )
    for version in versions:
        known = options[version]
        by_option: dict[tuple[str, ...], list[str]] = {}
        for key in sorted(k for k in args if "." not in k and f"--{k}" in known):
            by_option.setdefault(known[f"--{key}"].options, []).append(key)
        for strings, keys in by_option.items():
            first = strings[0][2:] if strings[0][2:] in keys else keys[0]
            for key in keys:
                if key != first and key not in problems:
                    problems[key] = _twice(path, first, key, known)
    for key in sorted(args):
        for prefix, other in (("no-", ""), ("disable-", "enable-")):
            twin = other + key[len(prefix) :]
            if key.startswith(prefix) and twin in args and key not in problems and twin not in problems:
                problems[key] = _twice(path, twin, key, {})
    return [problems[key] for key in sorted(problems)]


def _twice(path: KeyPath, first: str, key: str, known: Mapping[str, _Option]) -> Problem:
    option = known.get(f"--{first}")
    switch = option is None or option.kind == "switch"
    return Problem(
        code="engine_arg_conflict",
        message=f"engine args {first!r} and {key!r} set the same {'switch' if switch else 'option'}",
        key_path=(*path, key),
        hint=f"keep one: '{first}: true' or '{first}: false'" if switch else f"keep one: {first!r}",
    )


def render_engine_args(
    args: Mapping[str, EngineArgValue], *, path: KeyPath = ("engine_args",), version: str | None = None
) -> tuple[str, ...]:
    """Engine args as ``vllm serve`` argv elements, keys in code-point order.

    Raises :class:`InvalidInputError` carrying every problem :func:`check_engine_args` finds for ``version``.
    """
    problems = check_engine_args(args, path=path, version=version)
    if problems:
        raise InvalidInputError.from_problems(problems, operation="render vllm engine args")
    argv: list[str] = []
    for key in sorted(args):
        argv.extend(_render_one(key, args[key]))
    return tuple(argv)


def _render_one(key: str, value: EngineArgValue) -> tuple[str, ...]:
    if "." in key:
        text = _shown(value) if value is None or isinstance(value, bool) else _text(value)
        return (f"--{key}={text}",)
    if value is None or value is True:
        return (f"--{key}",)
    if value is False:
        return (f"--no-{key}",)
    text = _text(value)
    if text.startswith("-"):
        return (f"--{key}={text}",)
    return (f"--{key}", text)


def _text(value: str | int | float) -> str:
    return repr(value) if isinstance(value, float) else str(value)
