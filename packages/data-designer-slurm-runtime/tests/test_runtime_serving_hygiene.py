"""Serving hygiene in the allocation: the per-attempt key is never persisted, servers bind loopback unless they
must be reached from another node, and the profile's Hugging Face settings reach every server step.

The end-to-end test runs ``python -m data_designer.slurm.runtime.supervisor`` in a run directory, as Slurm's
batch step would, with a fake ``srun`` (runs the step here and writes what it saw to an evidence directory
*outside* the run directory), a fake ``scontrol`` with two nodes at 127.0.0.1, the in-tree test server as a
``command`` deployment (one replica on node 0, one on node 1: that one listens on all interfaces and needs the
key), and a stand-in client worker that reports what it was given, also outside the run directory.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts import ClusterProfile, ExecutionPlan
from data_designer.slurm.contracts.records import (
    ATTEMPT_SCHEMA,
    ENDPOINTS_SCHEMA,
    PORT_SCHEMA,
    STATUS_SCHEMA,
    AttemptRecord,
    EndpointsRecord,
    StatusRecord,
)
from data_designer.slurm.planner import SERVER_API_KEY_ENV, compile, load_run, resolve_config
from data_designer.slurm.runtime._launch import launch
from data_designer.slurm.runtime.store import RecordOk, RunLayout, read_record
from data_designer.slurm.runtime.supervisor._replicas import srun_argv, step_environment
from data_designer.slurm.runtime.testing import processes_mentioning, with_client_argv, writer_run

RUN_ID = "hy-20261129T120000Z-abcdef"
HF_HOME = "/shared/hf-cache"

FAKE_SRUN = """\
#!{python}
# A fake srun: write the step's argv and environment evidence outside the run directory, then exec the command.
import json, os, sys
args = sys.argv[1:]
relative = next(int(a.split("=", 1)[1]) for a in args if a.startswith("--relative="))
seen = {{name: os.environ.get(name) for name in ("DDSLURM_SERVER_API_KEY", "HF_HOME", "HF_HUB_OFFLINE")}}
with open(os.path.join(os.environ["EVIDENCE_DIR"], "srun.jsonl"), "a") as log:
    log.write(json.dumps({{"argv": args, "env": seen}}) + "\\n")
index = next(i for i, word in enumerate(args) if not word.startswith("-"))
os.environ.update(SLURM_PROCID="0", SLURMD_NODENAME=f"node{{relative + 1}}")
os.execvp(args[index], args[index:])
"""

FAKE_SCONTROL = """\
#!/bin/sh
# A fake scontrol: two nodes, node1 and node2, both at 127.0.0.1.
case "$*" in
  "show hostnames"*) printf 'node1\\nnode2\\n' ;;
  "-o show node"*) printf 'NodeName=node1 NodeAddr=127.0.0.1\\nNodeName=node2 NodeAddr=127.0.0.1\\n' ;;
  *) echo "fake scontrol: $*" >&2; exit 1 ;;
esac
"""

STAND_IN_WORKER = """\
# A stand-in client worker: calls every endpoint with and without the key, looks at who listens where and whose
# command line holds the key, and writes all of it outside the run directory.
import json, os, sys, urllib.error, urllib.request
evidence = os.environ["EVIDENCE_DIR"]
with open(os.environ["DDSLURM_ENDPOINTS"]) as stream:
    entry = json.load(stream)["payload"]["aliases"]["writer"]
key = os.environ.get(entry["api_key_env"] or "", "")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

def call(base_url, key):
    body = json.dumps({"model": entry["model"], "messages": [{"role": "user", "content": "hi"}]}).encode()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(base_url + "/chat/completions", data=body, headers=headers)
    try:
        with opener.open(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code

listeners = {}
for name in ("/proc/net/tcp", "/proc/net/tcp6"):
    with open(name) as table:
        for line in table.read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A":  # LISTEN
                address, port = local.split(":")
                listeners.setdefault(int(port, 16), []).append(address)
on_cmdline, vllm_key = [], {}
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as stream:
            words = stream.read().split(b"\\0")
        if key and any(key.encode() in word for word in words):
            on_cmdline.append(int(pid))
        if b"--replica-id" in words:  # a test server: which key would vLLM read in its place?
            with open(f"/proc/{pid}/environ", "rb") as stream:
                env = dict(item.split(b"=", 1) for item in stream.read().split(b"\\0") if b"=" in item)
            replica_id = words[words.index(b"--replica-id") + 1].decode()
            vllm_key[replica_id] = env.get(b"VLLM_API_KEY", b"").decode() == key
    except (OSError, IndexError):
        pass

def port_of(url):
    return int(url.rsplit(":", 1)[1].split("/")[0])

calls = [
    {"base_url": url, "with_key": call(url, key), "without_key": call(url, None),
     "listening_on": listeners.get(port_of(url), []), "vllm_key": vllm_key.get(f"writer-{port_of(url)}")}
    for url in entry["base_urls"]
]
report = {"key": key, "key_env": entry["api_key_env"], "calls": calls, "key_on_a_cmdline": on_cmdline}
with open(os.path.join(evidence, "worker.json"), "w") as stream:
    json.dump(report, stream)
# The shared stand-in then calls every endpoint with the key and publishes a valid manifest.
os.execv(sys.executable, [sys.executable, "-m", "data_designer.slurm.runtime.testing.stand_in_worker", *sys.argv[1:]])
"""


def profile(**changes: Any) -> ClusterProfile:
    return ClusterProfile.model_validate(
        {
            "workspace_root": "/ws",
            "account": "acct",
            "partitions": {"gpu": "gpu", "cpu": "cpu"},
            "gpus_per_node": 1,
            "compute_python": {"interpreter": sys.executable},
            "default_time_limit": "01:00:00",
            "huggingface": {"hf_home": HF_HOME, "offline": True},
            **changes,
        }
    )


def compile_plan(worker: Path) -> ExecutionPlan:
    """Two test-server replicas of 'writer', one GPU each on one-GPU nodes: replica 0 on node 0, replica 1 on node 1."""
    run = writer_run("hy", server_flags=("--api-key-env", "{api_key_env}"))
    spec = load_run(json.dumps(run), file="run.json")
    plan = compile(spec, profile(), cluster="local", config=resolve_config(spec))
    return with_client_argv(plan, (sys.executable, str(worker), "--shard", "{shard}", "--attempt", "{attempt}"))


@dataclass(frozen=True)
class Attempt:
    """One supervised attempt: its exit code, stderr (the Slurm .err file), run directory and evidence."""

    returncode: int
    stderr: str
    layout: RunLayout
    plan: ExecutionPlan
    steps: tuple[dict[str, Any], ...]
    worker: dict[str, Any]

    @property
    def status(self) -> StatusRecord:
        result = read_record(self.layout.status(0, 1), STATUS_SCHEMA)
        assert isinstance(result, RecordOk), (result, self.stderr)
        return result.payload

    @property
    def record(self) -> AttemptRecord:
        result = read_record(self.layout.attempt_record(0, 1), ATTEMPT_SCHEMA)
        assert isinstance(result, RecordOk), (result, self.stderr)
        return result.payload

    @property
    def endpoints(self) -> EndpointsRecord:
        result = read_record(self.layout.endpoints(0, 1), ENDPOINTS_SCHEMA)
        assert isinstance(result, RecordOk), (result, self.stderr)
        return result.payload


@pytest.fixture(scope="module")
def attempt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Attempt]:
    """One attempt with a remote replica, run once for every test of the module."""
    tmp = tmp_path_factory.mktemp("hygiene")
    root, evidence, bin_dir = tmp / "ws", tmp / "evidence", tmp / "bin"
    run_dir = root / "runs" / RUN_ID
    for directory in (run_dir, evidence, bin_dir):
        directory.mkdir(parents=True)
    for name, text in (("srun", FAKE_SRUN.format(python=sys.executable)), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    worker = tmp / "stand_in_worker.py"
    worker.write_text(STAND_IN_WORKER)
    plan = compile_plan(worker)
    (run_dir / "plan.json").write_text(plan.model_dump_json())
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k != SERVER_API_KEY_ENV}
    env.update(
        PATH=f"{bin_dir}:{env.get('PATH', '')}",
        EVIDENCE_DIR=str(evidence),
        HF_HOME="/home/someone/.cache/huggingface",  # the submitter's own: the profile's must win
        SLURM_JOB_NAME="hy-abcdef-c0",
        SLURM_ARRAY_TASK_ID="0",
        SLURM_ARRAY_JOB_ID="4242",
        SLURM_JOB_ID="4243",
        SLURM_JOB_NODELIST="node[1-2]",
    )
    argv = [sys.executable, "-m", "data_designer.slurm.runtime.supervisor", "--plan", "plan.json"]
    argv += ["--poll-interval-s", "0.1", "--heartbeat-interval-s", "0.3", "--stop-grace-s", "2"]
    try:
        done = subprocess.run(argv, cwd=run_dir, env=env, capture_output=True, text=True, timeout=120)
        steps = [json.loads(line) for line in (evidence / "srun.jsonl").read_text().splitlines()]
        steps.sort(key=lambda step: [a for a in step["argv"] if a.startswith("--job-name=")])
        report = json.loads((evidence / "worker.json").read_text()) if (evidence / "worker.json").exists() else {}
        yield Attempt(done.returncode, done.stderr, RunLayout.of(root, RUN_ID), plan, tuple(steps), report)
    finally:
        leftovers = processes_mentioning(str(tmp))
        for pid in leftovers:  # never leave a stray server behind
            os.kill(pid, signal.SIGKILL)
        assert not leftovers, f"processes left behind: {leftovers}"


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_the_plan_has_a_loopback_replica_and_a_remote_one_both_needing_the_key(attempt: Attempt) -> None:
    replicas = attempt.plan.allocation.replicas
    assert [(r.node_indices, r.bind, r.requires_api_key) for r in replicas] == [
        ((0,), "loopback", True),  # other users of a shared node reach loopback too
        ((1,), "all", True),
    ]
    assert attempt.returncode == 0, attempt.stderr
    assert attempt.status.status == "succeeded"


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_every_step_and_the_client_got_one_per_attempt_key(attempt: Attempt) -> None:
    key = attempt.worker["key"]
    assert len(key) >= 32
    assert attempt.worker["key_env"] == SERVER_API_KEY_ENV
    assert [step["env"][SERVER_API_KEY_ENV] for step in attempt.steps] == [key, key]
    assert attempt.endpoints.aliases["writer"].api_key_env == SERVER_API_KEY_ENV, "the record names the variable"
    # The servers enforce it: every call with the key is answered, every call without it refused.
    calls = attempt.worker["calls"]
    assert [(c["with_key"], c["without_key"]) for c in calls] == [(200, 401), (200, 401)]
    # The launcher hands the key to the server as VLLM_API_KEY too: where vLLM reads it, off the command line.
    assert [c["vllm_key"] for c in calls] == [True, True]


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_the_key_is_in_no_file_of_the_run_directory_and_on_no_command_line(attempt: Attempt) -> None:
    key: str = attempt.worker["key"]
    assert key
    files = [path for path in attempt.layout.run_dir.rglob("*") if path.is_file()]
    attempt_dir = attempt.layout.attempt_dir(0, 1)
    searched = {path.relative_to(attempt_dir).as_posix() for path in files if attempt_dir in path.parents}
    records = {"attempt.json", "endpoints.json", "status.json", "heartbeat.json", "output/manifest.json"}
    logs = {"logs/supervisor.log", "logs/client.log", "logs/server-writer-0.log", "logs/server-writer-1.log"}
    ports = {"ports/writer-0.0.json", "ports/writer-1.0.json"}
    assert records | logs | ports <= searched, searched
    holding = [str(path) for path in files if key.encode() in path.read_bytes()]
    assert holding == []
    assert key not in attempt.stderr, "the supervisor's stderr is the job's .err file"
    assert not any(key in word for step in attempt.steps for word in step["argv"])
    assert attempt.worker["key_on_a_cmdline"] == []


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_a_loopback_replica_listens_on_127_0_0_1_only_and_a_remote_one_on_all_interfaces(attempt: Attempt) -> None:
    replicas = attempt.record.replicas
    binds = [[p.bind_host for p in r.ports] for r in replicas]
    assert binds == [["127.0.0.1"], ["0.0.0.0"]]
    listening = {c["base_url"]: c["listening_on"] for c in attempt.worker["calls"]}
    assert listening[replicas[0].base_url] == ["0100007F"]  # 127.0.0.1 in /proc/net/tcp's byte order
    assert listening[replicas[1].base_url] == ["00000000"]  # 0.0.0.0


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_the_profile_s_hugging_face_settings_reach_every_server_step(attempt: Attempt) -> None:
    assert [step["env"]["HF_HOME"] for step in attempt.steps] == [HF_HOME, HF_HOME]
    assert [step["env"]["HF_HUB_OFFLINE"] for step in attempt.steps] == ["1", "1"]


def test_step_environment_takes_the_plan_s_variables_over_the_job_s(tmp_path: Path) -> None:
    plan = compile_plan(tmp_path / "worker.py")
    loopback, remote = plan.allocation.replicas
    job = {"PATH": "/bin", "HF_HOME": "/home/someone/hf", "HF_HUB_OFFLINE": "0", SERVER_API_KEY_ENV: "k"}
    for replica in (loopback, remote):
        env = step_environment(replica, job)
        assert (env["HF_HOME"], env["HF_HUB_OFFLINE"], env["PATH"], env[SERVER_API_KEY_ENV]) == (
            HF_HOME,
            "1",
            "/bin",
            "k",
        )
    named = ("HF_TOKEN", "OTHER_TOKEN")  # the plan's submission environment: names only
    job |= {"HF_TOKEN": "hf-value", "OTHER_TOKEN": "other-value"}
    gated = loopback.model_copy(update={"pass_environment": ("HF_TOKEN",)})
    env = step_environment(gated, job, named)
    assert (env.get("HF_TOKEN"), "OTHER_TOKEN" in env, env["PATH"]) == ("hf-value", False, "/bin")
    assert "HF_TOKEN" not in step_environment(loopback, job, named), "a replica sees only the variables it names"
    online = compile(
        plan.run,
        profile(huggingface={"hf_home": None, "offline": False}),
        cluster="local",
        config=resolve_config(plan.run),
    )
    assert [r.environment for r in online.allocation.replicas] == [{}, {}], "nothing set that the profile does not set"


def test_a_loopback_replica_s_launcher_binds_127_0_0_1(tmp_path: Path) -> None:
    plan = compile_plan(tmp_path / "worker.py")
    loopback = plan.allocation.replicas[0]
    argv = srun_argv(loopback, python=sys.executable, port_dir=tmp_path / "ports", environ={})
    launcher = argv[argv.index("--port-dir") :]
    assert launcher[launcher.index("--bind-host") + 1] == "127.0.0.1"
    (tmp_path / "ports").mkdir()
    server = launch(launcher, {SERVER_API_KEY_ENV: "k"})
    record = read_record(tmp_path / "ports" / "writer-0.0.json", PORT_SCHEMA)
    assert isinstance(record, RecordOk)
    assert record.payload.bind_host == "127.0.0.1"
    assert server[server.index("--host") + 1] == "127.0.0.1"
    assert server[server.index("--port") + 1] == str(record.payload.port)
    with socket.socket() as check:  # the probed port was free on loopback, and released for the server
        check.bind(("127.0.0.1", record.payload.port))
