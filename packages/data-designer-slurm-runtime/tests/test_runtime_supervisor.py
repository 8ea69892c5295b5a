"""The allocation supervisor end to end on this machine: a fake ``srun`` (runs the step locally, logs its argv),
a fake ``scontrol``, the in-tree test server as a ``command`` deployment and a stand-in client worker.

Each test compiles a real plan, writes it into a run directory and runs ``python -m
data_designer.slurm.runtime.supervisor --plan plan.json`` there as Slurm's batch step would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from data_designer.slurm.contracts import ClusterProfile, ExecutionPlan
from data_designer.slurm.contracts.records import (
    ATTEMPT_SCHEMA,
    ENDPOINTS_SCHEMA,
    EXIT_CODES,
    HEARTBEAT_SCHEMA,
    PORT_SCHEMA,
    SERVER_METRICS_SCHEMA,
    STATUS_SCHEMA,
    AttemptRecord,
    HeartbeatRecord,
    IndexRange,
    OutputManifest,
    RecordSchema,
    StatusRecord,
)
from data_designer.slurm.planner import compile, load_run, plan_digest, resolve_config
from data_designer.slurm.runtime.store import AttemptWriter, RecordOk, RunLayout, owner_from_environment, read_record
from data_designer.slurm.runtime.testing import (
    assign_attempt,
    processes_mentioning,
    stand_in_argv,
    wait_for_record,
    with_client_argv,
    writer_run,
)
from data_designer.slurm.runtime.testing.stand_in_worker import stand_in_manifest

M = TypeVar("M", bound=BaseModel)
RUN_ID = "sv-20261129T120000Z-abcdef"
LAUNCH = [sys.executable, "-m", "data_designer.slurm.runtime._launch"]

FAKE_SRUN = """\
#!{python}
# A fake srun: log the argv, then exec the command (the first word after the options) in place.
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_SRUN_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
index = next(i for i, word in enumerate(args) if not word.startswith("-"))
os.environ.update(SLURM_PROCID="0", SLURMD_NODENAME="node1", SLURM_STEP_GPUS="fake")
os.execvp(args[index], args[index:])
"""

FAKE_SCONTROL = """\
#!/bin/sh
# A fake scontrol: one node, node1, at 127.0.0.1.
case "$*" in
  "show hostnames"*) echo node1 ;;
  "-o show node"*) echo "NodeName=node1 Arch=x86_64 NodeAddr=127.0.0.1 NodeHostName=localhost" ;;
  "show job -o"*) echo "JobId=$4 JobName=sv JobState=COMPLETING Reason=$(cat "$(dirname "$0")/job-reason" 2>/dev/null || echo None) Restarts=0" ;;
  *) echo "fake scontrol: $*" >&2; exit 1 ;;
esac
"""


@dataclass
class Outcome:
    returncode: int
    stderr: str
    elapsed_s: float
    layout: RunLayout

    @property
    def attempt_dir(self) -> Path:
        return self.layout.attempt_dir(0, 1)

    def read(self, path: Path, schema: RecordSchema[M]) -> M:
        result = read_record(path, schema)
        assert isinstance(result, RecordOk), (path, result, self.stderr)
        return result.payload

    @property
    def status(self) -> StatusRecord:
        return self.read(self.layout.status(0, 1), STATUS_SCHEMA)

    @property
    def attempt(self) -> AttemptRecord:
        return self.read(self.layout.attempt_record(0, 1), ATTEMPT_SCHEMA)

    def srun_calls(self) -> list[list[str]]:
        """Every srun argv, ordered by step name: steps start concurrently, so the log's order is not stable."""
        log = self.layout.root / "srun.log"
        calls: list[list[str]] = [json.loads(line) for line in log.read_text().splitlines()]
        return sorted(calls, key=lambda call: [arg for arg in call if arg.startswith("--job-name=")])


def compile_plan(
    *, server_flags: tuple[str, ...] = (), replicas: int = 2, request_log_dir: Path, **client: Any
) -> ExecutionPlan:
    """Two test-server replicas of alias 'writer' on one node, and the stand-in worker as the client."""
    flags = ("--request-log", f"{request_log_dir}/requests-{{port}}.jsonl", *server_flags)
    run = writer_run("sv", server_flags=flags, replicas=replicas)
    profile = ClusterProfile.model_validate(
        {
            "workspace_root": "/ws",
            "account": "acct",
            "partitions": {"gpu": "gpu", "cpu": "cpu"},
            "gpus_per_node": 2,
            "compute_python": {"interpreter": sys.executable},
            "default_time_limit": "01:00:00",
        }
    )
    spec = load_run(json.dumps(run), file="run.json")
    plan = compile(spec, profile, cluster="local", config=resolve_config(spec))
    return with_client(plan, **client)


def with_client(plan: ExecutionPlan, *, stand_in: bool = False, python: str = sys.executable) -> ExecutionPlan:
    """``plan`` with the stand-in worker (``runtime.testing.stand_in_worker``) as its client, digest recomputed."""
    return with_client_argv(plan, stand_in_argv(python) if stand_in else (python, "-c", "pass"))


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "ws"
    (root / "runs" / RUN_ID).mkdir(parents=True)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN.format(python=sys.executable)), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    yield root
    leftovers = processes_mentioning(str(tmp_path))
    for pid in leftovers:  # never leave a stray behind, even when the test failed
        os.kill(pid, signal.SIGKILL)
    assert not leftovers, f"processes left behind: {leftovers}"


def supervisor_env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(
        PATH=f"{root / 'bin'}:{env.get('PATH', '')}",
        FAKE_SRUN_LOG=str(root / "srun.log"),
        SLURM_JOB_NAME="sv-abcdef-c0",
        SLURM_ARRAY_TASK_ID="0",
        SLURM_ARRAY_JOB_ID="4242",
        SLURM_JOB_ID="4243",
        SLURM_JOB_NODELIST="node1",
    )
    env.update(extra)
    return env


@dataclass
class Supervising:
    """A supervisor started by :func:`supervising`, running until :meth:`finish`."""

    process: subprocess.Popen[str]
    root: Path
    started: float

    def finish(self, timeout_s: float = 60) -> Outcome:
        _, stderr = self.process.communicate(timeout=timeout_s)
        elapsed = time.monotonic() - self.started
        return Outcome(self.process.returncode, stderr, elapsed, RunLayout.of(self.root, RUN_ID))


@contextmanager
def supervising(root: Path, plan: ExecutionPlan, **env: str) -> Iterator[Supervising]:
    """Start the supervisor on ``plan`` as Slurm's batch step would; it is killed on the way out if still running."""
    run_dir = root / "runs" / RUN_ID
    (run_dir / "plan.json").write_text(plan.model_dump_json())
    argv = [sys.executable, "-m", "data_designer.slurm.runtime.supervisor", "--plan", "plan.json"]
    argv += ["--poll-interval-s", "0.1", "--heartbeat-interval-s", "0.3", "--stop-grace-s", "2"]
    started = time.monotonic()
    process = subprocess.Popen(
        argv, cwd=run_dir, env=supervisor_env(root, **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        yield Supervising(process, root, started)
    finally:
        if process.poll() is None:
            process.kill()


def run_supervisor(root: Path, plan: ExecutionPlan, **env: str) -> Outcome:
    with supervising(root, plan, **env) as running:
        return running.finish()


def wait_for(predicate: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_two_replicas_start_on_distinct_published_ports_and_both_answer(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    outcome = run_supervisor(workspace, plan)

    assert outcome.returncode == 0, outcome.stderr
    assert outcome.status.status == "succeeded"
    attempt = outcome.attempt
    ports = [r.port for r in attempt.replicas]
    assert len(ports) == 2
    assert None not in ports
    assert len(set(ports)) == 2
    assert [r.base_url for r in attempt.replicas] == [f"http://127.0.0.1:{p}/v1" for p in ports]
    assert all(r.ready_at is not None and r.startup_s is not None for r in attempt.replicas)
    # The target (poll interval + 0.1 s) is the benchmark's to measure; here: measured, and not absurd.
    assert all(r.readiness_lag_s is not None and r.readiness_lag_s < 2 for r in attempt.replicas)
    assert attempt.client_started_at is not None
    assert (attempt.nodes, attempt.node_addresses) == (("node1",), ("127.0.0.1",))
    endpoints = outcome.read(outcome.layout.endpoints(0, 1), ENDPOINTS_SCHEMA).aliases["writer"]
    assert endpoints.base_urls == tuple(r.base_url for r in attempt.replicas)
    answers = json.loads((outcome.attempt_dir / "stand-in-answers.json").read_text())
    assert answers["argv"] == ["--shard", "0", "--attempt", "1"]
    assert sorted(a["text"].split()[0] for a in answers["answers"]) == sorted(f"replica=writer-{p}" for p in ports)
    for port in ports:  # each replica's own request log shows it served the request
        assert (workspace / f"requests-{port}.jsonl").read_text().count("/v1/chat/completions") == 1
    logs = outcome.layout.logs_dir(0, 1)
    assert sorted(p.name for p in logs.iterdir()) == [
        "client.log",
        "server-writer-0.log",
        "server-writer-1.log",
        "supervisor.log",
    ]


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_every_replica_s_metrics_are_sampled_while_the_client_runs_and_one_without_them_is_not_available(
    workspace: Path,
) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    bare = plan.allocation.replicas[1].model_copy(update={"argv": (*plan.allocation.replicas[1].argv, "--no-metrics")})
    replicas = (plan.allocation.replicas[0], bare)
    plan = plan.model_copy(update={"allocation": plan.allocation.model_copy(update={"replicas": replicas})})
    outcome = run_supervisor(workspace, plan.model_copy(update={"digest": plan_digest(plan)}))

    assert outcome.status.status == "succeeded", outcome.stderr
    record = outcome.read(outcome.layout.server_metrics(0, 1), SERVER_METRICS_SCHEMA)
    assert record.finished
    assert record.interval_s == 5.0
    served, without = record.replicas
    ports = [r.port for r in outcome.attempt.replicas]
    assert [(r.alias, r.replica, r.url) for r in record.replicas] == [
        ("writer", i, f"http://127.0.0.1:{port}/metrics") for i, port in enumerate(ports)
    ]
    assert served.available
    assert served.aggregates is not None
    assert served.aggregates.scrapes >= 1  # at once when the client starts
    assert served.samples[0].kv_usage is not None
    assert (without.available, without.reason, without.samples) == (False, "GET /metrics answered 404", ())
    assert "writer-r1: no server metrics: GET /metrics answered 404" in outcome.stderr


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_every_step_is_an_srun_with_explicit_resources(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    outcome = run_supervisor(workspace, plan, SLURM_JOB_GPUS="0,1", SLURM_MEM_PER_NODE="8000", SLURM_CPUS_ON_NODE="4")

    assert outcome.returncode == 0, outcome.stderr
    calls = outcome.srun_calls()
    assert len(calls) == 2
    for replica, call in enumerate(calls):
        command = call.index(sys.executable)
        assert call[:command] == [
            "--exact",
            "--nodes=1",
            "--ntasks=1",
            "--ntasks-per-node=1",
            "--cpus-per-task=1",
            "--relative=0",
            "--export=ALL",
            f"--job-name=writer-r{replica}",
            "--kill-on-bad-exit=1",
            "--gres=gpu:1",
            "--mem=1000M",  # the plan's memory_gb_per_replica (a command deployment's default 1), not a job share
        ]
        assert call[command + 1 : command + 3] == ["-m", "data_designer.slurm.runtime._launch"]
        assert "{port}" in call, "the server argv reaches the launcher as a template"
    ports = outcome.attempt.replicas[0].ports
    assert [(p.task, p.node, p.step_gpus, p.bind_host) for p in ports] == [(0, "node1", "fake", "127.0.0.1")]


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_a_server_crashing_at_start_fails_the_attempt_within_seconds_with_its_log_tail(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, server_flags=("--crash-at-start",), stand_in=True)
    outcome = run_supervisor(workspace, plan)

    assert outcome.returncode == EXIT_CODES["server_failed_to_start"], outcome.stderr
    status = outcome.status
    assert status.status == "server_failed_to_start"
    assert status.step is not None
    assert status.step.startswith("server-writer-")
    assert "exited 4 before it was ready" in status.message
    assert any("simulated crash at start" in line for line in status.log_tail)
    assert outcome.elapsed_s < 15, "classified long before the startup budget (60 s)"
    assert not (outcome.layout.endpoints(0, 1)).exists()
    assert not (outcome.attempt_dir / "stand-in-answers.json").exists(), "the client never started"


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
@pytest.mark.parametrize("permissive", [False, True], ids=["strict", "permissive"])
def test_a_server_serving_another_model_name_fails_to_start_naming_both_names(
    workspace: Path, permissive: bool
) -> None:
    # The test server serves its last --model: 'other-model', where the client would ask for 'writer'.
    flags = ("--model", "other-model", *(("--permissive",) if permissive else ()))
    plan = compile_plan(request_log_dir=workspace, server_flags=flags, replicas=1, stand_in=True)
    outcome = run_supervisor(workspace, plan)
    print(f"server_failed_to_start classified {outcome.elapsed_s:.2f}s after the supervisor started")

    assert outcome.returncode == EXIT_CODES["server_failed_to_start"], outcome.stderr
    status = outcome.status
    assert status.status == "server_failed_to_start"
    assert status.step == "server-writer-0"
    assert "server writer-r0 serves 'other-model' but the client will ask for 'writer'" in status.message
    assert not (outcome.layout.endpoints(0, 1)).exists()
    assert not (outcome.attempt_dir / "stand-in-answers.json").exists(), "the client never started"


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_a_command_server_without_v1_models_is_ready_on_health_alone(workspace: Path) -> None:
    script = (
        "import http.server, sys\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200 if self.path == '/health' else 404)\n"
        "        self.send_header('Content-Length', '0')\n"
        "        self.end_headers()\n"
        "http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()\n"
    )
    plan = compile_plan(request_log_dir=workspace, replicas=1)
    replica = plan.allocation.replicas[0].model_copy(
        update={"argv": (sys.executable, "-c", script, "{host}", "{port}")}
    )
    plan = plan.model_copy(update={"allocation": plan.allocation.model_copy(update={"replicas": (replica,)})})
    outcome = run_supervisor(workspace, plan.model_copy(update={"digest": plan_digest(plan)}))

    attempt = outcome.attempt
    assert attempt.replicas[0].ready_at is not None, outcome.stderr
    assert attempt.client_started_at is not None
    assert "writer-r0 answers GET /v1/models with HTTP 404 and no model list: readiness is /health alone" in (
        outcome.stderr
    )


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_a_server_dying_while_the_client_runs_is_server_died(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, server_flags=("--crash-after", "1"), stand_in=True)
    outcome = run_supervisor(workspace, plan, STAND_IN_MODE="sleep")

    assert outcome.returncode == EXIT_CODES["server_died"], outcome.stderr
    assert outcome.status.status == "server_died"
    assert "while the client was running, and no replica of 'writer' is left" in outcome.status.message


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_without_srun_the_servers_fail_to_start(workspace: Path) -> None:
    (workspace / "bin" / "srun").unlink()
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    outcome = run_supervisor(workspace, plan, PATH=str(workspace / "bin"))

    assert outcome.returncode == EXIT_CODES["server_failed_to_start"], outcome.stderr
    assert outcome.status.message.startswith("cannot run 'srun' for writer-r0: ")


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_an_unexpected_failure_is_an_internal_error_with_its_traceback(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    layout = RunLayout.of(workspace, RUN_ID)
    layout.attempt_record(0, 1).mkdir(parents=True)  # attempt.json cannot be written: a directory is in the way
    outcome = run_supervisor(workspace, plan)

    assert outcome.returncode == EXIT_CODES["internal_error"] == 1, outcome.stderr
    assert outcome.status.status == "internal_error"
    assert outcome.status.message.startswith("the supervisor failed: UnavailableError: cannot access")
    assert any("Traceback" in line or "Error" in line for line in outcome.status.log_tail)


def test_a_wrong_interpreter_is_an_environment_mismatch(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, python="/opt/elsewhere/bin/python")
    outcome = run_supervisor(workspace, plan)

    assert outcome.returncode == EXIT_CODES["environment_mismatch"], outcome.stderr
    status = outcome.status
    assert status.status == "environment_mismatch"
    assert status.message.startswith("interpreter: the plan runs '/opt/elsewhere/bin/python'")
    assert not (workspace / "srun.log").exists(), "nothing was started"


def test_an_edited_plan_fails_its_digest_check(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    outcome = run_supervisor(workspace, plan.model_copy(update={"cluster": "edited"}))

    assert outcome.returncode == EXIT_CODES["invalid_config"]
    assert outcome.status.status == "invalid_config"
    assert outcome.status.message.startswith("plan digest mismatch")


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
@pytest.mark.parametrize(
    ("mode", "status"), [("exit3", "client_error"), ("exit2", "invalid_config"), ("no-manifest", "client_error")]
)
def test_client_endings_are_classified(workspace: Path, mode: str, status: str) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    outcome = run_supervisor(workspace, plan, STAND_IN_MODE=mode)

    assert outcome.returncode == EXIT_CODES[status], outcome.stderr
    assert outcome.status.status == status
    assert outcome.status.step == "client"
    assert outcome.status.records == 0
    if mode.startswith("exit"):
        assert outcome.status.message == (
            f"the client worker exited {mode[4:]} without a client-error.json; its last log line: "
            f"stand-in: failing with {mode}; fix: read logs/client.log"
        )
        assert outcome.status.log_tail == (f"stand-in: failing with {mode}",)
    else:
        assert outcome.status.message == (
            "the client worker exited 0 without a valid output/manifest.json; fix: read logs/client.log"
        )


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_a_client_error_s_status_names_the_worker_s_cause_and_fix(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    outcome = run_supervisor(workspace, plan, STAND_IN_MODE="client-error")

    assert outcome.returncode == EXIT_CODES["client_error"], outcome.stderr
    assert (outcome.status.status, outcome.status.step, outcome.status.records) == ("client_error", "client", 0)
    assert outcome.status.message == (
        "the client worker exited 3: ModelNotFoundError: The specified model 'writer' could not be found while "
        "running health checks; fix: set deployments.writer.model to the name the server serves (its /v1/models "
        "lists it)"
    )
    assert outcome.status.log_tail == ("stand-in: failing with a client-error.json",), "the log stays as evidence"


@pytest.mark.parametrize(
    ("signum", "status", "detail"),
    [
        (signal.SIGUSR1, "time_limit", "the time-limit warning (SIGUSR1) arrived"),
        (signal.SIGTERM, "cancelled", "the job was cancelled (JobState=COMPLETING, Reason=None)"),
    ],
    ids=["SIGUSR1", "SIGTERM"],
)
@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_a_signal_drains_the_client_classifies_and_stops_every_child(
    workspace: Path, signum: signal.Signals, status: str, detail: str
) -> None:
    # The servers ignore SIGTERM: stopping them needs the KILL after the grace period.
    plan = compile_plan(request_log_dir=workspace, server_flags=("--ignore-sigterm",), stand_in=True)
    layout = RunLayout.of(workspace, RUN_ID)
    answers = layout.attempt_dir(0, 1) / "stand-in-answers.json"
    with supervising(workspace, plan, STAND_IN_MODE="sleep") as running:
        wait_for(answers.exists)
        first = _heartbeat(layout)
        wait_for_record(
            layout.heartbeat(0, 1), HEARTBEAT_SCHEMA, timeout_s=5, accept=lambda h: h.beat >= first.beat + 2
        )
        assert _heartbeat(layout).phase == "client_running"
        running.process.send_signal(signum)
        outcome = running.finish()

    assert outcome.returncode == EXIT_CODES[status], outcome.stderr
    record = outcome.status
    assert record.status == status
    assert record.signal == signum.name
    assert record.message.startswith(f"{detail}; drained in ")
    assert record.message.endswith("0 of 4 records published, the rest is left for the next attempt")
    assert (record.records, record.records_assigned) == (0, 4)
    assert record.drain_s is not None
    assert record.drain_s < 10
    assert "stand-in: drained on " + signum.name in (layout.logs_dir(0, 1) / "client.log").read_text()
    assert _heartbeat(layout).phase == "stopping"


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_a_client_ended_by_the_forwarded_signal_is_classified_by_the_signal(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    layout = RunLayout.of(workspace, RUN_ID)
    with supervising(workspace, plan, STAND_IN_MODE="sleep-undrained") as running:
        wait_for((layout.attempt_dir(0, 1) / "stand-in-answers.json").exists)
        wait_for(lambda: "without handlers" in (layout.logs_dir(0, 1) / "client.log").read_text())
        running.process.send_signal(signal.SIGUSR1)
        outcome = running.finish()

    assert outcome.returncode == EXIT_CODES["time_limit"], outcome.stderr
    assert outcome.status.message.startswith("the time-limit warning (SIGUSR1) arrived; the client worker was ended")
    assert outcome.status.records == 0


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_a_signal_before_the_client_starts_ends_classified_with_no_records(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, server_flags=("--start-delay-s", "30"), stand_in=True)
    (workspace / "bin" / "job-reason").write_text("TimeLimit\n")  # what the fake scontrol says
    layout = RunLayout.of(workspace, RUN_ID)
    with supervising(workspace, plan) as running:
        wait_for_record(
            layout.attempt_record(0, 1), ATTEMPT_SCHEMA, timeout_s=30, accept=lambda a: len(a.replicas) == 2
        )
        running.process.send_signal(signal.SIGTERM)
        outcome = running.finish()

    assert outcome.returncode == EXIT_CODES["time_limit"], outcome.stderr
    assert outcome.status.message == (
        "the job reached its time limit (JobState=COMPLETING, Reason=TimeLimit); stopped before generation started"
    )
    assert outcome.status.records == 0
    assert not (outcome.attempt_dir / "stand-in-answers.json").exists()


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_one_dead_replica_of_two_does_not_end_the_attempt(workspace: Path) -> None:
    # One replica (whichever claims the file first) dies after answering one request; the other lives on.
    flags = ("--crash-after", "1", "--crash-claim", str(workspace / "crash.claim"))
    plan = compile_plan(request_log_dir=workspace, server_flags=flags, stand_in=True)
    layout = RunLayout.of(workspace, RUN_ID)
    with supervising(workspace, plan, STAND_IN_MODE="sleep") as running:
        wait_for_record(
            layout.attempt_record(0, 1),
            ATTEMPT_SCHEMA,
            timeout_s=30,
            accept=lambda a: any(r.exit_code is not None for r in a.replicas),
        )
        time.sleep(0.5)  # several polls: the supervisor carries on
        assert running.process.poll() is None
        running.process.send_signal(signal.SIGUSR1)
        outcome = running.finish()

    assert outcome.status.status == "time_limit", outcome.stderr
    exits = sorted((r.exit_code is None, r.exit_code) for r in outcome.attempt.replicas)
    assert exits == [(False, 5), (True, None)]  # 5: the test server's EXIT_CRASHED
    assert "1 replica(s) of 'writer' still serve it" in (layout.logs_dir(0, 1) / "supervisor.log").read_text()


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_an_attempt_generates_only_what_earlier_attempts_did_not_publish(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    layout = RunLayout.of(workspace, RUN_ID)
    earlier = layout.attempt_dir(0, 1)
    AttemptWriter(layout, 0, 1).claim(owner_from_environment({"SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "0"}))
    base = stand_in_manifest_for(layout, plan, attempt=1, ranges=((1, 2),))
    AttemptWriter(layout, 0, 1).publish_manifest(base)
    assert earlier.is_dir()

    outcome = run_supervisor(workspace, plan, SLURM_RESTART_COUNT="1", SLURM_ARRAY_JOB_ID="77")

    assert outcome.returncode == 0, outcome.stderr
    second = outcome.read(layout.attempt_record(0, 2), ATTEMPT_SCHEMA)
    assert [(r.start, r.stop) for r in second.assigned or ()] == [(0, 1), (2, 4)]
    assert [(r.start, r.stop) for r in second.covered_before] == [(1, 2)]
    status = outcome.read(layout.status(0, 2), STATUS_SCHEMA)
    assert (status.status, status.records, status.records_assigned) == ("succeeded", 3, 3)


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_nothing_left_to_generate_succeeds_without_starting_servers(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    first = run_supervisor(workspace, plan)
    assert first.returncode == 0, first.stderr
    calls = len(first.srun_calls())

    second = run_supervisor(workspace, plan, SLURM_RESTART_COUNT="1")

    assert second.returncode == 0, second.stderr
    status = second.read(second.layout.status(0, 2), STATUS_SCHEMA)
    assert status.status == "succeeded"
    assert status.message == "nothing left to generate: earlier attempts published every index of the shard"
    assert second.read(second.layout.attempt_record(0, 2), ATTEMPT_SCHEMA).assigned == ()
    assert len(second.srun_calls()) == calls, "no server was started"


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_a_retry_submission_takes_the_next_attempt_whoever_holds_the_planned_one(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    first = run_supervisor(workspace, plan, STAND_IN_MODE="exit3")
    assert first.returncode == EXIT_CODES["client_error"]

    retry = run_supervisor(workspace, plan, SLURM_ARRAY_JOB_ID="9999", DDSLURM_ATTEMPT="next")

    assert retry.returncode == 0, retry.stderr
    assert retry.read(retry.layout.status(0, 2), STATUS_SCHEMA).status == "succeeded"


def stand_in_manifest_for(
    layout: RunLayout, plan: ExecutionPlan, *, attempt: int, ranges: tuple[tuple[int, int], ...]
) -> OutputManifest:
    """A stand-in manifest of an earlier attempt that published ``ranges`` (written with its attempt.json)."""
    assign_attempt(layout, plan_digest=plan.digest, shard=0, attempt=attempt, assigned=[(0, 4)])
    produced = tuple(IndexRange(start=a, stop=b) for a, b in ranges)
    return stand_in_manifest(AttemptWriter(layout, 0, attempt), records_of=produced)


def _heartbeat(layout: RunLayout) -> HeartbeatRecord:
    result = read_record(layout.heartbeat(0, 1), HEARTBEAT_SCHEMA)
    assert isinstance(result, RecordOk), result
    return result.payload


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_a_task_whose_attempt_is_claimed_by_someone_else_writes_nothing(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    first = run_supervisor(workspace, plan)
    assert first.returncode == 0, first.stderr
    before = sorted(p.name for p in first.attempt_dir.iterdir())

    second = run_supervisor(workspace, plan, SLURM_ARRAY_JOB_ID="9999")

    assert second.returncode == 4
    assert "is already claimed by" in second.stderr
    assert sorted(p.name for p in first.attempt_dir.iterdir()) == before


@pytest.mark.host  # the supervisor refuses to start without the host (check_environment)
def test_a_requeued_task_takes_the_next_attempt(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace, stand_in=True)
    first = run_supervisor(workspace, plan, STAND_IN_MODE="exit3")
    assert first.returncode == EXIT_CODES["client_error"]

    second = run_supervisor(workspace, plan, SLURM_RESTART_COUNT="1")

    assert second.returncode == 0, second.stderr
    assert second.read(second.layout.status(0, 2), STATUS_SCHEMA).status == "succeeded"
    assert second.read(second.layout.attempt_record(0, 2), ATTEMPT_SCHEMA).restart_count == 1


def test_a_job_name_without_a_chunk_is_refused_before_anything_is_written(workspace: Path) -> None:
    plan = compile_plan(request_log_dir=workspace)
    outcome = run_supervisor(workspace, plan, SLURM_JOB_NAME="whatever")

    assert outcome.returncode == EXIT_CODES["invalid_config"]
    assert "job name 'whatever' does not end in '-c<chunk>'" in outcome.stderr
    assert not outcome.layout.shards_dir.exists()


def test_launcher_probes_publishes_and_execs(tmp_path: Path) -> None:
    out = tmp_path / "argv.json"
    script = "import json, sys; json.dump(sys.argv[1:], open(sys.argv[1], 'w'))"
    options = ["--port-dir", str(tmp_path / "ports"), "--alias", "a", "--replica", "3", "--bind-host", "127.0.0.1"]
    done = subprocess.run(
        [*LAUNCH, *options, "--", sys.executable, "-c", script, str(out), "{host}", "{port}", "{{literal}}"],
        env={**os.environ, "SLURM_PROCID": "1", "SLURM_STEP_GPUS": "1"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    argv = json.loads(out.read_text())
    result = read_record(tmp_path / "ports" / "a-3.1.json", PORT_SCHEMA)
    assert isinstance(result, RecordOk), result
    assert argv == [str(out), "127.0.0.1", str(result.payload.port), "{literal}"]
    assert (result.payload.task, result.payload.step_gpus) == (1, "1")


def test_launcher_without_a_server_argv_fails_with_a_message(tmp_path: Path) -> None:
    done = subprocess.run(
        [*LAUNCH, "--port-dir", str(tmp_path), "--alias", "a", "--replica", "0", "--bind-host", "127.0.0.1", "--"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert done.returncode == 97
    assert "no server argv" in done.stderr
