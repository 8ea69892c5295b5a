"""vLLM as the planner sees it: the supported releases, the ``vllm serve`` flags each accepts, the flags the runtime
owns, and engine args rendered into argv.

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

The flag lists come from the released wheels of each supported vLLM (``data/vllm_serve_flags.json``, written by
``scripts/extract-vllm-flags``, which records the wheel, its sha256 and the files read); vLLM is never imported.
Reading that package resource is the only I/O here, and it is the same for every call.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
from collections.abc import Mapping
from importlib import resources

from packaging.version import Version

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
    # What is served: the positional model and the alias. vLLM rejects --served-model-name before the positional.
    "--model": "use the deployment's 'model' key",
    "--served-model-name": "the deployment's alias is the served name; rename the deployment instead",
    # A config file would set options past every check here (host, port, parallelism included).
    "--config": "write the options under 'engine_args' instead of in a vLLM config file",
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


@functools.cache
def _flags_by_version() -> Mapping[str, frozenset[str]]:
    text = resources.files("data_designer.slurm.planner").joinpath("data", _DATA_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    versions = data.get("versions") if isinstance(data, dict) else None
    if not isinstance(versions, dict) or not versions:
        raise InternalError(f"{_DATA_FILE} has no 'versions' mapping", code="vllm_flags_data")
    result: dict[str, frozenset[str]] = {}
    for version, flags in versions.items():
        if not (isinstance(flags, list) and all(isinstance(f, str) and f.startswith("-") for f in flags)):
            raise InternalError(
                f"{_DATA_FILE}: flags of vllm {version!r} are not a list of options", code="vllm_flags_data"
            )
        result[version] = frozenset(flags)
    return result


def serve_flag_versions() -> tuple[str, ...]:
    """The vLLM versions whose ``vllm serve`` flags are known, oldest first."""
    return tuple(sorted(_flags_by_version(), key=Version))


def known_serve_flags(version: str | None = None) -> frozenset[str]:
    """Option strings ``vllm serve`` accepts (``--max-num-seqs``, ``--no-enforce-eager``, ``-tp``...).

    ``version`` is one of :func:`serve_flag_versions`; ``None`` means accepted by any supported version.
    """
    flags = _flags_by_version()
    if version is None:
        return frozenset().union(*flags.values())
    if version not in flags:
        raise InvalidInputError(
            f"no vllm serve flags are known for vllm {version!r}",
            code="unknown_vllm_version",
            hint=f"use one of {', '.join(serve_flag_versions())}",
        )
    return flags[version]


def is_supported_vllm_version(version: str) -> bool:
    """Whether a vLLM version string (``0.33.0``, ``0.33.0+cu129``) lies in :data:`SUPPORTED_VLLM`.

    Pre-releases and dev builds are not supported: their flags were never checked.
    """
    return _RELEASE.fullmatch(version) is not None and satisfies(version, SUPPORTED_VLLM)


def check_engine_args(
    args: Mapping[str, EngineArgValue], *, path: KeyPath = ("engine_args",), version: str | None = None
) -> list[Problem]:
    """Every problem of a deployment's engine args, in key order (see the module docstring for the format).

    Reported: a flag the runtime controls (the hint says which run-file key to use), a flag no supported vLLM
    accepts (or not ``version``, when given; the hint suggests a close one), a ``false`` for a flag without a
    negation, a non-finite number, and a flag given twice (``x`` with ``no-x``, ``enable-x`` with ``disable-x``).
    ``path`` is the key path of the mapping, for the problems' ``key_path``.
    """
    known = known_serve_flags(version)
    label = f"vllm {version}" if version else f"vllm {SUPPORTED_VLLM}"
    problems: list[Problem] = []
    for key in sorted(args):
        problem = _check_one(key, args[key], known, label, (*path, key))
        if problem is not None:
            problems.append(problem)
    problems.extend(_conflicts(args, path))
    return problems


def _check_one(key: str, value: EngineArgValue, known: frozenset[str], label: str, at: KeyPath) -> Problem | None:
    name = key.split(".", 1)[0]
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
    if name != bare or f"--{name}" not in known:
        return Problem(
            code="engine_arg_unknown",
            message=f"'vllm serve' ({label}) has no option --{name}",
            key_path=at,
            hint=_suggestion(name, bare, known),
        )
    if value is False and "." not in key and f"--no-{name}" not in known:
        return Problem(
            code="engine_arg_no_negation",
            message=f"--{name} is a switch without a --no-{name} form",
            key_path=at,
            hint="remove the key to leave the switch off",
        )
    if isinstance(value, float) and not math.isfinite(value):
        return Problem(
            code="engine_arg_not_finite",
            message=f"engine arg {key!r} is {value!r}",
            key_path=at,
            hint="write a finite number",
        )
    return None


def _suggestion(name: str, bare: str, known: frozenset[str]) -> str:
    if f"--{bare}" in known:
        return f"write it as {bare!r} (the long option without leading dashes, words joined by '-')"
    longs = sorted(flag[2:] for flag in known if flag.startswith("--"))
    close = difflib.get_close_matches(bare, longs, n=1, cutoff=0.75)
    if close:
        return f"did you mean {close[0]!r}?"
    return "write a 'vllm serve' long option without its leading dashes, e.g. 'max-num-seqs'"


def _conflicts(args: Mapping[str, EngineArgValue], path: KeyPath) -> list[Problem]:
    problems = []
    for key in sorted(args):
        for prefix, other in (("no-", ""), ("disable-", "enable-")):
            if key.startswith(prefix) and other + key[len(prefix) :] in args:
                twin = other + key[len(prefix) :]
                problems.append(
                    Problem(
                        code="engine_arg_conflict",
                        message=f"engine args {twin!r} and {key!r} set the same switch",
                        key_path=(*path, key),
                        hint=f"keep one: '{twin}: true' or '{twin}: false'",
                    )
                )
    return problems


def render_engine_args(args: Mapping[str, EngineArgValue], *, path: KeyPath = ("engine_args",)) -> tuple[str, ...]:
    """Engine args as ``vllm serve`` argv elements, keys in code-point order.

    Raises :class:`InvalidInputError` carrying every problem :func:`check_engine_args` finds.
    """
    problems = check_engine_args(args, path=path)
    if problems:
        raise InvalidInputError.from_problems(problems, operation="render vllm engine args")
    argv: list[str] = []
    for key in sorted(args):
        argv.extend(_render_one(key, args[key]))
    return tuple(argv)


def _render_one(key: str, value: EngineArgValue) -> tuple[str, ...]:
    if "." in key:
        json_words = {None: "null", True: "true", False: "false"}
        text = json_words[value] if value is None or isinstance(value, bool) else _text(value)
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
