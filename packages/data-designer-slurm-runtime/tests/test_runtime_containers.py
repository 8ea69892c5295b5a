"""Containers for replicas and the client: the exact pyxis/apptainer command lines (golden files), mounts, and the
PATH shims (``runtime.testing.install_shims``) that run the container code path where no container runtime exists.

Accept an intended change of the command lines with one line (then review the diff):

    UPDATE_GOLDEN=1 uv run pytest packages/data-designer-slurm-runtime/tests/test_runtime_containers.py
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from data_designer.slurm.contracts import ClusterProfile, ExecutionPlan, ImagePlan, InternalError, ReplicaPlan
from data_designer.slurm.planner import bind_argv, compile, load_run, resolve_config
from data_designer.slurm.runtime.store import RunLayout
from data_designer.slurm.runtime.supervisor._containers import (
    LAUNCHER_FILE,
    ContainerSite,
    Mount,
    client_command,
    container_site,
    mounts,
    replica_mounts,
)
from data_designer.slurm.runtime.supervisor._environment import SetupError
from data_designer.slurm.runtime.supervisor._replicas import srun_argv
from data_designer.slurm.runtime.testing import SHIM_LOG_ENV, SHIM_LOG_NAME, SHIM_TOOLS, install_shims, read_shim_log

GOLDEN = Path(__file__).resolve().parent / "golden" / "containers"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
PYTHON = "/opt/ddslurm/bin/python"
LAUNCHER = Path("/opt/ddslurm/lib/python3.11/site-packages/data_designer/slurm/runtime/_launch.py")
"""The launcher where the goldens install it: the installed file's real place would reorder the sorted mounts."""
LAYOUT = RunLayout.of("/shared/ws", "containers-20261129T120000Z-abcdef")
PORT_DIR = LAYOUT.attempt_dir(0, 1) / "ports"
JOB_ENV = {"SLURM_JOB_GPUS": "0,1", "SLURM_MEM_PER_NODE": "32000", "SLURM_CPUS_ON_NODE": "8"}
Runtime = Literal["pyxis", "apptainer"]


def container_plan(runtime: Runtime) -> ExecutionPlan:
    """Three aliases in images: ``writer`` (one GPU, model by path), ``tools`` (no GPU, model by name) and ``big``
    (2 x 2 GPUs: a replica over two nodes, listening beyond loopback); the client in an image too."""
    suffix = "sqsh" if runtime == "pyxis" else "sif"
    columns = [
        {"name": f"c_{alias}", "column_type": "llm-text", "model_alias": alias, "prompt": "Say something."}
        for alias in ("writer", "tools", "big")
    ]
    command = ["tool-server", "--host", "{host}", "--port", "{port}", "--model", "{model}", "--json={{}}"]
    run = {
        "schema_version": 1,
        "name": "containers",
        "data_designer": {
            "inline": {
                "model_configs": [
                    {"alias": "writer", "model": "writer-8b", "provider": "local"},
                    {"alias": "tools", "model": "tools", "provider": "local"},
                    {"alias": "big", "model": "big-70b", "provider": "local"},
                ],
                "columns": columns,
            }
        },
        "records": 8,
        "sharding": {"shards": 1},
        "deployments": {
            "writer": {
                "engine": "vllm",
                "model": "/models/writer-8b",
                "cpus_per_replica": 2,
                "image": f"/images/vllm.{suffix}",
            },
            "tools": {
                "engine": "command",
                "argv": command,
                "model": "tools",
                "gpus_per_replica": 0,
                "image": f"/images/tools.{suffix}",
            },
            "big": {
                "engine": "vllm",
                "model": "/models/big-70b",
                "tensor_parallel": 2,
                "pipeline_parallel": 2,
                "cpus_per_replica": 2,
                "image": f"/images/vllm.{suffix}",
            },
        },
        "client": {"cpus": 2, "memory_gb": 4, "image": f"/images/client.{suffix}"},
    }
    profile = ClusterProfile.model_validate(
        {
            "workspace_root": str(LAYOUT.root),
            "partitions": {"gpu": "gpu", "cpu": "cpu"},
            "gpus_per_node": 2,
            "container_runtime": runtime,
            "compute_python": {"interpreter": PYTHON},
            "huggingface": {"hf_home": "/shared/hf-cache", "offline": True},
        }
    )
    spec = load_run(json.dumps(run), file="run.json")
    return compile(spec, profile, cluster="golden", config=resolve_config(spec))


def replica_of(plan: ExecutionPlan, alias: str) -> ReplicaPlan:
    return next(r for r in plan.allocation.replicas if r.alias == alias)


def check_golden(name: str, argv: list[str]) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(argv, indent=2) + "\n"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"{path.name} is missing; accept it with UPDATE_GOLDEN=1"
    assert path.read_text(encoding="utf-8") == text, f"{path.name} changed; if intended, accept with UPDATE_GOLDEN=1"


def replica_argv(runtime: Runtime, alias: str, *, launcher: Path = LAUNCHER) -> list[str]:
    plan = container_plan(runtime)
    site = dataclasses.replace(container_site(plan, LAYOUT), launcher=launcher)
    replica = replica_of(plan, alias)
    return srun_argv(replica, python=PYTHON, port_dir=PORT_DIR, environ=JOB_ENV, site=site, master_addr=MASTER_ADDR)


MASTER_ADDR = "10.0.0.2"
REPLICA_CASES = {"gpu": "writer", "cpu": "tools", "multinode": "big"}
CLIENT_ARGV = bind_argv(container_plan("pyxis").allocation.client.argv, {"shard": "0", "attempt": "1"})


@pytest.mark.parametrize("runtime", ["pyxis", "apptainer"])
@pytest.mark.parametrize("case", sorted(REPLICA_CASES))
def test_a_replica_step_in_an_image_is_pinned(runtime: Runtime, case: str) -> None:
    check_golden(f"replica-{runtime}-{case}", replica_argv(runtime, REPLICA_CASES[case]))


@pytest.mark.parametrize("runtime", ["pyxis", "apptainer"])
def test_the_client_in_an_image_is_pinned(runtime: Runtime) -> None:
    plan = container_plan(runtime)
    check_golden(f"client-{runtime}", client_command(plan, CLIENT_ARGV, layout=LAYOUT, environ=JOB_ENV))


def test_no_golden_file_is_left_without_its_case() -> None:
    cases = {f"replica-{r}-{c}.json" for r in ("pyxis", "apptainer") for c in REPLICA_CASES}
    cases |= {"client-pyxis.json", "client-apptainer.json"}
    cluster = {"cluster-pyxis.jsonl", "cluster-apptainer.jsonl"}  # tests/cluster/test_cluster_containers.py
    assert sorted(p.name for p in GOLDEN.iterdir() if p.suffix in (".json", ".jsonl")) == sorted(cases | cluster)


def test_pyxis_runs_the_whole_step_in_the_image_with_the_standalone_launcher() -> None:
    argv = replica_argv("pyxis", "big", launcher=LAUNCHER_FILE)
    command = argv.index("python3")
    assert argv[command : command + 3] == ["python3", "-I", str(LAUNCHER_FILE)]
    options = argv[:command]
    assert "--container-image=/images/vllm.sqsh" in options
    assert f"--container-workdir={LAYOUT.run_dir}" in options
    assert "--no-container-mount-home" in options
    mounted = next(o for o in options if o.startswith("--container-mounts=")).split("=", 1)[1].split(",")
    assert mounted == sorted(
        [
            f"{LAUNCHER_FILE.parent}:{LAUNCHER_FILE.parent}:ro",
            "/models/big-70b:/models/big-70b",
            "/shared/hf-cache:/shared/hf-cache",
            "/shared/ws:/shared/ws",
        ]
    )
    # Every rank's server argv template follows unchanged: the launcher binds it inside the container.
    ranks = json.loads(argv[argv.index("--rank-templates") + 1])
    assert ranks == [list(rank) for rank in replica_of(container_plan("pyxis"), "big").rank_argv]
    assert argv[argv.index("--master-addr") + 1] == MASTER_ADDR


def test_apptainer_wraps_the_server_argv_and_the_launcher_binds_through_it() -> None:
    argv = replica_argv("apptainer", "writer")
    assert argv[argv.index("--port-dir") - 3 : argv.index("--port-dir")] == [
        PYTHON,
        "-m",
        "data_designer.slurm.runtime._launch",
    ]
    template = argv[argv.index("--") + 1 :]
    bound = bind_argv(template, {"host": "127.0.0.1", "port": "8000"})
    binds = "/models/writer-8b,/shared/hf-cache,/shared/ws"
    assert bound[:8] == ("apptainer", "exec", "--nv", "--bind", binds, "--pwd", str(LAYOUT.run_dir), "/images/vllm.sif")
    assert bound[8:11] == ("vllm", "serve", "/models/writer-8b")
    assert "--nv" not in replica_argv("apptainer", "tools"), "a replica without GPUs gets no --nv"


def test_braces_in_container_words_survive_the_launcher_s_binding(tmp_path: Path) -> None:
    plan = container_plan("apptainer")
    replica = replica_of(plan, "tools")
    image = ImagePlan(reference="/img/{odd}.sif", path="/img/{odd}.sif", runtime="apptainer")
    odd = replica.model_copy(update={"image": image})
    site = ContainerSite(workspace=Path("/ws/{x}"), run_dir=Path("/ws/{x}/runs/r"))
    argv = srun_argv(odd, python=PYTHON, port_dir=PORT_DIR, environ={}, site=site)
    bound = bind_argv(argv[argv.index("--") + 1 :], {"host": "h", "port": "1"})
    binds = "/shared/hf-cache,/ws/{x}"
    assert bound[:7] == ("apptainer", "exec", "--bind", binds, "--pwd", "/ws/{x}/runs/r", "/img/{odd}.sif")
    assert bound[-1] == "--json={}"


def test_mounts_are_absolute_unique_sorted_and_writable_wins() -> None:
    found = mounts([Mount("/b"), Mount("relative"), Mount("/a/"), Mount("/b", read_only=True), Mount("/c", True)])
    assert found == (Mount("/a"), Mount("/b"), Mount("/c", read_only=True))


@pytest.mark.parametrize("path", ["/data/a,b", "/data/a:b"])
def test_a_mount_no_runtime_can_write_ends_the_attempt_as_invalid_config(path: str) -> None:
    with pytest.raises(SetupError) as caught:
        mounts([Mount(path)])
    assert caught.value.status == "invalid_config"
    assert repr(path) in str(caught.value)


def test_a_replica_mounts_hf_home_and_an_absolute_model_only() -> None:
    plan = container_plan("apptainer")
    site = container_site(plan, LAYOUT)
    assert site.model_paths == {"writer": "/models/writer-8b", "big": "/models/big-70b"}
    tools = replica_mounts(replica_of(plan, "tools"), site, launcher=False)
    assert tools == (Mount("/shared/hf-cache"), Mount("/shared/ws"))


def test_without_an_image_nothing_changes() -> None:
    plan = container_plan("pyxis")
    replica = replica_of(plan, "writer").model_copy(update={"image": None})
    plain = srun_argv(replica, python=PYTHON, port_dir=PORT_DIR, environ=JOB_ENV)
    assert plain == srun_argv(
        replica, python=PYTHON, port_dir=PORT_DIR, environ=JOB_ENV, site=container_site(plan, LAYOUT)
    )
    assert not [word for word in plain if word.startswith("--container") or word in ("apptainer", "python3")]
    client = plan.allocation.client.model_copy(update={"image": None})
    bare = plan.model_copy(update={"allocation": plan.allocation.model_copy(update={"client": client})})
    assert client_command(bare, CLIENT_ARGV, layout=LAYOUT, environ=JOB_ENV) == list(CLIENT_ARGV)


def test_a_replica_in_an_image_needs_the_site_and_a_resolved_image() -> None:
    plan = container_plan("pyxis")
    replica = replica_of(plan, "writer")
    with pytest.raises(InternalError, match="ContainerSite"):
        srun_argv(replica, python=PYTHON, port_dir=PORT_DIR, environ=JOB_ENV)
    unresolved = replica.model_copy(update={"image": ImagePlan(reference="vllm", runtime="pyxis")})
    with pytest.raises(SetupError, match="never resolved"):
        srun_argv(unresolved, python=PYTHON, port_dir=PORT_DIR, environ=JOB_ENV, site=container_site(plan, LAYOUT))


def test_a_supervisor_already_in_the_client_s_apptainer_image_runs_the_client_as_is() -> None:
    plan = container_plan("apptainer")
    inside = {**JOB_ENV, "APPTAINER_CONTAINER": "/images/client.sif"}
    assert client_command(plan, CLIENT_ARGV, layout=LAYOUT, environ=inside) == list(CLIENT_ARGV)
    other = {**JOB_ENV, "APPTAINER_CONTAINER": "/images/other.sif"}
    assert client_command(plan, CLIENT_ARGV, layout=LAYOUT, environ=other)[:2] == ["apptainer", "exec"]


def test_the_pyxis_client_step_takes_no_gpu_and_its_planned_memory() -> None:
    argv = client_command(container_plan("pyxis"), CLIENT_ARGV, layout=LAYOUT, environ=JOB_ENV)
    assert argv[: argv.index("python3")][:10] == [
        "srun",
        "--exact",
        "--nodes=1",
        "--ntasks=1",
        "--relative=0",
        "--cpus-per-task=2",
        "--export=ALL",
        "--job-name=client",
        "--kill-on-bad-exit=1",
        "--gres=none",
    ]
    assert [word for word in argv if word.startswith("--mem")] == ["--mem=4000M"]  # client.memory_gb: 4
    without_gres = client_command(container_plan("pyxis"), CLIENT_ARGV, layout=LAYOUT, environ={})
    assert not [word for word in without_gres if word.startswith("--gres")]
    assert [word for word in without_gres if word.startswith("--mem")] == ["--mem=4000M"]


# -- the shims ---------------------------------------------------------------------------------------------------

FAKE_REAL_SRUN = """\
#!/bin/sh
# The "real" srun of these tests: prints its argv (one word a line), its working directory and PATH.
for word in "$@"; do echo "arg:$word"; done
echo "pwd:$PWD"
echo "path:$PATH"
"""


@pytest.fixture
def shims(tmp_path: Path) -> Path:
    return install_shims(tmp_path / "shims")


def shim_env(shims: Path, *before: Path, **extra: str) -> dict[str, str]:
    path = ":".join([str(shims), *(str(p) for p in before), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, **extra}


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_install_writes_three_executable_scripts(tmp_path: Path) -> None:
    directory = install_shims(tmp_path / "a" / "shims")
    assert directory == (tmp_path / "a" / "shims").absolute()
    for tool in SHIM_TOOLS:
        mode = (directory / tool).stat().st_mode
        assert stat.S_IMODE(mode) == 0o755, tool
        assert (directory / tool).read_text().startswith("#!/usr/bin/env bash\n")


def test_the_srun_shim_drops_pyxis_options_and_execs_the_real_srun(tmp_path: Path, shims: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "srun").write_text(FAKE_REAL_SRUN)
    (real / "srun").chmod(0o755)
    argv = ["srun", "--exact", "--job-name=a b", "--container-image=/i.sqsh", "--container-mounts", "/w:/w,/l:/l:ro"]
    argv += ["--container-workdir", str(tmp_path), "--no-container-mount-home", "--container-remap-root"]
    argv += ["python3", "-c", "x", "--container-image=kept"]
    # The shims' directory twice on PATH: it is skipped wherever it appears.
    done = run(argv, shim_env(shims, shims, real), cwd=tmp_path / "shims")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    words = [line.removeprefix("arg:") for line in lines if line.startswith("arg:")]
    assert words == ["--exact", "--job-name=a b", f"--chdir={tmp_path}", "python3", "-c", "x", "--container-image=kept"]
    assert f"path:{shims}:" in done.stdout, "PATH is passed on unchanged, so steps find the shims too"
    (call,) = read_shim_log(shims / SHIM_LOG_NAME)
    assert (call.tool, call.argv, call.cwd) == ("srun", tuple(argv), str(shims))
    assert call.host
    assert call.time.endswith("Z")


def test_the_srun_shim_without_a_real_srun_exits_127(tmp_path: Path, shims: Path) -> None:
    only_bash = tmp_path / "only-bash"
    only_bash.mkdir()
    (only_bash / "bash").symlink_to(str(shutil.which("bash")))
    done = run(["srun", "true"], {**os.environ, "PATH": f"{shims}:/nonexistent:{only_bash}"}, cwd=tmp_path)
    assert done.returncode == 127
    assert "no real srun" in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["srun", "--container-unknown=1", "true"],
        ["srun", "--container-image"],
        ["apptainer", "run", "image.sif"],
        ["apptainer", "exec", "--unknown", "image.sif", "true"],
        ["apptainer", "exec", "--nv=yes", "image.sif", "true"],
        ["apptainer", "exec", "image.sif"],
        ["enroot", "import", "docker://x"],
        ["enroot", "start", "--bogus", "image.sif", "true"],
    ],
)
def test_a_command_line_a_shim_does_not_know_exits_2(tmp_path: Path, shims: Path, argv: list[str]) -> None:
    (tmp_path / "image.sif").touch()
    done = run(argv, shim_env(shims), cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "ddslurm shim" in done.stderr
    assert read_shim_log(shims / SHIM_LOG_NAME)[-1].argv == tuple(argv), "the call is logged before it is refused"


def test_apptainer_exec_runs_the_command_natively_in_pwd_with_its_environment(tmp_path: Path, shims: Path) -> None:
    image = tmp_path / "server.sif"
    image.touch()
    work = tmp_path / "work"
    work.mkdir()
    script = "import os, sys; print(os.getcwd(), os.environ['A'], os.environ['APPTAINER_CONTAINER'], sys.argv[1:])"
    argv = ["apptainer", "exec", "--nv", "-B", f"{tmp_path},/usr", f"--pwd={work}", "--env", "A=1,B=2", "--cleanenv"]
    argv += [str(image), sys.executable, "-c", script, "x y"]
    done = run(argv, shim_env(shims), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 3) == [str(work), "1", str(image), "['x y']\n"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["apptainer", "exec", "missing.sif", "true"], "could not open image"),
        (["apptainer", "exec", "--bind", "/nonexistent/dir", "image.sif", "true"], "doesn't exist"),
        (["apptainer", "exec", "--pwd", "/nonexistent/dir", "image.sif", "true"], "no such directory"),
    ],
)
def test_apptainer_exec_fails_like_apptainer(tmp_path: Path, shims: Path, argv: list[str], message: str) -> None:
    (tmp_path / "image.sif").touch()
    done = run(argv, shim_env(shims), cwd=tmp_path)
    assert done.returncode == 255
    assert message in done.stderr


def test_enroot_start_runs_the_command_natively(tmp_path: Path, shims: Path) -> None:
    (tmp_path / "image.sqsh").touch()
    argv = ["enroot", "start", "--rw", "-m", f"{tmp_path}:/mnt", "--env=A=7", "image.sqsh", "sh", "-c", 'echo "$A"']
    done = run(argv, shim_env(shims), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "7\n"), done.stderr
    assert run(["enroot", "start", "/nonexistent.sqsh", "true"], shim_env(shims), cwd=tmp_path).returncode == 1


def test_the_log_holds_any_argv_exactly_and_its_path_can_be_chosen(tmp_path: Path, shims: Path) -> None:
    (tmp_path / "image.sif").touch()
    hostile = ['quote " back \\ slash', "new\nline\ttab\rcr", "ctl\x01\x1f\x7f", "ünï €", "{brace}", "", "-"]
    log = tmp_path / "elsewhere.jsonl"
    argv = ["apptainer", "exec", "image.sif", "true", *hostile]
    done = run(argv, shim_env(shims, **{SHIM_LOG_ENV: str(log)}), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (call,) = read_shim_log(log)
    assert call.argv == tuple(argv)
    assert not (shims / SHIM_LOG_NAME).exists()


def test_reading_a_log_that_was_never_written_gives_no_calls(tmp_path: Path) -> None:
    assert read_shim_log(tmp_path / "none.jsonl") == []
