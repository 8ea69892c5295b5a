"""Arbitrary input files: every command that reads one exits 0 or 2 and never prints a secret or a traceback.

For each input format (cluster profile, run file, benchmark file, Data Designer config inline and in its own
file) Hypothesis mutates a valid document (values replaced by random nested data, keys added and removed,
with keys drawn from the real schemas and at random) or writes random text or bytes; secret-shaped values are
planted throughout. The Typer app runs in-process (``--dry-run``; ``profile validate`` without ``--probe``).

Exit 3 is allowed only for a file a document names that does not exist (a mutated ``data_designer.config``
or ``base.run``); any other exit code, an uncaught exception or a planted secret in the output fails.
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from typer.testing import CliRunner, Result

from data_designer.slurm.cli._app import app
from data_designer.slurm.contracts import BenchmarkSpec, Profile, RunSpec

TOKENS = (
    "nvapi-Zq8wX2cV5bN7mL1kJ4hG6fD9sA3pO0iU",
    "sk-proj-Tg5rE8wQ1aZ4xC7vB2nM6lK9jH3gF0dS",
    "hf_Yt6rE3wQ9aZ2xC5vB8nM1lK4jH7gF0dSpo",
    "ghp_Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eFhI",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQ4MjkxIn0.Kx9vT2mQ7pL4zR8w",
)
"""Known token shapes: the planner refuses them anywhere, so they may appear in no output at all."""

URL_PASSWORD = "Pw9xQ2zL7vK4mN8r"
HIGH_ENTROPY = "Qx7vR2mK9pL4zT8wN3bY6cF1hJ5dG0sAe"
"""Not refused (it could be a model id), but an error message never shows it."""

PLANTED = (*TOKENS, f"Bearer {TOKENS[0]}", f"https://bob:{URL_PASSWORD}@api.example.com/v1", HIGH_ENTROPY)
NEVER_PRINTED = (*TOKENS, URL_PASSWORD)

PROFILE = """\
schema_version: 1
default_cluster: lab
clusters:
  lab:
    workspace_root: /shared/ws
    partitions: {gpu: batch, cpu: cpu}
    gpus_per_node: 4
    compute_python: {interpreter: /opt/dd/bin/python}
"""

DD_CONFIG: dict[str, Any] = {
    "model_configs": [{"alias": "writer", "model": "m", "provider": "local"}],
    "columns": [{"name": "text", "column_type": "llm-text", "model_alias": "writer", "prompt": "Write."}],
}

RUN: dict[str, Any] = {
    "schema_version": 1,
    "name": "reviews",
    "data_designer": {"inline": DD_CONFIG},
    "records": 100,
    "sharding": {"shards": 4},
    "deployments": {
        "writer": {"engine": "vllm", "model": "/models/llama", "engine_args": {"max-num-seqs": 64}},
        "tool": {"engine": "command", "argv": ["serve", "--port", "{port}"], "model": "t", "health_path": "/health"},
    },
    "external": {"judge": {"endpoint": "https://api.example.com/v1", "api_key_env": "JUDGE_KEY", "model": "j"}},
    "submission": {"time_limit": "04:00:00", "sbatch_options": ["--constraint=a100"]},
}

BENCH: dict[str, Any] = {
    "schema_version": 1,
    "name": "sweep",
    "base": {"inline": {k: v for k, v in RUN.items() if k != "external"}},
    "axes": [{"axis": "engine_arg", "alias": "writer", "arg": "max-num-seqs", "values": [64, 256]}],
    "repeats": 1,
    "records": {"policy": "fixed", "records": 100},
}


def _schema_keys(*models: type[BaseModel]) -> list[str]:
    keys: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            keys.update(k for k in node.get("properties", {}) if isinstance(k, str))
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    for model in models:
        walk(model.model_json_schema())
    keys.update(["model_configs", "columns", "column_type", "model_alias", "seed_config", "source", "token"])
    keys.update(["api_key", "hfToken", "Authorization", "headers", "x-api-key", "clientSecret", "password"])
    return sorted(keys)


KEYS = st.one_of(st.sampled_from(_schema_keys(RunSpec, BenchmarkSpec, Profile)), st.text(max_size=8))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=24),
    st.sampled_from(PLANTED),
    st.sampled_from(["/abs/x", "vllm", "command", "auto", "04:00:00", "--x=1", "llm-text", "writer", "@evil/h"]),
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4), max_leaves=12
)


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> Any:
    """``base`` with one to four random edits: a value replaced, a key added or a key removed."""
    doc: Any = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        if not isinstance(doc, dict):
            break
        node: Any = doc
        while True:
            children = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
            containers = [(k, v) for k, v in children if isinstance(v, dict | list) and v]
            if not containers or draw(st.booleans()):
                break
            node = draw(st.sampled_from(containers))[1]
        edit = draw(st.sampled_from(["replace", "add", "remove"]))
        if isinstance(node, dict):
            if edit == "add" or not node:
                node[draw(KEYS)] = draw(VALUES)
            elif edit == "remove":
                del node[draw(st.sampled_from(sorted(node)))]
            else:
                node[draw(st.sampled_from(sorted(node)))] = draw(VALUES)
        elif node:
            node[draw(st.integers(min_value=0, max_value=len(node) - 1))] = draw(VALUES)
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        return draw(VALUES)
    return doc


@st.composite
def file_bytes(draw: st.DrawFn, base: dict[str, Any]) -> bytes:
    """A YAML or JSON rendering of a mutated ``base``, or random text, or random bytes."""
    kind = draw(st.sampled_from(["yaml", "json", "yaml", "json", "text", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "text":
        return draw(st.text(max_size=200)).encode("utf-8", "surrogatepass")
    doc = draw(mutated(base))
    if kind == "json":
        return json.dumps(doc).encode()
    return yaml.safe_dump(doc, allow_unicode=draw(st.booleans())).encode("utf-8", "surrogatepass")


def _check(result: Result) -> None:
    output = result.stdout + result.stderr
    event(f"exit {result.exit_code}")
    assert result.exit_code in (0, 2, 3), (result.exit_code, output, result.exception)
    if result.exit_code == 3:
        assert "does not exist" in output, output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in output, output
    for secret in NEVER_PRINTED:
        assert secret not in output, output
    if result.exit_code != 0:
        assert HIGH_ENTROPY not in output, output


def _run_cli(files: dict[str, bytes], args: Callable[[Path], list[str]]) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "home").mkdir()
        (root / "profile.yaml").write_text(PROFILE, encoding="utf-8")
        for name, content in files.items():
            (root / name).write_bytes(content)
        runner = CliRunner(
            env={"HOME": str(root / "home"), "XDG_CONFIG_HOME": None, "DATA_DESIGNER_SLURM_PROFILE": None}
        )
        return runner.invoke(app, args(root))


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
JSON_FLAG = st.sampled_from([[], ["--json"]])


@FUZZ
@given(content=file_bytes(yaml.safe_load(PROFILE)), flags=JSON_FLAG)
def test_profile_validate_survives_any_profile(content: bytes, flags: list[str]) -> None:
    _check(
        _run_cli({"p.yaml": content}, lambda root: ["profile", "validate", "--profile", str(root / "p.yaml"), *flags])
    )


@FUZZ
@given(content=file_bytes(RUN), flags=JSON_FLAG)
def test_execute_dry_run_survives_any_run_file(content: bytes, flags: list[str]) -> None:
    _check(
        _run_cli(
            {"run.yaml": content},
            lambda root: [
                "execute",
                str(root / "run.yaml"),
                "--profile",
                str(root / "profile.yaml"),
                "--dry-run",
                *flags,
            ],
        )
    )


@FUZZ
@given(content=file_bytes(BENCH), flags=JSON_FLAG)
def test_benchmark_dry_run_survives_any_benchmark_file(content: bytes, flags: list[str]) -> None:
    _check(
        _run_cli(
            {"bench.yaml": content},
            lambda root: [
                *("benchmark", "run", str(root / "bench.yaml")),
                *("--profile", str(root / "profile.yaml"), "--dry-run", *flags),
            ],
        )
    )


@FUZZ
@given(config=mutated(DD_CONFIG), content=file_bytes(DD_CONFIG), inline=st.booleans(), flags=JSON_FLAG)
def test_execute_dry_run_survives_any_data_designer_config(
    config: Any, content: bytes, inline: bool, flags: list[str]
) -> None:
    def args(root: Path) -> list[str]:
        run = {**RUN, "data_designer": {"inline": config} if inline else {"config": str(root / "dd.yaml")}}
        (root / "run.yaml").write_text(json.dumps(run), encoding="utf-8")
        return ["execute", str(root / "run.yaml"), "--profile", str(root / "profile.yaml"), "--dry-run", *flags]

    _check(_run_cli({"dd.yaml": content}, args))


def test_the_documents_mutated_are_valid() -> None:
    profile = _run_cli(
        {"p.yaml": PROFILE.encode()}, lambda root: ["profile", "validate", "--profile", str(root / "p.yaml")]
    )
    run = _run_cli(
        {"run.yaml": json.dumps(RUN).encode()},
        lambda root: ["execute", str(root / "run.yaml"), "--profile", str(root / "profile.yaml"), "--dry-run"],
    )
    bench = _run_cli(
        {"bench.yaml": json.dumps(BENCH).encode()},
        lambda root: [
            "benchmark",
            "run",
            str(root / "bench.yaml"),
            "--profile",
            str(root / "profile.yaml"),
            "--dry-run",
        ],
    )
    assert [profile.exit_code, run.exit_code, bench.exit_code] == [0, 0, 0], (profile.output, run.output, bench.output)
