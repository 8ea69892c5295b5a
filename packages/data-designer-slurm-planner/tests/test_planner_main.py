"""``python -m data_designer.slurm.planner compile|expand``: summaries, JSON, --out, errors and exit codes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from data_designer.slurm.contracts import BenchmarkPlan, ExecutionPlan, SubmissionUnit
from data_designer.slurm.planner import canonical_json
from data_designer.slurm.planner._main import main

GOLDEN = Path(__file__).resolve().parent / "golden"
GOLDEN_PROFILE = GOLDEN / "profile.yaml"
DIGESTS: dict[str, str] = json.loads((GOLDEN / "digests.json").read_text(encoding="utf-8"))
INLINE_CASES = ("multi_node", "several_models", "external_mixed")
"""Golden cases with their config inline and no named image: a dry run compiles them exactly."""

CONFIG: dict[str, Any] = {
    "model_configs": [{"alias": "writer", "model": "m", "provider": "local"}],
    "columns": [{"name": "a", "column_type": "llm-text", "model_alias": "writer", "prompt": "x"}],
}


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def write_run(directory: Path, **changes: Any) -> Path:
    run: dict[str, Any] = {
        "schema_version": 1,
        "name": "demo",
        "data_designer": {"inline": CONFIG},
        "records": 100,
        "sharding": {"shards": 3},
        "deployments": {"writer": {"engine": "vllm", "model": "/m/writer"}},
    }
    run.update(changes)
    path = directory / "run.yaml"
    path.write_text(yaml.safe_dump(run, sort_keys=False), encoding="utf-8")
    return path


def write_benchmark(directory: Path, run: Path | None = None, **changes: Any) -> Path:
    spec: dict[str, Any] = {
        "schema_version": 1,
        "name": "sweep",
        "base": {"run": str(run)} if run is not None else {"inline": yaml.safe_load(write_run(directory).read_text())},
        "axes": [{"axis": "concurrency", "alias": "writer", "values": [8, 16]}],
        "repeats": 2,
        "records": {"policy": "fixed", "records": 50},
    }
    spec.update(changes)
    path = directory / "bench.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("case", INLINE_CASES)
def test_compile_json_gives_the_golden_plan(case: str) -> None:
    code, out, err = cli(
        "compile", GOLDEN / "cases" / case / "run.yaml", "--profile", GOLDEN_PROFILE, "--max-array-size", "11", "--json"
    )
    assert (code, err) == (0, "")
    plan = ExecutionPlan.model_validate_json(out)
    assert plan.digest == DIGESTS[case]
    assert json.loads((GOLDEN / f"{case}.plan.json").read_text(encoding="utf-8")) == plan.model_dump(mode="json")


def test_compile_summary_names_shards_allocation_gpus_and_hours() -> None:
    code, out, _ = cli("compile", GOLDEN / "cases" / "multi_node" / "run.yaml", "--profile", GOLDEN_PROFILE)
    assert code == 0
    assert out.splitlines() == [
        f"plan {DIGESTS['multi_node']}",
        "run 'multi-node' on cluster 'local'",
        "shards: 2 (40 records), array chunks: 1",
        "allocation per shard: 2 node(s), 4 GPU(s), 1 replica(s), time limit 03:00:00, partition gpu",
        "upper-bound GPU-hours: 24",
        "warning: deployments.big.model: the Data Designer config names 'meta/llama-3.1-70b-instruct' "
        "(model_configs[0].model), the deployment '/models/llama-3.1-70b-instruct': the deployment wins, the client "
        "asks its server for 'big'",
    ]


def test_compile_dry_run_reports_what_is_unresolved(tmp_path: Path) -> None:
    run = write_run(tmp_path, client={"image": "client-img"})
    profile = tmp_path / "profile.yaml"
    text = GOLDEN_PROFILE.read_text(encoding="utf-8")
    profile.write_text(text, encoding="utf-8")
    code, out, _ = cli("compile", run, "--profile", profile, "--cluster", "auto", "--out", tmp_path / "out")
    assert code == 0
    assert "upper-bound GPU-hours: unknown until resolved" in out
    assert "unresolved (blocks submission):" in out
    assert "  - gpus_per_node at gpus_per_node: the profile says 'auto'" in out
    assert "  - image at client.image: image 'client-img' is named, and the image registry was not read" in out
    # No script or submission unit while unresolved: only the plan.
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["plan.json"]
    code, out, _ = cli("compile", run, "--profile", profile, "--cluster", "auto", "--gpus-per-node", "2", "--json")
    plan = ExecutionPlan.model_validate_json(out)
    assert [u.what for u in plan.unresolved] == ["image"]
    assert plan.allocation.gpus_per_node == 2


def test_compile_out_writes_the_canonical_plan_script_and_bound_submission(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    code, out, _ = cli("compile", write_run(tmp_path), "--profile", GOLDEN_PROFILE, "--out", out_dir)
    assert code == 0
    assert f"wrote 3 file(s) under {out_dir}" in out
    raw = (out_dir / "plan.json").read_bytes()
    plan = ExecutionPlan.model_validate_json(raw)
    assert raw == canonical_json(plan)
    assert plan.submission.script is not None
    assert (out_dir / "allocation.sbatch").read_text(encoding="utf-8") == plan.submission.script
    unit = SubmissionUnit.model_validate_json((out_dir / "submission.json").read_bytes())
    assert [c.job_name for c in unit.chunks] == ["dd-demo-dry-run-c0"]
    assert f"--chdir={out_dir}" in unit.sbatch_args
    assert unit.chunks[0].array_spec == "0-2"


def test_out_files_are_written_by_the_stores_writer(tmp_path: Path) -> None:
    """Private modes whatever the umask, and a symbolic link planted at the final name is refused, never followed
    (``--force`` or not: the output rule, test_planner_output_writer.py)."""
    run = write_run(tmp_path)
    out_dir = tmp_path / "out"
    code, _, _ = cli("compile", run, "--profile", GOLDEN_PROFILE, "--out", out_dir)
    assert code == 0
    assert {p.name: p.stat().st_mode & 0o777 for p in out_dir.iterdir()} == dict.fromkeys(
        ("allocation.sbatch", "plan.json", "submission.json"), 0o600
    )
    victim = tmp_path / "victim"
    victim.write_text("mine", encoding="utf-8")
    (out_dir / "plan.json").unlink()
    (out_dir / "plan.json").symlink_to(victim)
    code, _, err = cli("compile", run, "--profile", GOLDEN_PROFILE, "--out", out_dir, "--force")
    assert code == 2
    assert "symbolic link" in err
    assert victim.read_text(encoding="utf-8") == "mine"
    assert (out_dir / "plan.json").is_symlink()


def test_out_refuses_a_non_empty_directory_unless_forced(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "keep.txt").write_text("mine", encoding="utf-8")
    code, out, err = cli("compile", run, "--profile", GOLDEN_PROFILE, "--out", out_dir)
    assert (code, out) == (4, "")
    assert err.startswith(f"error: --out '{out_dir}' is not empty (fix: ")
    assert sorted(p.name for p in out_dir.iterdir()) == ["keep.txt"]
    code, _, _ = cli("compile", run, "--profile", GOLDEN_PROFILE, "--out", out_dir, "--force")
    assert code == 0
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "allocation.sbatch",
        "keep.txt",
        "plan.json",
        "submission.json",
    ]


def test_expand_summary_lists_children_with_digests(tmp_path: Path) -> None:
    bench = write_benchmark(tmp_path, write_run(tmp_path))
    code, out, err = cli("expand", bench, "--profile", GOLDEN_PROFILE)
    assert (code, err) == (0, "")
    code, raw, _ = cli("expand", bench, "--profile", GOLDEN_PROFILE, "--json")
    plan = BenchmarkPlan.model_validate_json(raw)
    lines = out.splitlines()
    assert lines[:4] == [
        "benchmark 'sweep': 4 children (2 case(s) x 2 repeat(s))",
        f"digest {plan.digest}",
        "exclusive: yes, at most 1 at once",
        f"upper-bound GPU-hours: {plan.gpu_hours_upper_bound:g}",
    ]
    assert lines[4] == "children:"
    for line, child in zip(lines[5:], plan.children, strict=True):
        assert child.child_id in line
        assert child.plan_digest[:16] in line
        assert line.endswith(f"concurrency.writer={dict(child.case)['concurrency.writer']!r}")


def test_expand_out_writes_the_benchmark_plan_and_every_child(tmp_path: Path) -> None:
    bench = write_benchmark(tmp_path)
    out_dir = tmp_path / "out"
    code, _, _ = cli("expand", bench, "--profile", GOLDEN_PROFILE, "--out", out_dir)
    assert code == 0
    plan = BenchmarkPlan.model_validate_json((out_dir / "benchmark.json").read_bytes())
    children = sorted((out_dir / "children").iterdir())
    assert [p.name for p in children] == [f"{c.index}-{c.child_id}" for c in plan.children]
    for directory, child in zip(children, plan.children, strict=True):
        assert ExecutionPlan.model_validate_json((directory / "plan.json").read_bytes()) == child.plan
        unit = SubmissionUnit.model_validate_json((directory / "submission.json").read_bytes())
        assert unit.chunks[0].job_name == f"dd-sweep-{child.child_id}-dry-run-c0"
        assert (directory / "allocation.sbatch").is_file()


def test_problems_are_one_line_each_with_file_line_and_key(tmp_path: Path) -> None:
    run = write_run(tmp_path, submission={"time_limit": "00:10:00"}, sharding={"shards": 1000})
    code, out, err = cli("compile", run, "--profile", GOLDEN_PROFILE)
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert len(lines) == 2
    run_lines = run.read_text(encoding="utf-8").splitlines()
    time_line = next(n for n, line in enumerate(run_lines, 1) if "time_limit" in line)
    assert lines[0].startswith(f"error: {run}:{time_line}: submission.time_limit: time limit '00:10:00'")
    assert lines[0].endswith(")")
    assert " (fix: " in lines[0]
    assert f"{run}:" in lines[1]
    assert "sharding.shards" in lines[1]
    code, _, err = cli("compile", run, "--profile", GOLDEN_PROFILE, "--json")
    info = json.loads(err)
    assert (code, info["exit_code"], info["category"]) == (2, 2, "invalid_input")
    assert len(info["problems"]) == 2


def test_a_profile_problem_is_not_placed_in_the_run_file(tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "clusters": {
                    "c": {
                        "workspace_root": "/ws",
                        "partitions": {"gpu": "gpu", "cpu": "cpu"},
                        "gpus_per_node": 2,
                        "container_runtime": "pyxis",
                        "compute_python": {"image": "/images/python.sqsh"},
                    }
                },
            }
        ),
        encoding="utf-8",
    )
    code, _, err = cli("compile", write_run(tmp_path), "--profile", profile)
    assert code == 2
    assert err.startswith("error: compute_python.image: the supervisor can start in an image only with")


def test_expand_dry_run_reports_unresolved_gpus_per_node(tmp_path: Path) -> None:
    bench = write_benchmark(tmp_path, axes=[{"axis": "nodes", "alias": "writer", "values": [1, 2]}], repeats=1)
    code, out, _ = cli("expand", bench, "--profile", GOLDEN_PROFILE, "--cluster", "auto")
    assert code == 0
    assert "upper-bound GPU-hours: unknown until resolved" in out
    assert "  - gpus_per_node at axes[0]: the nodes axis of 'writer' needs GPUs per node" in out
    assert "  - gpus_per_node at gpus_per_node: the profile says 'auto'" in out
    assert out.count(" ? node(s) ") == 2
    code, out, _ = cli("expand", bench, "--profile", GOLDEN_PROFILE, "--cluster", "auto", "--gpus-per-node", "2")
    assert code == 0
    assert "unresolved" not in out
    assert " 1 node(s)  2 GPU(s) " in out
    assert " 2 node(s)  4 GPU(s) " in out


def test_benchmark_problems_name_the_axis(tmp_path: Path) -> None:
    bench = write_benchmark(tmp_path, axes=[{"axis": "tensor_parallel", "alias": "ghost", "values": [1]}])
    code, _, err = cli("expand", bench, "--profile", GOLDEN_PROFILE)
    assert code == 2
    assert err.startswith(f"error: {bench}:")
    assert "axes[0].alias: the tensor_parallel axis needs a deployed alias; 'ghost' is not deployed" in err


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (
            ["compile", "{tmp}/missing.yaml", "--profile", str(GOLDEN_PROFILE)],
            3,
            "run file '{tmp}/missing.yaml' does not exist",
        ),
        (["compile", "{run}", "--profile", "{tmp}/nope.yaml"], 3, "profile '{tmp}/nope.yaml' does not exist"),
        (
            ["compile", "{run}", "--profile", str(GOLDEN_PROFILE), "--cluster", "mars"],
            3,
            "cluster 'mars' is not in the profile",
        ),
        (["compile", "{run}"], 2, "no profile was given"),
        (["compile", "{tmp}", "--profile", str(GOLDEN_PROFILE)], 2, "is a directory"),
    ],
)
def test_input_errors_map_to_exit_codes(
    argv: list[str], code: int, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATA_DESIGNER_SLURM_PROFILE", raising=False)
    run = write_run(tmp_path)
    filled = [a.format(tmp=tmp_path, run=run) for a in argv]
    got, out, err = cli(*filled)
    assert (got, out) == (code, "")
    assert message.format(tmp=tmp_path) in err
    assert len(err.splitlines()) == 1


def test_the_profile_may_come_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATA_DESIGNER_SLURM_PROFILE", str(GOLDEN_PROFILE))
    code, out, _ = cli("compile", write_run(tmp_path))
    assert code == 0
    assert "on cluster 'local'" in out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile"]) == 2
    assert main(["plan", "x"]) == 2
    assert main(["compile", "run.yaml", "--gpus-per-node", "0"]) == 2
    assert "expected a positive whole number, got '0'" in capsys.readouterr().err


def test_python_dash_m_runs_with_nothing_above_the_planner_imported(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['planner', 'compile', {str(run)!r}, '--profile', {str(GOLDEN_PROFILE)!r}, '--json']\n"
        "try:\n"
        "    runpy.run_module('data_designer.slurm.planner', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n"
        "    status = exc.code\n"
        "above = sorted(m for m in sys.modules if m.split('.')[:3] in (['data_designer', 'slurm', 'runtime'],"
        " ['data_designer', 'slurm', 'services'], ['data_designer', 'slurm', 'cli']) or m.split('.')[0] == 'typer'"
        " or m.startswith(('data_designer.config', 'data_designer.engine', 'data_designer.interface')))\n"
        "print('STATUS', status, above, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "STATUS 0 []"
    assert ExecutionPlan.model_validate_json(done.stdout).run.name == "demo"
    module = subprocess.run(
        [sys.executable, "-m", "data_designer.slurm.planner", "compile", str(run), "--profile", str(GOLDEN_PROFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (module.returncode, module.stderr) == (0, "")
    assert module.stdout.startswith("plan ")
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "data_designer.slurm.planner",
            "compile",
            str(tmp_path / "none.yaml"),
            "--profile",
            str(GOLDEN_PROFILE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 3
    assert bad.stderr.startswith(f"error: {tmp_path / 'none.yaml'}: run file")
