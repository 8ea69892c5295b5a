"""Dry-run services: ``plan_run`` and ``plan_benchmark`` compile offline, locate problems, and write plans out."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from data_designer.slurm.contracts import (
    BenchmarkPlan,
    ConflictError,
    ExecutionPlan,
    InvalidInputError,
    NotFoundError,
    SubmissionUnit,
)
from data_designer.slurm.planner import canonical_json, compile, load_profile, load_run, plan_digest, resolve_config
from data_designer.slurm.services import plan_benchmark, plan_run

PROFILE = """\
schema_version: 1
default_cluster: lab
clusters:
  lab:
    workspace_root: {workspace}
    account: proj
    partitions: {{gpu: batch, cpu: cpu}}
    gpus_per_node: 8
    compute_python: {{interpreter: /opt/dd/bin/python}}
    default_time_limit: "04:00:00"
  auto:
    workspace_root: {workspace}
    partitions: {{gpu: batch, cpu: cpu}}
    gpus_per_node: auto
    container_runtime: pyxis
    compute_python: {{interpreter: /opt/dd/bin/python}}
  images:
    workspace_root: {workspace}
    partitions: {{gpu: batch, cpu: cpu}}
    gpus_per_node: 4
    container_runtime: pyxis
    compute_python: {{image: dd-client}}
"""

CONFIG = """\
model_configs:
  - {alias: writer, model: meta/llama-3.1-8b-instruct, provider: local}
columns:
  - {name: topic, column_type: sampler, sampler_type: category, params: {values: [a, b]}}
  - {name: text, column_type: llm-text, model_alias: writer, prompt: "Write about {{ topic }}."}
"""

RUN = """\
schema_version: 1
name: reviews
data_designer:
  inline:
    model_configs:
      - {alias: writer, model: meta/llama-3.1-8b-instruct, provider: local}
    columns:
      - {name: topic, column_type: sampler, sampler_type: category, params: {values: [a, b]}}
      - {name: text, column_type: llm-text, model_alias: writer, prompt: "Write about {{ topic }}."}
records: 1000
sharding: {shards: 8}
deployments:
  writer:
    engine: vllm
    model: /models/llama
    tensor_parallel: 2
    replicas: 2
client: {concurrency: {writer: 64}}
submission: {time_limit: "02:00:00"}
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "profile.yaml").write_text(PROFILE.format(workspace=tmp_path / "workspace"), encoding="utf-8")
    (path / "run.yaml").write_text(RUN, encoding="utf-8")
    return path


def plan(workdir: Path, run: str = "run.yaml", **kwargs: Any) -> Any:
    return plan_run(workdir / run, profile=workdir / "profile.yaml", **kwargs)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_plan_run_summarises_the_plan(workdir: Path) -> None:
    result = plan(workdir)
    assert (result.run_file, result.profile_file, result.cluster) == (
        str(workdir / "run.yaml"),
        str(workdir / "profile.yaml"),
        "lab",
    )
    assert (result.facts.gpus_per_node, result.facts.max_array_size) == (8, 1001)
    summary = result.plan
    assert (summary.name, summary.records, summary.shards, summary.allocations, summary.array_jobs) == (
        "reviews",
        1000,
        8,
        8,
        1,
    )
    assert (summary.nodes_per_allocation, summary.gpus_per_node, summary.gpus_per_allocation) == (1, 8, 4)
    assert (summary.partition, summary.account, summary.time_limit) == ("batch", "proj", "02:00:00")
    assert summary.gpu_hours_upper_bound == 8 * 1 * 4 * 2
    (alias,) = summary.aliases
    assert (alias.alias, alias.kind, alias.engine, alias.model) == ("writer", "deployed", "vllm", "/models/llama")
    assert (alias.replicas, alias.gpus_per_replica, alias.concurrency) == (2, 2, 64)
    assert summary.unresolved == ()
    assert summary.submittable
    assert result.output is None


def test_the_digest_is_the_planners_for_the_same_inputs(workdir: Path) -> None:
    profile = load_profile((workdir / "profile.yaml").read_text(encoding="utf-8"), file="p").clusters["lab"]
    run = load_run(RUN, file="r")
    expected = compile(run, profile, cluster="lab", config=resolve_config(run), images=None)
    assert plan(workdir).plan.digest == expected.digest


def test_max_array_size_chunks_the_shards(workdir: Path) -> None:
    assert plan(workdir, max_array_size=3).plan.array_jobs == 3
    assert plan(workdir, max_array_size=3).facts.max_array_size == 3
    with pytest.raises(InvalidInputError) as caught:
        plan(workdir, max_array_size=0)
    assert caught.value.info.key_path == ("--max-array-size",)


def test_auto_gpus_per_node_and_named_images_are_unresolved(workdir: Path) -> None:
    write(workdir / "run.yaml", RUN.replace("replicas: 2\n", "replicas: 2\n    image: vllm-0.8\n"))
    result = plan(workdir, cluster="auto")
    assert result.facts.gpus_per_node is None
    summary = result.plan
    assert {(u.what, u.key_path) for u in summary.unresolved} == {
        ("gpus_per_node", "gpus_per_node"),
        ("image", "deployments.writer.image"),
    }
    assert summary.nodes_per_allocation is None
    assert summary.gpu_hours_upper_bound is None
    assert not summary.submittable


def test_image_paths_pass_without_a_registry(workdir: Path) -> None:
    write(workdir / "run.yaml", RUN.replace("replicas: 2\n", "replicas: 2\n    image: /images/vllm.sqsh\n"))
    assert plan(workdir, cluster="auto").plan.unresolved[0].what == "gpus_per_node"
    assert len(plan(workdir, cluster="auto").plan.unresolved) == 1


def with_config(path: Path) -> str:
    """RUN with its inline config replaced by a config file path."""
    return RUN[: RUN.index("  inline:")] + f"  config: {path}\n" + RUN[RUN.index("records:") :]


def test_a_config_file_is_read_and_compiled(workdir: Path) -> None:
    config = write(workdir / "config.yaml", CONFIG)
    write(workdir / "file.yaml", with_config(config))
    run = load_run(with_config(config), file="r")
    profile = load_profile((workdir / "profile.yaml").read_text(encoding="utf-8"), file="p").clusters["lab"]
    expected = compile(run, profile, cluster="lab", config=resolve_config(run, CONFIG), images=None)
    assert plan(workdir, "file.yaml").plan.digest == expected.digest


def test_a_missing_config_file_names_the_run_file_line(workdir: Path) -> None:
    write(workdir / "run.yaml", with_config(workdir / "nope.yaml"))
    with pytest.raises(NotFoundError) as caught:
        plan(workdir)
    info = caught.value.info
    assert (info.file, info.line, info.key_path) == (str(workdir / "run.yaml"), 4, ("data_designer", "config"))
    assert info.exit_code == 3
    assert "does not exist" in info.message


def test_a_missing_run_file_exits_3(workdir: Path) -> None:
    with pytest.raises(NotFoundError) as caught:
        plan(workdir, "absent.yaml")
    assert caught.value.info.file == str(workdir / "absent.yaml")
    assert caught.value.info.message == f"run file {str(workdir / 'absent.yaml')!r} does not exist"


def test_a_missing_profile_exits_3(workdir: Path) -> None:
    with pytest.raises(NotFoundError):
        plan_run(workdir / "run.yaml", profile=workdir / "absent.yaml")


def test_schema_problems_are_all_reported_with_lines(workdir: Path) -> None:
    write(workdir / "run.yaml", RUN.replace("records: 1000", "records: -1\nrecordz: 3"))
    with pytest.raises(InvalidInputError) as caught:
        plan(workdir)
    where = {(p.file, p.line, p.key_path) for p in caught.value.problems}
    assert (str(workdir / "run.yaml"), 10, ("records",)) in where
    assert (str(workdir / "run.yaml"), 11, ("recordz",)) in where


def test_compile_problems_point_at_the_run_file_line(workdir: Path) -> None:
    text = RUN.replace('time_limit: "02:00:00"', 'time_limit: "00:10:00"').replace(
        "model_alias: writer", "model_alias: x"
    )
    write(workdir / "run.yaml", text)
    with pytest.raises(InvalidInputError) as caught:
        plan(workdir)
    by_code = {p.code: p for p in caught.value.problems}
    run_file = str(workdir / "run.yaml")
    limit = by_code["time_limit_too_short"]
    assert (limit.file, limit.line, limit.key_path) == (run_file, 19, ("submission", "time_limit"))
    unserved = by_code["alias_not_served"]
    assert (unserved.file, unserved.line, unserved.key_path) == (run_file, 12, ("deployments",))
    inline = [p for p in caught.value.problems if (p.key_path or ())[:2] == ("data_designer", "inline")]
    assert [(p.file, p.line, p.key_path) for p in inline] == [
        (run_file, 9, ("data_designer", "inline", "columns", 1, "model_alias"))
    ]


def test_profile_problems_point_at_the_profile_line(workdir: Path) -> None:
    with pytest.raises(InvalidInputError) as caught:
        plan(workdir, cluster="images")
    (problem,) = [p for p in caught.value.problems if p.code == "compute_image_runtime"]
    assert (problem.file, problem.key_path) == (
        str(workdir / "profile.yaml"),
        ("clusters", "images", "compute_python", "image"),
    )
    assert problem.line == 22


def test_out_writes_the_plan_script_and_submission_unit(workdir: Path) -> None:
    out = workdir / "out"
    result = plan(workdir, out=out)
    assert result.output is not None
    assert result.output.directory == str(out)
    assert result.output.files == ("plan.json", "allocation.sbatch", "submission.json")
    assert result.output.overwritten is False
    raw = (out / "plan.json").read_bytes()
    written = ExecutionPlan.model_validate_json(raw)
    assert raw == canonical_json(written.model_dump(mode="json"))
    assert written.digest == result.plan.digest == plan_digest(written)
    assert (out / "allocation.sbatch").read_text(encoding="utf-8") == written.submission.script
    unit = SubmissionUnit.model_validate_json((out / "submission.json").read_bytes())
    assert [c.job_name for c in unit.chunks] == ["dd-reviews-dry-run-c0"]
    assert f"--chdir={out}" in unit.sbatch_args
    assert unit.script == written.submission.script


def test_out_with_unresolved_entries_writes_only_the_plan(workdir: Path) -> None:
    result = plan(workdir, cluster="auto", out=workdir / "out")
    assert result.output is not None
    assert result.output.files == ("plan.json",)
    assert sorted(p.name for p in (workdir / "out").iterdir()) == ["plan.json"]


def test_a_non_empty_out_needs_force(workdir: Path) -> None:
    out = workdir / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ConflictError) as caught:
        plan(workdir, out=out)
    assert caught.value.info.exit_code == 4
    assert caught.value.info.hint is not None
    assert "--force" in caught.value.info.hint
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    forced = plan(workdir, out=out, force=True)
    assert forced.output is not None
    assert forced.output.overwritten is True
    assert (out / "keep.txt").read_text(encoding="utf-8") == "mine"
    assert (out / "plan.json").is_file()


def test_an_empty_out_directory_is_fine_and_a_file_is_not(workdir: Path) -> None:
    (workdir / "empty").mkdir()
    assert plan(workdir, out=workdir / "empty").output is not None
    write(workdir / "file", "x")
    with pytest.raises(ConflictError):
        plan(workdir, out=workdir / "file")


def test_no_slurm_and_no_workspace_are_touched(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a subprocess was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    plan(workdir, out=workdir / "out")
    assert not (workdir.parent / "workspace").exists()


BENCH = """\
schema_version: 1
name: sweep
base:
  run: {run}
axes:
  - {{axis: concurrency, alias: writer, values: [32, 64]}}
  - {{axis: replicas, alias: writer, values: [1, 2]}}
repeats: 2
records: {{policy: fixed, records: 500}}
"""


def test_plan_benchmark_lists_children_in_order(workdir: Path) -> None:
    write(workdir / "bench.yaml", BENCH.format(run=workdir / "run.yaml"))
    result = plan_benchmark(workdir / "bench.yaml", profile=workdir / "profile.yaml")
    assert (result.name, result.cases, result.repeats, result.exclusive) == ("sweep", 4, 2, True)
    assert [c.index for c in result.children] == list(range(8))
    assert [(c.case, c.repeat) for c in result.children[:3]] == [
        ((("concurrency.writer", 32), ("replicas.writer", 1)), 0),
        ((("concurrency.writer", 32), ("replicas.writer", 1)), 1),
        ((("concurrency.writer", 32), ("replicas.writer", 2)), 0),
    ]
    assert result.children[0].plan_digest == result.children[1].plan_digest
    assert result.children[0].child_id != result.children[1].child_id
    assert all(c.records == 500 and c.submittable for c in result.children)
    assert result.gpu_hours_upper_bound == sum(c.gpu_hours_upper_bound or 0 for c in result.children)
    assert result.submittable
    assert result.unresolved == ()


def test_an_inline_base_run_gives_the_same_children(workdir: Path) -> None:
    write(workdir / "bench.yaml", BENCH.format(run=workdir / "run.yaml"))
    by_path = plan_benchmark(workdir / "bench.yaml", profile=workdir / "profile.yaml")
    inline = json.dumps(load_run(RUN, file="r").model_dump(mode="json", exclude_defaults=True))
    write(workdir / "inline.yaml", BENCH.format(run="BASE").replace("run: BASE", f"inline: {inline}"))
    by_inline = plan_benchmark(workdir / "inline.yaml", profile=workdir / "profile.yaml")
    assert [c.plan_digest for c in by_inline.children] == [c.plan_digest for c in by_path.children]


def test_benchmark_out_writes_the_benchmark_plan_and_every_child(workdir: Path) -> None:
    write(workdir / "bench.yaml", BENCH.format(run=workdir / "run.yaml"))
    out = workdir / "out"
    result = plan_benchmark(workdir / "bench.yaml", profile=workdir / "profile.yaml", out=out)
    written = BenchmarkPlan.model_validate_json((out / "benchmark.json").read_bytes())
    assert written.digest == result.digest
    assert result.output is not None
    assert len(result.output.files) == 1 + 3 * len(result.children)
    for child in result.children:
        folder = out / "children" / f"{child.index}-{child.child_id}"
        assert ExecutionPlan.model_validate_json((folder / "plan.json").read_bytes()).digest == child.plan_digest
        unit = SubmissionUnit.model_validate_json((folder / "submission.json").read_bytes())
        assert unit.chunks[0].job_name == f"dd-sweep-{child.child_id}-dry-run-c0"
        assert f"--chdir={folder}" in unit.sbatch_args
    with pytest.raises(ConflictError):
        plan_benchmark(workdir / "bench.yaml", profile=workdir / "profile.yaml", out=out)


def test_a_missing_base_run_names_the_benchmark_line(workdir: Path) -> None:
    write(workdir / "bench.yaml", BENCH.format(run=workdir / "absent.yaml"))
    with pytest.raises(NotFoundError) as caught:
        plan_benchmark(workdir / "bench.yaml", profile=workdir / "profile.yaml")
    info = caught.value.info
    assert (info.file, info.line, info.key_path) == (str(workdir / "bench.yaml"), 4, ("base", "run"))


def test_benchmark_axis_problems_point_at_the_benchmark_file(workdir: Path) -> None:
    write(
        workdir / "bench.yaml",
        BENCH.format(run=workdir / "run.yaml").replace("alias: writer, values: [1", "alias: x, values: [1"),
    )
    with pytest.raises(InvalidInputError) as caught:
        plan_benchmark(workdir / "bench.yaml", profile=workdir / "profile.yaml")
    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.key_path) == (str(workdir / "bench.yaml"), 7, ("axes", 1, "alias"))


def test_benchmark_problems_of_profile_keys_point_at_the_profile(workdir: Path) -> None:
    inline = json.dumps(load_run(RUN, file="r").model_dump(mode="json", exclude_defaults=True))
    write(workdir / "inline.yaml", BENCH.format(run="BASE").replace("run: BASE", f"inline: {inline}"))
    with pytest.raises(InvalidInputError) as caught:
        plan_benchmark(workdir / "inline.yaml", profile=workdir / "profile.yaml", cluster="images")
    (problem,) = [p for p in caught.value.problems if p.code == "compute_image_runtime"]
    assert (problem.file, problem.line, problem.key_path) == (
        str(workdir / "profile.yaml"),
        22,
        ("clusters", "images", "compute_python", "image"),
    )


def test_benchmark_problems_of_an_inline_config_point_at_the_benchmark_line(workdir: Path) -> None:
    text = BENCH.format(run="BASE").replace(
        "run: BASE", "inline: " + json.dumps(load_run(RUN, file="r").model_dump(mode="json", exclude_defaults=True))
    )
    write(workdir / "inline.yaml", text.replace('"model_alias": "writer"', '"model_alias": "x"'))
    with pytest.raises(InvalidInputError) as caught:
        plan_benchmark(workdir / "inline.yaml", profile=workdir / "profile.yaml")
    inline = [p for p in caught.value.problems if (p.key_path or ())[2:4] == ("data_designer", "inline")]
    assert [(p.file, p.line, p.key_path) for p in inline] == [
        (str(workdir / "inline.yaml"), 4, ("base", "inline", "data_designer", "inline", "columns", 1, "model_alias"))
    ]


def test_aliases_with_dots_are_located(workdir: Path) -> None:
    text = RUN.replace("writer", "llama-3.1").replace("tensor_parallel: 2", "tensor_parallel: 12")
    write(workdir / "run.yaml", text)
    with pytest.raises(InvalidInputError) as caught:
        plan(workdir)
    (problem,) = caught.value.problems
    assert (problem.code, problem.line, problem.key_path) == (
        "replica_shape",
        16,
        ("deployments", "llama-3.1", "tensor_parallel"),
    )
