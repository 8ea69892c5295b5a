"""Argv templates of a plan: server argv (vLLM, command templates) and the client worker's argv (pure).

Every argv in a plan is a ``str.format``-style template over a fixed set of names bound inside
the allocation: ``{host}`` and ``{port}`` for servers (:data:`SERVER_BOUND_NAMES`; the port is
probed), plus ``{master_addr}`` and ``{master_port}`` in the rank argvs of a replica that spans nodes,
``{shard}`` and ``{attempt}`` for the client (:data:`CLIENT_BOUND_NAMES`). Every brace of
authored text is doubled, so :func:`bind_argv` gives back authored text byte for byte, whatever it
holds. No argv ever passes through a shell.

No argv carries a secret: an argv is readable by every user of a node (``/proc/<pid>/cmdline``,
``ps``). A replica that listens beyond loopback gets a per-attempt key generated in the allocation
in the variable :data:`SERVER_API_KEY_ENV`; a vLLM replica reads it from ``VLLM_API_KEY``
(:data:`VLLM_API_KEY_ENV`), which the replica's launcher sets from that variable, so the planner
writes no ``--api-key`` flag.

**A vLLM replica that spans nodes** runs as vLLM documents it for its multiprocessing backend: one
``vllm serve`` per node, each with ``--distributed-executor-backend mp --nnodes N --node-rank R
--master-addr {master_addr} --master-port {master_port}``, where rank 0 serves the API and every
other rank adds ``--headless``. The plan holds each rank's argv (``ReplicaPlan.rank_argv``); the
launcher of the step's task ``R`` execs rank ``R``'s, binding the address of the step's first node
(resolved by the supervisor in the allocation) and the rendezvous port rank 0's launcher probed.

A ``command`` deployment's argv is itself a template: ``{host}`` and ``{port}`` stay for the
allocation; ``{model}``, ``{gpus}`` (the replica's GPU count), ``{served_name}`` (the alias) and
``{api_key_env}`` (:data:`SERVER_API_KEY_ENV`, the *name* of the variable holding a remote
replica's key) are substituted here; ``{{`` and ``}}`` are literal braces; anything else is an
input error naming the argv element (``{api_key}`` too, with a hint towards ``{api_key_env}``: the
key's value never goes on an argv).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence

from data_designer.slurm.contracts import CommandDeployment, KeyPath, Problem, VllmDeployment, excerpt
from data_designer.slurm.planner._vllm import check_engine_args, render_engine_args

WORKER_MODULE = "data_designer.slurm.runtime.worker"
"""The client worker the supervisor starts in each allocation (written with the runtime)."""
SERVER_API_KEY_ENV = "DDSLURM_SERVER_API_KEY"
"""The variable the allocation sets to a per-attempt key for replicas that listen beyond loopback."""
VLLM_API_KEY_ENV = "VLLM_API_KEY"
"""The variable vLLM's OpenAI-compatible server reads its API key from (set by the launcher, never on argv)."""
SERVER_BOUND_NAMES = frozenset({"host", "port", "master_addr", "master_port"})
CLIENT_BOUND_NAMES = frozenset({"shard", "attempt"})

_FORMATTER = string.Formatter()
_LEFT_FOR_ALLOCATION = ("host", "port")


def escape_braces(text: str) -> str:
    """``text`` as a literal inside an argv template."""
    return text.replace("{", "{{").replace("}", "}}")


def bind_argv(argv: Sequence[str], values: Mapping[str, str]) -> tuple[str, ...]:
    """Bind a plan's argv template: ``{name}`` -> ``values[name]``, ``{{``/``}}`` -> braces. KeyError on a missing name."""
    out = []
    for element in argv:
        parts = []
        for literal, field, _spec, _conversion in _FORMATTER.parse(element):
            parts.append(literal)
            if field is not None:
                parts.append(values[field])
        out.append("".join(parts))
    return tuple(out)


def _problem(code: str, key_path: KeyPath, message: str, hint: str) -> Problem:
    return Problem(code=code, key_path=key_path, message=message, hint=hint)


def vllm_argv(
    alias: str, deployment: VllmDeployment, *, nodes: int, version: str | None, problems: list[Problem]
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """(argv, rank argvs): ``vllm serve MODEL`` with the flags the runtime controls, then the engine args (authored
    braces doubled), checked against the ``vllm serve`` of ``version`` (a key of the flag data; ``None``: every
    supported version). ``nodes`` > 1: one argv per node rank (see the module docstring); else no rank argvs.

    Whether the replica listens beyond loopback changes nothing here: its key reaches vLLM as ``VLLM_API_KEY`` in
    the environment, never as ``--api-key`` on the argv.
    """
    path = ("deployments", alias, "engine_args")
    found = check_engine_args(deployment.engine_args, path=path, version=version)
    problems.extend(found)
    if deployment.model.startswith("-"):
        problems.append(
            _problem(
                "model_dash",
                ("deployments", alias, "model"),
                f"model {excerpt(deployment.model)} starts with '-' and would be read as an option",
                "write a path or a Hugging Face id",
            )
        )
    argv = [
        "vllm",
        "serve",
        escape_braces(deployment.model),
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--tensor-parallel-size",
        str(deployment.tensor_parallel),
        "--pipeline-parallel-size",
        str(deployment.pipeline_parallel),
        "--served-model-name",
        escape_braces(alias),
    ]
    engine = (
        [escape_braces(word) for word in render_engine_args(deployment.engine_args, path=path, version=version)]
        if not found
        else []
    )
    if nodes <= 1:
        return (*argv, *engine), ()
    ranks = tuple((*argv, *multi_node_flags(nodes, rank), *engine) for rank in range(nodes))
    return ranks[0], ranks


def multi_node_flags(nodes: int, rank: int) -> tuple[str, ...]:
    """What rank ``rank`` of a vLLM replica over ``nodes`` nodes adds to the fixed flags (all in ``MULTI_NODE_FLAGS``)."""
    flags = (
        *("--distributed-executor-backend", "mp", "--nnodes", str(nodes), "--node-rank", str(rank)),
        *("--master-addr", "{master_addr}", "--master-port", "{master_port}"),
    )
    return (*flags, "--headless") if rank else flags


def command_argv(alias: str, deployment: CommandDeployment, *, gpus: int, problems: list[Problem]) -> tuple[str, ...]:
    """The deployment's argv template with what is known at plan time substituted (see the module docstring)."""
    known = {
        "model": deployment.model,
        "gpus": str(gpus),
        "served_name": alias,
        "api_key_env": SERVER_API_KEY_ENV,
    }
    out: list[str] = []
    for index, template in enumerate(deployment.argv):
        key_path: KeyPath = ("deployments", alias, "argv", index)
        try:
            parsed = list(_FORMATTER.parse(template))
        except ValueError as exc:
            problems.append(
                _problem(
                    "argv_template",
                    key_path,
                    f"{excerpt(template)} is not a valid template: {exc}",
                    "write placeholders as {host}, and literal braces as {{ and }}",
                )
            )
            continue
        parts: list[str] = []
        for literal, field, spec, conversion in parsed:
            parts.append(escape_braces(literal))
            if field is None:
                continue
            if field == "api_key" and not (spec or conversion):
                problems.append(
                    _problem(
                        "api_key_on_argv",
                        key_path,
                        f"{excerpt(template)} puts the server's API key on the command line, where every user of the node "
                        "can read it",
                        "pass {api_key_env} (the name of the variable holding the key) to a server that reads its "
                        "key from a variable, or wrap the server in a script that reads it",
                    )
                )
                continue
            if spec or conversion or (field not in known and field not in _LEFT_FOR_ALLOCATION):
                written = field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
                problems.append(
                    _problem(
                        "unknown_placeholder",
                        key_path,
                        f"{excerpt(template)} uses the unknown placeholder {{{written}}}",
                        "use only {host}, {port}, {model}, {gpus}, {served_name} and {api_key_env}; "
                        "write literal braces as {{ and }}",
                    )
                )
                continue
            parts.append("{" + field + "}" if field in _LEFT_FOR_ALLOCATION else escape_braces(known[field]))
        out.append("".join(parts))
    return tuple(out)


def client_argv(python: str) -> tuple[str, ...]:
    """The client worker's argv template: the compute Python, the worker module, the plan, shard and attempt."""
    return (
        escape_braces(python),
        "-m",
        WORKER_MODULE,
        "--plan",
        "plan.json",
        "--shard",
        "{shard}",
        "--attempt",
        "{attempt}",
    )
