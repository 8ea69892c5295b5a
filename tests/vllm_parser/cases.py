"""The argvs the ``vllm_parser`` nox session feeds through each supported vLLM's real ``vllm serve`` parser.

    uv run python tests/vllm_parser/cases.py --out .nox/vllm-parser/cases.json

Runs in the workspace venv (it needs the planner); ``tests/vllm_parser/check.py`` then reads the file inside each
vLLM's own venv, which has none of our packages. Two kinds of check, each an argv with the values vLLM must parse
out of it:

* **golden**: every vLLM argv of the planner's golden plans (``packages/data-designer-slurm-planner/tests/golden/
  *.plan.json``): each replica's ``argv`` and each of its ``rank_argv`` (one per node of a replica that spans
  nodes), bound as the allocation binds them (:data:`BINDINGS`). The expected values come from the plan's run
  (the deployment's model, alias, parallelism and engine args), not from the argv itself.
* **awkward**: :data:`AWKWARD`, engine args that are valid but easy to get wrong (negative numbers, values starting
  with ``-``, JSON with braces and quotes, unicode, floats, ``false`` negations, dotted keys, choices), rendered by
  the planner's public ``render_engine_args`` after the fixed part of a golden argv, braces escaped and bound
  exactly as a plan's argv is. Each case also states the argv the planner must render
  (``tests/test_vllm_parser_cases.py`` checks that in the normal test run, without vLLM).
* **control**: :data:`CONTROLS`, argvs vLLM must refuse (or misread) at a given stage, so a check that cannot fail
  is noticed.
* **sweep**: every option of the planner's flag data (``vllm_serve_flags.json``) with every value its kind allows
  the sweep to pick (a switch both ways, each choice, a number), alone, as the planner renders it; the few that
  ``vllm serve`` refuses on their own are listed in :data:`SWEEP_REFUSED` and must keep failing.

An expected value is keyed by its path from the parsed ``argparse.Namespace`` (``max_model_len``,
``compilation_config.mode``); enums compare by value, tuples as lists. The two pseudo-keys ``launch`` (which of
``vllm serve``'s launchers it dispatches to: ``api_server`` or ``headless``) and ``listen`` (the ``[host, port]`` the
API server would bind) are checked by ``check.py`` as well. This file is the one place the table lives.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "packages" / "data-designer-slurm-planner" / "tests" / "golden"
FIXED_FROM = "one_shard.plan.json"
"""The golden whose (one-node) vLLM argv gives the fixed part every awkward case is appended to."""

# RFC 5737 documentation addresses: nothing is ever sent to them (check.py replaces the server socket).
BINDINGS: Mapping[str, str] = {
    "host": "192.0.2.10",
    "port": "8000",
    "master_addr": "192.0.2.10",
    "master_port": "29500",
}
"""Sample values for the names a plan's server argvs leave for the allocation."""

Expected = Mapping[str, Any]


@dataclass(frozen=True)
class Awkward:
    """Engine args, the argv tail ``render_engine_args`` must give for them, and what vLLM must parse from it."""

    name: str
    engine_args: Mapping[str, str | int | float | bool | None]
    argv: tuple[str, ...]
    expect: Expected = field(default_factory=dict)


AWKWARD: tuple[Awkward, ...] = (
    Awkward("negative int attached", {"seed": -1}, ("--seed=-1",), {"seed": -1}),
    Awkward("negative int as text", {"max-logprobs": "-1"}, ("--max-logprobs=-1",), {"max_logprobs": -1}),
    Awkward("auto-fit model length", {"max-model-len": -1}, ("--max-model-len=-1",), {"max_model_len": -1}),
    Awkward("human-readable int", {"max-model-len": "32k"}, ("--max-model-len", "32k"), {"max_model_len": 32000}),
    Awkward(
        "binary suffix int",
        {"max-num-batched-tokens": "16K"},
        ("--max-num-batched-tokens", "16K"),
        {"max_num_batched_tokens": 16384},
    ),
    Awkward(
        "value starting with a dash",
        {"tokenizer-revision": "-rc1"},
        ("--tokenizer-revision=-rc1",),
        {"tokenizer_revision": "-rc1"},
    ),
    Awkward(
        "path starting with a dash",
        {"download-dir": "-scratch/hf"},
        ("--download-dir=-scratch/hf",),
        {"download_dir": "-scratch/hf"},
    ),
    Awkward(
        "float",
        {"gpu-memory-utilization": 0.85},
        ("--gpu-memory-utilization", "0.85"),
        {"gpu_memory_utilization": 0.85},
    ),
    Awkward(
        "float in exponent form",
        {"cpu-offload-gb": 2.5e-05},
        ("--cpu-offload-gb", "2.5e-05"),
        {"cpu_offload_gb": 2.5e-05},
    ),
    Awkward("integral float", {"cpu-offload-gb": 4.0}, ("--cpu-offload-gb", "4.0"), {"cpu_offload_gb": 4.0}),
    Awkward("true renders the bare switch", {"enforce-eager": True}, ("--enforce-eager",), {"enforce_eager": True}),
    Awkward(
        "null renders the bare switch",
        {"trust-remote-code": None},
        ("--trust-remote-code",),
        {"trust_remote_code": True},
    ),
    Awkward(
        "false renders the negation",
        {"enable-prefix-caching": False},
        ("--no-enable-prefix-caching",),
        {"enable_prefix_caching": False},
    ),
    Awkward("false of a plain switch", {"enforce-eager": False}, ("--no-enforce-eager",), {"enforce_eager": False}),
    Awkward(
        "false of chunked prefill",
        {"enable-chunked-prefill": False},
        ("--no-enable-chunked-prefill",),
        {"enable_chunked_prefill": False},
    ),
    Awkward(
        "JSON with nested braces",
        {"hf-overrides": '{"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}'},
        ("--hf-overrides", '{"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}'),
        {"hf_overrides": {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}},
    ),
    Awkward(
        "JSON with quotes and braces inside strings",
        {"override-generation-config": '{"temperature": 0.5, "stop": ["}\\"{", "{{x}}"]}'},
        ("--override-generation-config", '{"temperature": 0.5, "stop": ["}\\"{", "{{x}}"]}'),
        {"override_generation_config": {"temperature": 0.5, "stop": ['}"{', "{{x}}"]}},
    ),
    Awkward(
        "JSON with unicode",
        {"override-generation-config": '{"stop": ["∎", "終"], "top_k": -1}'},
        ("--override-generation-config", '{"stop": ["∎", "終"], "top_k": -1}'),
        {"override_generation_config": {"stop": ["∎", "終"], "top_k": -1}},
    ),
    Awkward("unicode text", {"response-role": "助手 ✓"}, ("--response-role", "助手 ✓"), {"response_role": "助手 ✓"}),
    Awkward(
        "JSON config flag",
        {"compilation-config": '{"mode": 3, "cudagraph_capture_sizes": [1, 2, 4]}'},
        ("--compilation-config", '{"mode": 3, "cudagraph_capture_sizes": [1, 2, 4]}'),
        {"compilation_config.mode": 3, "compilation_config.cudagraph_capture_sizes": [1, 2, 4]},
    ),
    Awkward(
        "dotted int", {"compilation-config.mode": 3}, ("--compilation-config.mode=3",), {"compilation_config.mode": 3}
    ),
    Awkward(
        "dotted JSON list",
        {"compilation-config.cudagraph_capture_sizes": "[1, 2, 4]"},
        ("--compilation-config.cudagraph_capture_sizes=[1, 2, 4]",),
        {"compilation_config.cudagraph_capture_sizes": [1, 2, 4]},
    ),
    Awkward(
        "dotted keys together",
        {"compilation-config.mode": 0, "compilation-config.max_cudagraph_capture_size": 16},
        ("--compilation-config.max_cudagraph_capture_size=16", "--compilation-config.mode=0"),
        {"compilation_config.mode": 0, "compilation_config.max_cudagraph_capture_size": 16},
    ),
    Awkward("choice", {"kv-cache-dtype": "fp8"}, ("--kv-cache-dtype", "fp8"), {"kv_cache_dtype": "fp8"}),
    Awkward("dtype choice", {"dtype": "bfloat16"}, ("--dtype", "bfloat16"), {"dtype": "bfloat16"}),
    Awkward(
        "frontend choice",
        {"uvicorn-log-level": "warning"},
        ("--uvicorn-log-level", "warning"),
        {"uvicorn_log_level": "warning"},
    ),
    Awkward(
        "tool calling needs its parser",
        {"enable-auto-tool-choice": True, "tool-call-parser": "hermes"},
        ("--enable-auto-tool-choice", "--tool-call-parser", "hermes"),
        {"enable_auto_tool_choice": True, "tool_call_parser": "hermes"},
    ),
    Awkward(
        "output logging needs request logging",
        {"enable-log-outputs": True, "enable-log-requests": True},
        ("--enable-log-outputs", "--enable-log-requests"),
        {"enable_log_outputs": True, "enable_log_requests": True},
    ),
    Awkward(
        "chat template with braces, quotes and newlines",
        {"chat-template": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"},
        ("--chat-template", "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"),
        {"chat_template": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"},
    ),
    Awkward(
        "several at once, keys in code-point order",
        {"max-num-seqs": 8, "enable-prefix-caching": True, "block-size": 32, "seed": -7},
        ("--block-size", "32", "--enable-prefix-caching", "--max-num-seqs", "8", "--seed=-7"),
        {"block_size": 32, "enable_prefix_caching": True, "max_num_seqs": 8, "seed": -7},
    ),
)
"""Awkward-but-valid engine args: each must render to ``argv`` and parse to ``expect`` in every supported vLLM."""


@dataclass(frozen=True)
class Control:
    """An argv tail that vLLM must refuse at ``stage`` (or, for ``wrong``, parse to something else than ``expect``).

    Controls prove the check can fail at each of its stages; they do not go through the planner.
    """

    name: str
    argv: tuple[str, ...]
    stage: str
    expect: Expected = field(default_factory=dict)


CONTROLS: tuple[Control, ...] = (
    Control("a value the option cannot convert", ("--max-model-len", "eight"), "parse"),
    Control("an option vLLM does not have", ("--no-such-option",), "parse"),
    Control("a combination validate_parsed_serve_args refuses", ("--enable-auto-tool-choice",), "validate"),
    Control("a combination vllm serve refuses", ("--headless", "--api-server-count", "2"), "serve"),
    Control("a value parsed otherwise than expected", ("--max-model-len", "8192"), "wrong", {"max_model_len": 8193}),
)
"""Argvs the check must report as failing, each at its stage: if one passes, the check itself is broken."""


SWEEP_REFUSED: Mapping[tuple[str, str | int | float | bool | None], str] = {}
"""Sweep argvs the planner renders and ``vllm serve`` refuses on their own (a second flag or a variable is needed):
they must fail at ``validate``; if one starts to pass, vLLM dropped the requirement."""
SWEEP_REWRITTEN = frozenset({"api-server-count"})
"""Options ``vllm serve`` rewrites before its launcher (it sets ``api_server_count`` to None for one API server)."""


def _sweep_values(option: Mapping[str, Any]) -> list[str | int | float | bool | None]:
    """The values the sweep gives one option of the flag data: both switch states, every choice, a number."""
    if option.get("kind") == "switch":
        return [True, False]
    if option.get("choices"):
        return list(option["choices"])  # as the data has them: text, numbers, null
    numbers: dict[str, list[str | int | float | bool | None]] = {"int": [1], "float": [0.5]}
    return numbers.get(str(option.get("type")), [])


def sweep_checks(versions: Sequence[str]) -> list[dict[str, Any]]:
    """One check per option of the planner's flag data and value from :func:`_sweep_values` that the planner accepts
    for that version: every switch both ways, every choice, every plain number, each alone after the fixed part."""
    from importlib import resources

    from data_designer.slurm.planner import bind_argv, check_engine_args, escape_braces, render_engine_args

    data = json.loads(
        resources.files("data_designer.slurm.planner").joinpath("data", "vllm_serve_flags.json").read_text("utf-8")
    )
    prefix, fixed = fixed_prefix()
    checks: list[dict[str, Any]] = []
    for version in versions:
        for option in data["versions"][version]:
            if not isinstance(option, Mapping):
                continue  # a flag list without kinds: nothing to sweep
            longs = [flag for flag in option.get("options", ()) if flag.startswith("--")]
            if not longs:
                continue
            name = longs[0][2:]
            for value in _sweep_values(option):
                engine_args = {name: value}
                if check_engine_args(engine_args, version=version):
                    continue  # the planner refuses it (a controlled flag, a switch without its negation)
                rendered = render_engine_args(engine_args, version=version)
                parsed = [value] if option.get("kind") == "multi_value" else value
                expect = {} if name in SWEEP_REWRITTEN else {name.replace("-", "_"): parsed}
                check = {
                    "id": f"sweep {name}: {json.dumps(value)}",
                    "kind": "sweep",
                    "version": version,
                    "argv": list(bind_argv((*prefix, *(escape_braces(word) for word in rendered)), BINDINGS)),
                    "expect": {**fixed, **expect},
                }
                if (name, value) in SWEEP_REFUSED:
                    check["must_fail"] = "validate"
                checks.append(check)
    return checks


def _engine_expectations(engine_args: Mapping[str, Any]) -> dict[str, Any]:
    """What vLLM must parse from a golden deployment's (plain) engine args: switches and numbers only."""
    expected: dict[str, Any] = {}
    for key, value in engine_args.items():
        if "." in key or isinstance(value, str):
            continue  # strings and dotted keys may be converted (JSON, suffixes): AWKWARD states those exactly
        expected[key.replace("-", "_")] = True if value is None else value
    return expected


def _version_matches(stated: str | None, version: str) -> bool:
    return stated is None or version == stated or version.startswith(f"{stated}.")


def _deployment_expectations(deployment: Mapping[str, Any], alias: str) -> dict[str, Any]:
    return {
        "model_tag": deployment["model"],
        "model": deployment["model"],
        "served_model_name": [alias],
        "tensor_parallel_size": deployment["tensor_parallel"],
        "pipeline_parallel_size": deployment["pipeline_parallel"],
        "host": BINDINGS["host"],
        "port": int(BINDINGS["port"]),
    }


def _rank_expectations(nodes: int, rank: int) -> dict[str, Any]:
    return {
        "distributed_executor_backend": "mp",
        "nnodes": nodes,
        "node_rank": rank,
        "master_addr": BINDINGS["master_addr"],
        "master_port": int(BINDINGS["master_port"]),
        "headless": rank > 0,
        "launch": "headless" if rank > 0 else "api_server",
    }


def golden_checks(versions: Sequence[str]) -> list[dict[str, Any]]:
    """One check per vLLM argv (and rank argv) of every golden plan, for each version it may run on."""
    from data_designer.slurm.planner import bind_argv

    checks: list[dict[str, Any]] = []
    for path in sorted(GOLDEN.glob("*.plan.json")):
        plan = json.loads(path.read_text(encoding="utf-8"))
        deployments = plan["run"]["deployments"]
        for replica in plan["allocation"]["replicas"]:
            if replica["engine"] != "vllm":
                continue
            deployment = deployments[replica["alias"]]
            base = _deployment_expectations(deployment, replica["alias"]) | _engine_expectations(
                deployment.get("engine_args", {})
            )
            ranks = replica.get("rank_argv") or []
            templates: list[tuple[str, Sequence[str], dict[str, Any]]] = []
            if ranks:
                templates.extend(
                    (f"rank {rank}", argv, _rank_expectations(len(ranks), rank)) for rank, argv in enumerate(ranks)
                )
            else:
                templates.append(("argv", replica["argv"], {"headless": False, "launch": "api_server"}))
            if ranks and list(replica["argv"]) != list(ranks[0]):
                templates.append(("argv", replica["argv"], _rank_expectations(len(ranks), 0)))
            for label, template, extra in templates:
                expect = base | extra
                if expect["launch"] == "api_server":
                    expect["listen"] = [BINDINGS["host"], int(BINDINGS["port"])]
                for version in versions:
                    if not _version_matches(deployment.get("vllm_version"), version):
                        continue
                    checks.append(
                        {
                            "id": f"golden {path.name} {replica['alias']} replica {replica['replica']} {label}",
                            "kind": "golden",
                            "version": version,
                            "argv": list(bind_argv(template, BINDINGS)),
                            "expect": expect,
                        }
                    )
    return checks


def fixed_prefix() -> tuple[tuple[str, ...], dict[str, Any]]:
    """The fixed part of :data:`FIXED_FROM`'s vLLM argv template (``vllm serve MODEL --host .. --served-model-name
    ..``, braces still escaped) and what vLLM must parse from it."""
    plan = json.loads((GOLDEN / FIXED_FROM).read_text(encoding="utf-8"))
    replica = next(r for r in plan["allocation"]["replicas"] if r["engine"] == "vllm" and not r.get("rank_argv"))
    argv = tuple(replica["argv"])
    end = argv.index("--served-model-name") + 2
    if argv[:2] != ("vllm", "serve") or argv[3:end:2] != (
        "--host",
        "--port",
        "--tensor-parallel-size",
        "--pipeline-parallel-size",
        "--served-model-name",
    ):
        raise ValueError(f"{FIXED_FROM}: the vLLM argv does not start with the fixed flags: {argv!r}")
    deployment = plan["run"]["deployments"][replica["alias"]]
    expect = _deployment_expectations(deployment, replica["alias"]) | {"headless": False, "launch": "api_server"}
    expect["listen"] = [BINDINGS["host"], int(BINDINGS["port"])]
    return argv[:end], expect


def awkward_checks(versions: Sequence[str]) -> list[dict[str, Any]]:
    """One check per :data:`AWKWARD` case and version: the planner's rendering after the fixed part, bound."""
    from data_designer.slurm.planner import bind_argv, escape_braces, render_engine_args

    prefix, fixed = fixed_prefix()
    checks: list[dict[str, Any]] = []
    for case in AWKWARD:
        rendered = render_engine_args(case.engine_args)
        template = (*prefix, *(escape_braces(word) for word in rendered))
        for version in versions:
            checks.append(
                {
                    "id": f"awkward {case.name}",
                    "kind": "awkward",
                    "version": version,
                    "argv": list(bind_argv(template, BINDINGS)),
                    "expect": {**fixed, **case.expect},
                }
            )
    return checks


def control_checks(versions: Sequence[str]) -> list[dict[str, Any]]:
    """One check per :data:`CONTROLS` entry and version, after the same fixed part as the awkward cases."""
    from data_designer.slurm.planner import bind_argv

    prefix, fixed = fixed_prefix()
    return [
        {
            "id": f"control {control.name}",
            "kind": "control",
            "version": version,
            "argv": list(bind_argv((*prefix, *control.argv), BINDINGS)),
            "expect": {**fixed, **control.expect},
            "must_fail": control.stage,
        }
        for control in CONTROLS
        for version in versions
    ]


def build(versions: Sequence[str] | None = None) -> dict[str, Any]:
    """Every check for every supported vLLM version (``serve_flag_versions()``, or ``versions``)."""
    from data_designer.slurm.planner import SUPPORTED_VLLM, serve_flag_versions

    chosen = list(versions) if versions else list(serve_flag_versions())
    return {
        "supported": SUPPORTED_VLLM,
        "versions": chosen,
        "bindings": dict(BINDINGS),
        "checks": [
            *golden_checks(chosen),
            *awkward_checks(chosen),
            *control_checks(chosen),
            *sweep_checks(chosen),
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True, help="where to write the checks (JSON)")
    parser.add_argument("--version", action="append", help="only this vLLM version (repeatable)")
    args = parser.parse_args(argv)
    data = build(args.version)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    counts = {v: sum(1 for c in data["checks"] if c["version"] == v) for v in data["versions"]}
    print(f"{args.out}: {len(data['checks'])} checks ({', '.join(f'vllm {v}: {n}' for v, n in counts.items())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
