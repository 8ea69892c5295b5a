"""Compile the golden cases (``cases/<name>/run.yaml`` + ``case.yaml``) against ``profile.yaml``.

Run as a script, it prints ``{case: plan digest}`` as JSON (the determinism tests run it in fresh
processes under other environments); the golden tests import it by path. Each case's
``case.yaml`` names the profile cluster, the probed facts (none: a dry run), the image registry
(``null``: not readable, a dry run) and, for runs naming a config file, the golden file whose text
the caller would have read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from data_designer.slurm.contracts import ClusterFacts, ExecutionPlan, ImageRecord
from data_designer.slurm.planner import load_profile, parse_document
from data_designer.slurm.planner._compile import compile
from data_designer.slurm.planner._inputs import load_run, resolve_config

GOLDEN = Path(__file__).resolve().parent
CASES = GOLDEN / "cases"
DIGESTS = GOLDEN / "digests.json"


def case_names() -> list[str]:
    return sorted(p.name for p in CASES.iterdir() if (p / "run.yaml").is_file())


def case_meta(name: str) -> dict[str, Any]:
    path = CASES / name / "case.yaml"
    data = parse_document(path.read_text(encoding="utf-8"), file=str(path)).data
    assert isinstance(data, dict)
    return data


def compile_case(name: str, *, run_text: str | None = None, run_file: str = "run.yaml") -> ExecutionPlan:
    """The plan of case ``name``; ``run_text`` replaces its run file's text (same file name unless ``run_file``)."""
    meta = case_meta(name)
    text = run_text if run_text is not None else (CASES / name / "run.yaml").read_text(encoding="utf-8")
    run = load_run(text, file=run_file)
    profile = load_profile((GOLDEN / "profile.yaml").read_text(encoding="utf-8"), file="profile.yaml")
    config_file = meta.get("config_file")
    config_text = (GOLDEN / config_file).read_text(encoding="utf-8") if config_file else None
    facts = ClusterFacts.model_validate(meta["facts"]) if "facts" in meta else ClusterFacts()
    images = meta.get("images")
    return compile(
        run,
        profile.clusters[meta["cluster"]],
        cluster=meta["cluster"],
        config=resolve_config(run, config_text),
        facts=facts,
        images=None if images is None else [ImageRecord.model_validate(image) for image in images],
    )


def plan_json(plan: ExecutionPlan) -> str:
    """The plan as reviewed in a golden file: its canonical JSON content, sorted and indented."""
    return json.dumps(plan.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    print(json.dumps({name: compile_case(name).digest for name in case_names()}, sort_keys=True))


if __name__ == "__main__":
    main()
