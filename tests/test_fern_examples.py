"""Every example file of the Fern pages is valid: runs compile and benchmarks expand against the example profile.

``fern/examples/`` holds the files the run and benchmark pages show (in a YAML block marked ``{/* check: file NAME */}``);
each shown block must equal its example file, and every example file must be shown somewhere. Files
named ``bad-*.yaml`` are the pages' examples of mistakes: they must fail to load or to plan.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from data_designer.slurm.contracts import ClusterProfile, InvalidInputError, Profile
from data_designer.slurm.planner import compile as compile_run
from data_designer.slurm.planner import (
    expand,
    load_base_run,
    load_benchmark,
    load_profile,
    load_run,
    parse_document,
    resolve_config,
)

ROOT = Path(__file__).resolve().parent.parent
FERN = ROOT / "fern"
EXAMPLES = FERN / "examples"
PROFILE = EXAMPLES / "profile.yaml"

RUNS = {"run.yaml": "lab", "run-containers.yaml": "pyxis", "run-multi-node.yaml": "lab"}
"""Run examples and the cluster of the example profile their page plans them on."""
BENCHMARKS = {"benchmark.yaml": "lab"}
BAD = {"bad-run.yaml": "run", "bad-benchmark.yaml": "benchmark"}
PYTHON = {"python_client.py": "python-api.mdx"}
"""Python examples and the page that shows them (and runs them, offline, in the docs session)."""
PAGES = ("runs.mdx", "benchmarks.mdx", "serving.mdx")
"""The pages whose ``check: file`` blocks are these examples (other pages may show other files of the same name)."""


def shown_files(check_docs: ModuleType) -> dict[str, list[tuple[str, str]]]:
    """Every ``check: file`` block of :data:`PAGES`: file name -> [(page, content)]."""
    shown: dict[str, list[tuple[str, str]]] = {}
    for page in (FERN / "pages" / name for name in PAGES):
        for block in check_docs.parse_blocks(page.read_text(encoding="utf-8")):
            if block.marker is not None and block.marker.kind == "file":
                name = Path(block.marker.arg).name
                shown.setdefault(name, []).append((page.name, "\n".join(block.lines) + "\n"))
    return shown


def example_profile() -> Profile:
    return load_profile(PROFILE.read_text(encoding="utf-8"), file=str(PROFILE))


def cluster(name: str) -> ClusterProfile:
    return example_profile().clusters[name]


def test_every_example_file_is_listed_here() -> None:
    names = {p.name for p in EXAMPLES.iterdir()}
    assert names == {"profile.yaml", *RUNS, *BENCHMARKS, *BAD, *PYTHON}


@pytest.mark.parametrize("name", sorted(PYTHON))
def test_python_examples_are_shown_on_their_page_and_under_40_lines(name: str, check_docs: ModuleType) -> None:
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    page = (FERN / "pages" / PYTHON[name]).read_text(encoding="utf-8")
    shown = [
        "\n".join(b.lines) + "\n"
        for b in check_docs.parse_blocks(page)
        if b.marker is not None and b.marker.kind == "file" and Path(b.marker.arg).name == name
    ]
    assert shown == [text], f"{PYTHON[name]} must show fern/examples/{name} once, as it is"
    assert len(text.splitlines()) < 40
    compile(text, name, "exec")


@pytest.mark.parametrize("name", ["profile.yaml", *RUNS, *BENCHMARKS, *BAD])
def test_every_example_file_is_shown_and_equal_to_its_page_block(name: str, check_docs: ModuleType) -> None:
    blocks = shown_files(check_docs).get(name)
    assert blocks, f"fern/examples/{name} is shown on no page (in a 'check: file {name}' block)"
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    for page, content in blocks:
        assert content == text, f"{page} shows a {name} that differs from fern/examples/{name}"


def test_the_example_profile_is_valid() -> None:
    assert sorted(example_profile().clusters) == ["lab", "pyxis"]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_run_examples_compile(name: str) -> None:
    path = EXAMPLES / name
    run = load_run(path.read_text(encoding="utf-8"), file=str(path))
    assert run.data_designer.config is None, "page examples carry their config inline, so that they run anywhere"
    plan = compile_run(run, cluster(RUNS[name]), cluster=RUNS[name], config=resolve_config(run), images=None)
    assert plan.shards
    # The pages' configs name the API id of the model the deployment serves from a path: the one warning shown.
    assert {w.code for w in plan.warnings} <= {"model_mismatch"}
    assert [u.what for u in plan.unresolved] == (["gpus_per_node"] if RUNS[name] == "pyxis" else [])


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_benchmark_examples_expand(name: str) -> None:
    path = EXAMPLES / name
    text = path.read_text(encoding="utf-8")
    benchmark = load_benchmark(text, file=str(path))
    assert benchmark.base.run is None, "page examples carry their base run inline, so that they run anywhere"
    base = load_base_run(benchmark, file=str(path))
    plan = expand(
        benchmark,
        cluster(BENCHMARKS[name]),
        cluster=BENCHMARKS[name],
        base=base,
        config=resolve_config(base),
        images=None,
        source=parse_document(text, file=str(path)),
    )
    assert len(plan.children) > 1
    assert plan.unresolved == ()
    assert all({w.code for w in child.plan.warnings} <= {"model_mismatch"} for child in plan.children)


def test_bad_examples_fail_with_problems_on_their_lines() -> None:
    run_path = EXAMPLES / "bad-run.yaml"
    with pytest.raises(InvalidInputError) as bad_run:
        load_run(run_path.read_text(encoding="utf-8"), file=str(run_path))
    assert all(p.line is not None for p in bad_run.value.problems)
    assert len(bad_run.value.problems) == 5

    bench_path = EXAMPLES / "bad-benchmark.yaml"
    text = bench_path.read_text(encoding="utf-8")
    benchmark = load_benchmark(text, file=str(bench_path))
    base = load_base_run(benchmark, file=str(bench_path))
    with pytest.raises(InvalidInputError) as bad_bench:
        expand(
            benchmark,
            cluster("lab"),
            cluster="lab",
            base=base,
            config=resolve_config(base),
            images=None,
            source=parse_document(text, file=str(bench_path)),
        )
    assert [(p.key_path or ())[:1] for p in bad_bench.value.problems] == [("axes",)] * 3
    assert all(p.line is not None for p in bad_bench.value.problems)
