"""The replica launcher (``runtime/_launch.py``): standalone (standard library only, runnable by path in an image's
Python), yet byte for byte the project's binding, canonical record and write-once protocol."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from data_designer.slurm.contracts.records import PORT_SCHEMA, PortRecord
from data_designer.slurm.planner import SERVER_API_KEY_ENV, VLLM_API_KEY_ENV, bind_argv
from data_designer.slurm.runtime import _launch
from data_designer.slurm.runtime.store import RecordOk, encode_record, read_record

LAUNCHER = Path(_launch.__file__)
SERVER_SCRIPT = (  # no braces: the launcher binds every word of the template
    "import json, os, sys; "
    "print(json.dumps(dict(argv=sys.argv[1:], pid=os.getpid(), key=os.environ.get('VLLM_API_KEY'))))"
)


def test_the_shared_constants_are_the_project_s() -> None:
    assert _launch.SERVER_API_KEY_ENV == SERVER_API_KEY_ENV
    assert _launch.VLLM_API_KEY_ENV == VLLM_API_KEY_ENV
    assert (PORT_SCHEMA.name, PORT_SCHEMA.version) == (_launch.PORT_SCHEMA_NAME, _launch.PORT_SCHEMA_VERSION)


# Templates from the characters that matter to str.format: braces, conversions, specs, field names.
TOKENS = [*"{}!:.[]0a_ xé", "host", "port", "api_key", "{host}", "{{", "}}"]
TEMPLATE_TEXT = st.lists(st.sampled_from(TOKENS), max_size=12).map("".join)
VALUES = st.fixed_dictionaries({"host": st.text(max_size=8), "port": st.text(max_size=8), "api_key": st.text()})


def outcome(function: Any, argv: list[str], values: dict[str, str]) -> tuple[str, Any]:
    try:
        return "ok", function(argv, values)
    except Exception as exc:
        return type(exc).__name__, str(exc)


@given(st.lists(TEMPLATE_TEXT, max_size=4), VALUES)
def test_binding_is_the_planner_s_for_any_template(argv: list[str], values: dict[str, str]) -> None:
    assert outcome(_launch.bind_argv, argv, values) == outcome(bind_argv, argv, values)


def test_binding_gives_authored_braces_back() -> None:
    template = ['--json={{"a": 1}}', "{host}:{port}", "{api_key}"]
    assert _launch.bind_argv(template, {"host": "h", "port": "1", "api_key": "k"}) == ('--json={"a": 1}', "h:1", "k")
    assert _launch.bind_argv(template, {"host": "h", "port": "1", "api_key": "k"}) == bind_argv(
        template, {"host": "h", "port": "1", "api_key": "k"}
    )


OPTIONAL = st.none() | st.text(max_size=20)
UTC_TIMES = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC))
ANY_ZONE = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2200, 1, 1),
    timezones=st.builds(lambda minutes: timezone(timedelta(minutes=minutes)), st.integers(-900, 900)),
)


@given(
    alias=st.text(max_size=20),
    replica=st.integers(0, 10**6),
    task=st.integers(0, 10**4),
    port=st.integers(1, 65535),
    hostname=st.text(max_size=20),
    node=OPTIONAL,
    step_gpus=OPTIONAL,
    cuda=OPTIONAL,
    pid=st.integers(1, 2**31),
    master_port=st.none() | st.integers(1, 65535),
    probed_at=UTC_TIMES,
    written_at=ANY_ZONE,
)
def test_the_record_bytes_are_the_runtime_s(
    alias: str,
    replica: int,
    task: int,
    port: int,
    hostname: str,
    node: str | None,
    step_gpus: str | None,
    cuda: str | None,
    pid: int,
    master_port: int | None,
    probed_at: datetime,
    written_at: datetime,
) -> None:
    fields: dict[str, Any] = {
        "alias": alias,
        "replica": replica,
        "task": task,
        "bind_host": "0.0.0.0",
        "port": port,
        "hostname": hostname,
        "node": node,
        "step_gpus": step_gpus,
        "cuda_visible_devices": cuda,
        "pid": pid,
        "master_port": master_port,
    }
    expected, _ = encode_record(PORT_SCHEMA, PortRecord(**fields, probed_at=probed_at), written_at=written_at)
    payload = {**fields, "probed_at": _launch.format_datetime(probed_at)}
    assert _launch.record_bytes(PORT_SCHEMA.name, PORT_SCHEMA.version, payload, written_at) == expected


def test_a_launch_publishes_a_record_the_runtime_reads_and_binds_the_server_argv(tmp_path: Path) -> None:
    environ = {
        "SLURM_PROCID": "1",
        "SLURMD_NODENAME": "node7",
        "SLURM_STEP_GPUS": "2,3",
        "CUDA_VISIBLE_DEVICES": "0,1",
        SERVER_API_KEY_ENV: "k3y",
    }
    argv = ["--port-dir", str(tmp_path / "ports"), "--alias", "writer", "--replica", "2", "--bind-host", "127.0.0.1"]
    server = _launch.launch([*argv, "--", "serve", "--port={port}", "--host", "{host}", "--key={api_key}"], environ)

    found = read_record(tmp_path / "ports" / "writer-2.1.json", PORT_SCHEMA)
    assert isinstance(found, RecordOk), found
    record = found.payload
    assert (record.alias, record.replica, record.task, record.bind_host) == ("writer", 2, 1, "127.0.0.1")
    assert (record.node, record.step_gpus, record.cuda_visible_devices) == ("node7", "2,3", "0,1")
    assert record.pid == os.getpid()
    assert server == ("serve", f"--port={record.port}", "--host", "127.0.0.1", "--key=k3y")
    assert [p.name for p in (tmp_path / "ports").iterdir()] == ["writer-2.1.json"], "no temporary file is left"

    with pytest.raises(FileExistsError, match="already exists"):
        _launch.launch([*argv, "--", "serve"], environ)
    assert read_record(tmp_path / "ports" / "writer-2.1.json", PORT_SCHEMA) == found, "never replaced"


def test_without_a_server_argv_the_launch_fails(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no server argv"):
        _launch.launch(["--port-dir", str(tmp_path), "--alias", "a", "--replica", "0", "--bind-host", "::1"], {})


def test_the_server_gets_vllm_s_key_variable_only_when_there_is_a_key() -> None:
    assert _launch.server_environment({"A": "1"}) == {"A": "1"}
    assert _launch.server_environment({SERVER_API_KEY_ENV: ""}) == {SERVER_API_KEY_ENV: ""}
    assert _launch.server_environment({SERVER_API_KEY_ENV: "k"}) == {SERVER_API_KEY_ENV: "k", "VLLM_API_KEY": "k"}


def run_launcher(command: list[str], port_dir: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    argv = [*command, "--port-dir", str(port_dir), "--alias", "a", "--replica", "0", "--bind-host", "127.0.0.1"]
    argv += ["--", sys.executable, "-c", SERVER_SCRIPT, "{host}:{port}", "{api_key}", "{{literal}}"]
    environ = {k: v for k, v in os.environ.items() if k not in (SERVER_API_KEY_ENV, "VLLM_API_KEY", "SLURM_PROCID")}
    done = subprocess.run(argv, env={**environ, **env}, capture_output=True, text=True, timeout=60, check=False)
    return done, port_dir / "a-0.0.json"


@pytest.mark.parametrize(
    "command",
    [
        pytest.param([sys.executable, "-I", str(LAUNCHER)], id="a-plain-file-isolated"),
        pytest.param([sys.executable, "-m", "data_designer.slurm.runtime._launch"], id="the-module"),
    ],
)
def test_the_launcher_runs_as_a_file_and_as_a_module_and_execs_the_server(tmp_path: Path, command: list[str]) -> None:
    done, path = run_launcher(command, tmp_path / "ports", **{SERVER_API_KEY_ENV: "s3cret"})
    assert done.returncode == 0, done.stderr
    found = read_record(path, PORT_SCHEMA)
    assert isinstance(found, RecordOk), found
    server = json.loads(done.stdout)
    assert server == {
        "argv": [f"127.0.0.1:{found.payload.port}", "s3cret", "{literal}"],
        "pid": found.payload.pid,  # exec'd: the server keeps the launcher's pid, so srun's signals reach it
        "key": "s3cret",
    }


def test_a_failing_launch_exits_97_and_says_why(tmp_path: Path) -> None:
    first, _ = run_launcher([sys.executable, "-I", str(LAUNCHER)], tmp_path / "ports")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["key"] is None
    again, _ = run_launcher([sys.executable, "-I", str(LAUNCHER)], tmp_path / "ports")
    assert again.returncode == _launch.EXIT_LAUNCH_FAILED
    assert "launch: FileExistsError:" in again.stderr


def test_importing_the_launcher_loads_only_the_standard_library() -> None:
    probe = (
        "import importlib.util, json, sys\n"
        "before = set(sys.modules)\n"
        f"spec = importlib.util.spec_from_file_location('launcher', {str(LAUNCHER)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    loaded = json.loads(done.stdout)
    assert not [name for name in loaded if name.split(".")[0] in ("pydantic", "data_designer")], loaded
    assert {name.split(".")[0] for name in loaded} <= set(sys.stdlib_module_names), loaded


def test_the_launcher_s_syntax_is_python_3_8() -> None:
    source = LAUNCHER.read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 8))
    # Annotations are never evaluated (postponed), so builtin generics in them are fine on 3.8.
    assert "from __future__ import annotations" in source
    newer = {"UTC", "removeprefix", "removesuffix"}  # 3.9+ and 3.11+ names a 3.11 habit would reach for
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not (imported | attributes) & newer


def test_port_record_names_match_what_the_supervisor_reads() -> None:
    assert _launch.port_record_name("writer", 1, 0) == "writer-1.0.json"
