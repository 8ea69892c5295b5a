"""The ``vllm`` stand-in, run through its installed script found on ``PATH`` (as the launcher execs it), on
loopback: each rank of a replica over several nodes is its own process, as each task of the ``srun`` step is.

Checked: the ranks join and only then rank 0 serves the OpenAI API with the key from ``VLLM_API_KEY``; every
inconsistent rank set is refused with its exit code and a message naming the rank; the ranks fail as a unit
(a killed headless rank ends rank 0, a killed rank 0 ends the headless ranks) and stop as one on SIGTERM; a rank
that comes after the set was complete is refused while rank 0 serves on; one node serves without a rendezvous; the
knobs come from the environment; the start log holds every rank's flags and never the key; the parser is strict on
the flags the planner reserves and keeps every other word.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.planner import MULTI_NODE_FLAGS, RENDERED_FLAGS
from data_designer.slurm.runtime.testing import (
    EXIT_BAD_ARGUMENTS,
    EXIT_CRASHED,
    EXIT_HEAD_LOST,
    EXIT_RANK_LOST,
    EXIT_RANKS_MISSING,
    EXIT_RANKS_REFUSED,
    VLLM_STAND_IN_LOG_ENV,
    VLLM_STAND_IN_LOG_NAME,
    closed_port,
    install_vllm_stand_in,
    read_vllm_stand_in_log,
)
from data_designer.slurm.runtime.testing.vllm_stand_in import (
    VLLM_STAND_IN_CRASH_AFTER_ENV,
    VLLM_STAND_IN_CRASH_RANK_AFTER_ENV,
    VLLM_STAND_IN_CRASH_RANK_ENV,
    VLLM_STAND_IN_JOIN_TIMEOUT_ENV,
    VLLM_STAND_IN_START_DELAY_ENV,
    vllm_stand_in_script,
)
from data_designer.slurm.runtime.testing.vllm_stand_in._args import _serve_parser, parse_serve
from data_designer.slurm.runtime.testing.vllm_stand_in._cli import main

MODEL = "org/model-a"
ALIAS = "writer"
KEY = "stand-in-test-key-0123456789"
ENGINE_ARGS = ("--compilation-config", '{"mode": 3}', "--max-num-seqs", "8", "--enforce-eager")


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_vllm_stand_in(tmp_path_factory.mktemp("stand-in") / "bin")


@dataclass
class Rank:
    process: subprocess.Popen[str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def finish(self, timeout_s: float = 15) -> tuple[int, str]:
        _, stderr = self.process.communicate(timeout=timeout_s)
        return self.process.returncode, stderr


@dataclass
class Replica:
    """Rank processes of one replica on loopback, sharing a master port and a start log."""

    stand_in: Path
    log: Path
    master_port: int = field(default_factory=closed_port)
    ranks: list[Rank] = field(default_factory=list)

    def start(self, rank: int, nnodes: int, *, env: Mapping[str, str] | None = None, **flags: Any) -> Rank:
        port = closed_port()
        argv = serve_argv(rank, nnodes, api_port=port, master_port=self.master_port, **flags)
        process = subprocess.Popen(
            argv, env=environment(self.stand_in, self.log, **(env or {})), stderr=subprocess.PIPE, text=True
        )
        self.ranks.append(Rank(process, port))
        return self.ranks[-1]


@pytest.fixture
def replica(stand_in: Path, tmp_path: Path) -> Iterator[Replica]:
    started = Replica(stand_in, tmp_path / "starts.jsonl")
    yield started
    for rank in started.ranks:
        if rank.process.poll() is None:
            rank.process.kill()
        rank.process.communicate(timeout=10)


def serve_argv(
    rank: int,
    nnodes: int,
    *,
    api_port: int,
    master_port: int,
    model: str = MODEL,
    alias: str = ALIAS,
    tp: int = 2,
    pp: int | None = None,
    headless: bool | None = None,
    backend: str = "mp",
) -> list[str]:
    """The argv the planner renders for one rank (bound by the launcher), engine args last; by default the pipeline
    has one stage of two GPUs on each node."""
    pp = nnodes if pp is None else pp
    argv = ["vllm", "serve", model, "--host", "127.0.0.1", "--port", str(api_port)]
    argv += ["--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp), "--served-model-name", alias]
    if nnodes > 1:
        argv += ["--distributed-executor-backend", backend, "--nnodes", str(nnodes), "--node-rank", str(rank)]
        argv += ["--master-addr", "127.0.0.1", "--master-port", str(master_port)]
        if rank > 0 if headless is None else headless:
            argv.append("--headless")
    return [*argv, *ENGINE_ARGS]


def environment(stand_in: Path, log: Path, **extra: str) -> dict[str, str]:
    dropped = ("DDSLURM_VLLM_STAND_IN_", "SLURM", "CUDA_VISIBLE_DEVICES", "VLLM_")
    env = {name: value for name, value in os.environ.items() if not name.startswith(dropped)}
    env["PATH"] = f"{stand_in}{os.pathsep}{os.environ.get('PATH', '')}"
    return env | {"VLLM_API_KEY": KEY, VLLM_STAND_IN_LOG_ENV: str(log), VLLM_STAND_IN_JOIN_TIMEOUT_ENV: "10"} | extra


def call(url: str, path: str, body: Any = None, *, key: str | None = KEY) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_ready(rank: Rank, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if rank.process.poll() is not None:
            raise AssertionError(f"rank ended with {rank.process.returncode}: {rank.finish()[1]}")
        if listening(rank.port):
            assert call(rank.url, "/health", key=None)[0] == 200
            return
        time.sleep(0.05)
    raise AssertionError(f"not ready within {timeout_s}s")


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def wait_logged(log: Path, count: int, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while len(read_vllm_stand_in_log(log)) < count:
        assert time.monotonic() < deadline, f"fewer than {count} starts logged"
        time.sleep(0.05)


def chat() -> dict[str, Any]:
    return {"model": ALIAS, "messages": [{"role": "user", "content": "hello"}]}


def test_the_ranks_join_then_rank_zero_serves_with_the_key(replica: Replica) -> None:
    late = replica.start(1, 3)  # before rank 0 listens: it retries
    head = replica.start(0, 3)
    wait_logged(replica.log, 2)
    time.sleep(0.5)
    assert head.process.poll() is None
    assert not listening(head.port), "rank 0 listened before every rank joined"
    replica.start(2, 3)
    wait_ready(head)
    assert not listening(late.port), "a headless rank serves no API"
    status, models = call(head.url, "/v1/models")
    assert (status, [m["id"] for m in models["data"]]) == (200, [ALIAS])
    assert call(head.url, "/v1/models", key=None)[0] == 401
    status, reply = call(head.url, "/v1/chat/completions", chat())
    assert (status, reply["model"], reply["choices"][0]["message"]["role"]) == (200, ALIAS, "assistant")
    head.process.send_signal(signal.SIGTERM)
    (head_code, head_err), (late_code, late_err) = head.finish(), late.finish()
    assert (head_code, late_code, replica.ranks[2].finish()[0]) == (0, 0, 0), (head_err, late_err)
    assert "every rank joined: node rank 1 (" in head_err
    assert "rank 0 stopped the replica" in late_err

    starts = read_vllm_stand_in_log(replica.log)
    assert sorted(start.rank for start in starts if start.rank is not None) == [0, 1, 2]
    for start in starts:
        assert start.args is not None
        assert start.argv[:3] == ("vllm", "serve", MODEL)
        assert (start.args.model, start.args.served_name, start.args.nnodes) == (MODEL, ALIAS, 3)
        assert (start.args.tensor_parallel_size, start.args.pipeline_parallel_size) == (2, 3)
        assert (start.args.master_addr, start.args.master_port) == ("127.0.0.1", replica.master_port)
        assert start.args.distributed_executor_backend == "mp"
        assert start.args.headless is (start.rank != 0)
        assert start.args.engine_args == ENGINE_ARGS
        assert (start.api_key_set, start.error, start.slurm_procid, start.cuda_visible_devices) == (
            True,
            None,
            None,
            None,
        )
        assert start.pid in {rank.process.pid for rank in replica.ranks}
    assert KEY not in replica.log.read_text()


@dataclass(frozen=True)
class Refusal:
    """A rank set: rank 0's flags and env, the other ranks' (node rank, flags, env); the message rank 0 prints;
    rank 0's exit code, then each other rank's."""

    nnodes: int
    others: Sequence[tuple[int, dict[str, Any], dict[str, str]]]
    message: str
    codes: Sequence[int]
    head: dict[str, Any] = field(default_factory=dict)
    head_env: dict[str, str] = field(default_factory=dict)
    join_timeout_s: str = "10"


REFUSED = EXIT_RANKS_REFUSED
REFUSALS = {
    "a rank never joins": Refusal(
        2, [], "node ranks [1] did not join within 1s (joined: none)", [EXIT_RANKS_MISSING], join_timeout_s="1"
    ),
    "one of two never joins": Refusal(
        3,
        [(1, {}, {})],
        "node ranks [2] did not join within 1s (joined: [1])",
        [EXIT_RANKS_MISSING] * 2,
        join_timeout_s="1",
    ),
    "two ranks share a node rank": Refusal(
        3, [(1, {}, {}), (1, {}, {})], "two ranks with --node-rank 1 (the other is node rank 1 (", [REFUSED] * 3
    ),
    "node rank not below nnodes": Refusal(2, [(2, {}, {})], "--node-rank 2 is not below --nnodes 2", [REFUSED] * 2),
    "mismatched nnodes": Refusal(2, [(1, {"nnodes": 3}, {})], "--nnodes 3 but rank 0 has 2", [REFUSED] * 2),
    "mismatched model, parallelism and served name": Refusal(
        2,
        [(1, {"model": "org/other", "tp": 4, "pp": 3, "alias": "reader"}, {})],
        "the model 'org/other' but rank 0 has 'org/model-a'; --tensor-parallel-size 4 but rank 0 has 2; "
        "--pipeline-parallel-size 3 but rank 0 has 2; --served-model-name 'reader' but rank 0 has 'writer'",
        [REFUSED] * 2,
    ),
    "headless on rank 0": Refusal(2, [], "--headless on node rank 0", [REFUSED], head={"headless": True}),
    "headless missing on rank 1": Refusal(
        2, [(1, {"headless": False}, {})], "--headless is missing on node rank 1", [REFUSED] * 2
    ),
    "GPUs do not split over the nodes": Refusal(
        2, [], "= 3 GPUs do not split over --nnodes 2", [REFUSED], head={"tp": 3, "pp": 1}
    ),
    "a backend other than mp": Refusal(
        2, [], "--distributed-executor-backend 'ray' over 2 nodes", [REFUSED], head={"backend": "ray"}
    ),
    "a headless rank sees too many GPUs": Refusal(
        2,
        [(1, {}, {"CUDA_VISIBLE_DEVICES": "0,1,2"})],
        "CUDA_VISIBLE_DEVICES='0,1,2' lists 3 GPUs, not the 2 of each node",
        [REFUSED] * 2,
        head_env={"CUDA_VISIBLE_DEVICES": "3,4"},
    ),
    "rank 0 sees too many GPUs": Refusal(
        2, [], "lists 1 GPUs, not the 2 of each node", [REFUSED], head_env={"CUDA_VISIBLE_DEVICES": "0"}
    ),
    "a second rank 0": Refusal(2, [(0, {}, {})], "a second node rank 0 (the first is node rank 0 (", [REFUSED] * 2),
}


@pytest.mark.parametrize("case", REFUSALS.values(), ids=REFUSALS.keys())
def test_an_inconsistent_rank_set_is_refused(replica: Replica, case: Refusal) -> None:
    """The headless ranks start first (they retry until rank 0 listens); a second rank 0 once the first does. Only
    rank 0 has the case's join timeout: the others wait long enough to be told."""
    timeout = {VLLM_STAND_IN_JOIN_TIMEOUT_ENV: "10"}
    others = []
    for rank, flags, env in case.others:
        if rank > 0:
            options = {name: value for name, value in flags.items() if name != "nnodes"}
            others.append(replica.start(rank, flags.get("nnodes", case.nnodes), env=env | timeout, **options))
    wait_logged(replica.log, len(others))
    head_timeout = {VLLM_STAND_IN_JOIN_TIMEOUT_ENV: case.join_timeout_s}
    head = replica.start(0, case.nnodes, env=case.head_env | head_timeout, **case.head)
    for rank, flags, env in case.others:
        if rank == 0:
            wait_until_listening(replica.master_port)
            others.append(replica.start(0, case.nnodes, env=env | timeout, **flags))
    code, stderr = head.finish()
    assert code == case.codes[0], stderr
    assert case.message in stderr
    outcomes = [other.finish() for other in others]
    assert [code for code, _ in outcomes] == list(case.codes[1:]), outcomes
    for code, stderr in outcomes:
        assert case.message in stderr, stderr
        assert "rank 0 refused the rank set: " in stderr or code != REFUSED, stderr


def wait_until_listening(port: int, timeout_s: float = 10) -> None:
    """Connect until something listens on ``port`` (a connection that says nothing: rank 0 ignores it)."""
    deadline = time.monotonic() + timeout_s
    while not listening(port):
        assert time.monotonic() < deadline, f"nothing listens on {port}"
        time.sleep(0.05)


def test_a_malformed_hello_is_refused_and_a_silent_connection_ignored(replica: Replica) -> None:
    head = replica.start(0, 2)
    wait_until_listening(replica.master_port)
    with socket.create_connection(("127.0.0.1", replica.master_port)) as stray:
        stray.sendall(b"GET / HTTP/1.0\n")
        code, stderr = head.finish()
    assert code == EXIT_RANKS_REFUSED
    assert "rank set refused: a malformed message from a connection from 127.0.0.1:" in stderr


def joined(replica: Replica, nnodes: int, env: Mapping[str, str] | None = None) -> Rank:
    head = replica.start(0, nnodes, env=env)
    for rank in range(1, nnodes):
        replica.start(rank, nnodes, env=env)
    wait_ready(head)
    return head


def test_a_killed_headless_rank_ends_rank_zero_and_then_the_others(replica: Replica) -> None:
    joined(replica, 3)
    replica.ranks[2].process.kill()
    (code, stderr), (other, other_err) = replica.ranks[0].finish(5), replica.ranks[1].finish(5)
    assert code == EXIT_RANK_LOST, stderr
    assert "node rank 2 (" in stderr
    assert "went away: the replica is lost" in stderr
    assert other == EXIT_HEAD_LOST, other_err
    assert "rank 0 went away: this rank ends with it" in other_err


def test_a_killed_rank_zero_ends_every_headless_rank(replica: Replica) -> None:
    head = joined(replica, 3)
    head.process.kill()
    for rank in replica.ranks[1:]:
        code, stderr = rank.finish(5)
        assert code == EXIT_HEAD_LOST, stderr


def test_a_late_rank_is_refused_and_rank_zero_serves_on(replica: Replica) -> None:
    head = joined(replica, 2)
    code, stderr = replica.start(1, 2).finish()
    assert code == EXIT_RANKS_REFUSED, stderr
    assert "rank 0 refused the rank set: a connection from 127.0.0.1:" in stderr
    assert "came after all 2 ranks joined" in stderr
    assert call(head.url, "/v1/models")[0] == 200
    assert head.process.poll() is None


def test_a_stopped_headless_rank_stops_the_replica_gracefully(replica: Replica) -> None:
    joined(replica, 2)
    replica.ranks[1].process.send_signal(signal.SIGTERM)
    (code, stderr), (headless, headless_err) = replica.ranks[0].finish(), replica.ranks[1].finish()
    assert (code, headless) == (0, 0), (stderr, headless_err)
    assert "node rank 1 (" in stderr
    assert "was stopped: stopping the replica" in stderr


def test_the_crash_rank_knob_kills_that_rank_after_the_join(replica: Replica) -> None:
    joined(replica, 2, env={VLLM_STAND_IN_CRASH_RANK_ENV: "1", VLLM_STAND_IN_CRASH_RANK_AFTER_ENV: "0.3"})
    (code, stderr), (crashed, crashed_err) = replica.ranks[0].finish(), replica.ranks[1].finish()
    assert crashed == EXIT_CRASHED, crashed_err
    assert f"simulated crash ({VLLM_STAND_IN_CRASH_RANK_ENV}=1)" in crashed_err
    assert code == EXIT_RANK_LOST, stderr


@pytest.mark.parametrize("nnodes_flag", [False, True], ids=["no --nnodes", "--nnodes 1"])
def test_one_node_serves_without_a_rendezvous_and_takes_the_knobs(replica: Replica, nnodes_flag: bool) -> None:
    knobs = {VLLM_STAND_IN_START_DELAY_ENV: "0.5", VLLM_STAND_IN_CRASH_AFTER_ENV: "1", "VLLM_API_KEY": ""}
    port = closed_port()
    argv = serve_argv(0, 1, api_port=port, master_port=replica.master_port)
    if nnodes_flag:
        argv[3:3] = ["--nnodes", "1"]
    env = environment(replica.stand_in, replica.log, **knobs)
    rank = Rank(subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True), port)
    replica.ranks.append(rank)
    wait_ready(rank)
    ready_at = call(rank.url, "/health", key=None)[1]["ready_at"]
    assert call(rank.url, "/v1/chat/completions", chat(), key=None)[0] == 200  # no key set: none required
    code, stderr = rank.finish()
    assert code == EXIT_CRASHED, stderr
    (start,) = read_vllm_stand_in_log(replica.log)
    assert ready_at - datetime.fromisoformat(start.time.replace("Z", "+00:00")).timestamp() >= 0.5
    assert start.args is not None
    assert (start.args.nnodes, start.args.headless, start.api_key_set) == (1, False, False)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", MODEL, "--nnodes", "two"], "argument --nnodes/-n: invalid int value: 'two'"),
        (["serve", MODEL, "--node-rank"], "argument --node-rank/-r: expected one argument"),
        (["serve", MODEL, "--master-port", "0"], "argument --master-port: 0 is not in [1, 65535]"),
        (["serve", MODEL, "--headless=yes"], "argument --headless: ignored explicit argument 'yes'"),
        (["serve", MODEL, "--distributed-executor-backend", "torch"], "invalid choice: 'torch'"),
        (["serve", MODEL, "--api-key", "sekrit-on-argv"], "--api-key on the command line"),
        (["serve"], "the following arguments are required: model_tag"),
        (["chat", MODEL], "only 'serve' is played, not ['chat']"),
    ],
)
def test_a_malformed_command_line_exits_2_as_vllm_does(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "starts.jsonl"
    monkeypatch.setenv(VLLM_STAND_IN_LOG_ENV, str(log))
    assert main(argv) == EXIT_BAD_ARGUMENTS
    assert message in capsys.readouterr().err
    if argv[0] == "serve":
        (start,) = read_vllm_stand_in_log(log)
        assert (start.args, start.rank) == (None, None)
        assert start.error is not None
        assert message in start.error
    assert "sekrit-on-argv" not in (log.read_text() if log.exists() else "")


def test_a_bad_knob_exits_2_naming_it(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(VLLM_STAND_IN_JOIN_TIMEOUT_ENV, "soon")
    assert main(["serve", MODEL]) == EXIT_BAD_ARGUMENTS
    assert f"{VLLM_STAND_IN_JOIN_TIMEOUT_ENV}='soon' is not a number" in capsys.readouterr().err


def test_the_parser_knows_every_flag_the_planner_reserves_and_keeps_the_rest() -> None:
    known = set(_serve_parser()._option_string_actions)
    assert set(RENDERED_FLAGS) | set(MULTI_NODE_FLAGS) <= known
    words = [MODEL, "-tp", "2", "--pipeline-parallel-size=2", "--gpu-memory-utilization", "0.9", "--nnodes", "2"]
    words += [
        "--compilation-config.mode=3",
        "--enforce-eager",
        "--node-rank",
        "1",
        "--headless",
        "--max-model-len",
        "8",
    ]
    args = parse_serve(words)
    assert (args.tensor_parallel_size, args.pipeline_parallel_size, args.nnodes, args.node_rank) == (2, 2, 2, 1)
    assert (args.headless, args.served_name, args.gpus, args.master_port, args.port) == (True, MODEL, 4, 29501, 8000)
    assert args.engine_args == (
        "--gpu-memory-utilization",
        "0.9",
        "--compilation-config.mode=3",
        "--enforce-eager",
        "--max-model-len",
        "8",
    )
    assert args.engine_options() == {
        "--gpu-memory-utilization": "0.9",
        "--compilation-config.mode": "3",
        "--enforce-eager": True,
        "--max-model-len": "8",
    }


def test_the_installed_script_sets_defaults_the_environment_overrides(tmp_path: Path) -> None:
    directory = install_vllm_stand_in(tmp_path / "bin", knobs={VLLM_STAND_IN_JOIN_TIMEOUT_ENV: "0.3"})
    script = directory / "vllm"
    assert directory.is_absolute()
    assert script.stat().st_mode & 0o777 == 0o755
    env = environment(directory, tmp_path / "unused.jsonl")
    env.pop(VLLM_STAND_IN_JOIN_TIMEOUT_ENV)
    env.pop(VLLM_STAND_IN_LOG_ENV)  # the installed default: <directory>/vllm-stand-in.jsonl
    argv = ["vllm", "serve", MODEL, "-tp", "2", "--nnodes", "2", "--distributed-executor-backend", "mp"]
    argv += ["--master-port", str(closed_port()), "--port", str(closed_port())]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=20, check=False)
    assert done.returncode == EXIT_RANKS_MISSING, done.stderr
    assert "node ranks [1] did not join within 0.3s" in done.stderr
    (start,) = read_vllm_stand_in_log(directory / VLLM_STAND_IN_LOG_NAME)
    assert start.argv == tuple(argv)
    version = subprocess.run(["vllm", "--version"], env=env, capture_output=True, text=True, timeout=20, check=True)
    assert version.stdout.strip() == "0.0.0+ddslurm.stand.in"
    with pytest.raises(ValueError, match="not stand-in knobs: \\['DDSLURM_VLLM_STAND_IN_TYPO'\\]"):
        vllm_stand_in_script(directory, python="python3", log=None, knobs={"DDSLURM_VLLM_STAND_IN_TYPO": "1"})
