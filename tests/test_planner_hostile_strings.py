"""Hostile strings in every authored field that reaches an argument never meet a shell.

A run and a profile carry ``$(touch ...)``, backticks, quotes, ``;``, ``&`` (and more) in every
field that becomes a process argument, the script's interpreter path included. The rendered batch
script is run with bash as Slurm would run it; the interpreter is a stand-in supervisor at that
hostile path which reads ``plan.json``, binds the argv templates and starts every replica and the
client through a stub ``srun`` on PATH, without a shell, as the real supervisor will. Nothing may be
created by the hostile text, and every argv must arrive byte for byte as authored.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts import ClusterProfile, ExecutionPlan, ImageRecord
from data_designer.slurm.planner import compile, load_run, resolve_config

HOSTILE = "$(touch PWNED1) `touch PWNED2` 'single' \"double\" ; touch PWNED3 & | > PWNED4 \\ * ~ {{x}} é"
"""In a command argv template ``{{x}}`` is an escaped literal ``{x}``; everywhere else it is delivered as written."""


URL_HOSTILE = "$(touch:PWNED5);x='1'&y=*~+,!"
"""The shell metacharacters a URL path may hold (health paths and endpoints are URLs, not free text)."""


def hostile(tag: str) -> str:
    return f"{tag} {HOSTILE}"


def literal(tag: str) -> str:
    """What a hostile command argv template reads as once bound (its escaped braces become single)."""
    return hostile(tag).replace("{{x}}", "{x}")


SUPERVISOR = """#!{python}
# A stand-in for data_designer.slurm.runtime.supervisor at a hostile path: dump argv, read the
# plan, bind every argv template and start it through `srun` without a shell.
import json, os, subprocess, sys
from data_designer.slurm.contracts import ExecutionPlan
from data_designer.slurm.planner import bind_argv

dump = os.environ["HOSTILE_DUMP"]
if sys.argv[1:2] == ["-c"]:  # the script's preflight import check
    with open(os.path.join(dump, "preflight.json"), "w", encoding="utf-8") as out:
        json.dump(sys.argv, out)
    sys.exit(0)
with open(os.path.join(dump, "supervisor.json"), "w", encoding="utf-8") as out:
    json.dump(sys.argv, out)
plan = ExecutionPlan.model_validate_json(open(sys.argv[sys.argv.index("--plan") + 1], encoding="utf-8").read())
for replica in plan.allocation.replicas:
    argv = bind_argv(replica.argv, {{"host": "127.0.0.1", "port": "8000", "api_key": "k"}})
    env = {{**os.environ, **replica.environment}}
    subprocess.run(["srun", "--overlap", "--", *argv], check=True, env=env)
client = bind_argv(plan.allocation.client.argv, {{"shard": "0", "attempt": "1"}})
subprocess.run(["srun", "--overlap", "--", *client], check=True)
"""

SRUN = """#!{python}
import json, os, sys
with open(os.path.join(os.environ["HOSTILE_DUMP"], "srun.jsonl"), "a", encoding="utf-8") as out:
    out.write(json.dumps({{"argv": sys.argv[1:], "hf_home": os.environ.get("HF_HOME")}}) + "\\n")
"""


def _executable(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _run_document() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "name": "hostile",
        "data_designer": {
            "inline": {
                "model_configs": [
                    {"alias": "writer", "model": "m"},
                    {"alias": "tool", "model": "m"},
                    {"alias": "remote", "model": hostile("config-model")},
                ],
                "columns": [
                    {"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": HOSTILE},
                    {"name": "b", "column_type": "llm-text", "model_alias": "tool", "prompt": "p"},
                    {"name": "c", "column_type": "llm-text", "model_alias": "remote", "prompt": "p"},
                ],
            }
        },
        "records": 4,
        "sharding": {"shards": 2},
        "deployments": {
            "writer": {
                "engine": "vllm",
                "model": hostile("model"),
                "image": "/images/" + hostile("image"),
                "engine_args": {"chat-template": hostile("engine-arg"), "max-num-seqs": 4},
            },
            "tool": {
                "engine": "command",
                "argv": [hostile("argv0"), "--listen={host}:{port}", hostile("argv2"), "{model}"],
                "model": hostile("command-model"),
                "gpus_per_replica": 0,
                "health_path": "/health/" + URL_HOSTILE,
            },
        },
        "external": {"remote": {"endpoint": "https://h.example/" + URL_HOSTILE, "model": hostile("external-model")}},
        "client": {"image": "/images/" + hostile("client-image"), "cpus": 1},
        "submission": {
            "partition": hostile("partition"),
            "account": hostile("account"),
            "sbatch_options": ["--comment=" + hostile("option")],
        },
    }


def _compile(interpreter: str) -> ExecutionPlan:
    run = load_run(json.dumps(_run_document()), file="run.json")
    profile = ClusterProfile.model_validate(
        {
            "workspace_root": "/ws",
            "partitions": {"gpu": "gpu", "cpu": "cpu"},
            "gpus_per_node": 2,
            "container_runtime": "pyxis",
            "compute_python": {"interpreter": interpreter},
            "sbatch_options": ["--comment=" + hostile("profile-option")],
            "huggingface": {"hf_home": "/hf/" + hostile("hf-home")},
        }
    )
    images: list[ImageRecord] = []
    return compile(run, profile, cluster="c", config=resolve_config(run), images=images)


def test_hostile_strings_reach_every_argv_byte_for_byte_and_run_nothing(tmp_path: Path) -> None:
    home = tmp_path / hostile("dir").replace("/", "_")
    home.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    interpreter = home / "python"
    _executable(interpreter, SUPERVISOR.format(python=sys.executable))
    _executable(bin_dir / "srun", SRUN.format(python=sys.executable))
    dump = tmp_path / "dump"
    dump.mkdir()
    work = tmp_path / "run"
    work.mkdir()

    plan = _compile(str(interpreter))
    assert plan.submission.script is not None
    (work / "plan.json").write_text(plan.model_dump_json(), encoding="utf-8")
    (work / "job.sh").write_text(plan.submission.script, encoding="utf-8")

    assert plan.submission.sbatch_args == (
        "--comment=" + hostile("profile-option"),
        "--comment=" + hostile("option"),
        "--partition=" + hostile("partition"),
        "--account=" + hostile("account"),
    )
    assert HOSTILE not in plan.submission.script.replace(str(interpreter), "")

    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOSTILE_DUMP": str(dump)}
    done = subprocess.run(
        ["bash", "job.sh"], cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr

    created = sorted(p.name for p in tmp_path.rglob("PWNED*")) + sorted(p.name for p in Path.cwd().glob("PWNED*"))
    assert created == []

    preflight = json.loads((dump / "preflight.json").read_text(encoding="utf-8"))
    assert preflight == [str(interpreter), "-c", "import data_designer.slurm.runtime.supervisor"]
    supervisor = json.loads((dump / "supervisor.json").read_text(encoding="utf-8"))
    assert supervisor == [str(interpreter), "-m", "data_designer.slurm.runtime.supervisor", "--plan", "plan.json"]

    calls = [json.loads(line) for line in (dump / "srun.jsonl").read_text(encoding="utf-8").splitlines()]
    vllm, command, client = (call["argv"][2:] for call in calls)
    assert calls[0]["argv"][:2] == ["--overlap", "--"]
    assert vllm[:3] == ["vllm", "serve", hostile("model")]
    assert vllm[vllm.index("--chat-template") + 1] == hostile("engine-arg")
    assert vllm[vllm.index("--host") + 1] == "127.0.0.1"
    assert command == [literal("argv0"), "--listen=127.0.0.1:8000", literal("argv2"), hostile("command-model")]
    assert client[:3] == ["python3", "-m", "data_designer.slurm.runtime.worker"]
    assert calls[0]["hf_home"] == "/hf/" + hostile("hf-home")

    replicas = plan.allocation.replicas
    assert replicas[1].health_path == "/health/" + URL_HOSTILE
    assert replicas[0].image is not None
    assert replicas[0].image.path == "/images/" + hostile("image")
    assert plan.allocation.client.image is not None
    assert plan.allocation.client.image.path == "/images/" + hostile("client-image")
    remote = plan.allocation.client.endpoints[2]
    assert (remote.endpoint, remote.model) == ("https://h.example/" + URL_HOSTILE, hostile("external-model"))


@pytest.mark.parametrize("bad", ["a\nb", "a\x00b", "a\rb", "a\x1bb"])
def test_control_characters_in_argument_fields_are_input_errors(bad: str) -> None:
    from data_designer.slurm.contracts import InvalidInputError

    document = _run_document()
    document["deployments"]["writer"]["model"] = bad
    with pytest.raises(InvalidInputError) as caught:
        load_run(json.dumps(document), file="run.json")
    assert [p.key_path for p in caught.value.problems] == [("deployments", "writer", "model")]
