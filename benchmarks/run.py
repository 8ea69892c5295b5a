"""Run the benchmarks and print their figures against their targets.

    uv run python benchmarks/run.py [--quick] [NAME ...] [--json OUT] [--without PREREQUISITE] [--list]

Discovers every ``benchmarks/bench_*.py`` (name: the module name without ``bench_``), runs the
selected ones and prints one table. Exit status: 0 when every selected benchmark ran or was skipped
(missed targets are reported, never fatal); 1 when one raised, returned something other than
figures, or, under ``CI=true``, lacked a prerequisite; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# Run as a script, the interpreter puts benchmarks/ on sys.path; the modules import each other as
# ``benchmarks.*`` (one module name for mypy and at run time), so the repository root goes first.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import Benchmark, Figure, RunContext, format_number, in_ci

_HERE = Path(__file__).resolve().parent

Status = Literal["ok", "skipped", "deselected", "error"]
CACHE_ENV_VAR = "DATA_DESIGNER_SLURM_BENCH_CACHE"


@dataclass
class Outcome:
    """What happened to one benchmark."""

    name: str
    summary: str
    status: Status
    reason: str = ""
    seconds: float = 0.0
    figures: list[Figure] = field(default_factory=list)


def discover() -> list[str]:
    """Names of the benchmark modules next to this file, sorted."""
    return sorted(path.stem.removeprefix("bench_") for path in _HERE.glob("bench_*.py"))


def load(name: str) -> Benchmark:
    module = importlib.import_module(f"benchmarks.bench_{name}")
    benchmark = getattr(module, "BENCHMARK", None)
    if not isinstance(benchmark, Benchmark):
        raise TypeError(f"benchmarks/bench_{name}.py must define BENCHMARK = Benchmark(...)")
    return benchmark


def _check_figures(result: object) -> list[Figure]:
    if not isinstance(result, list | tuple) or not all(isinstance(item, Figure) for item in result):
        raise TypeError(f"run() must return a sequence of Figure values, not {result!r:.200}")
    figures: list[Figure] = list(result)
    names = [figure.name for figure in figures]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"run() returned duplicate figure names: {duplicates}")
    return figures


def run_one(name: str, *, quick: bool, cache: Path, without: frozenset[str], ci: bool) -> Outcome:
    """Load, check prerequisites of and run one benchmark; never raises for the benchmark's own failures."""
    try:
        benchmark = load(name)
    except Exception:
        return Outcome(name, "", "error", "could not load:\n" + traceback.format_exc())
    for prerequisite in benchmark.requires:
        if prerequisite.name in without:
            return Outcome(name, benchmark.summary, "deselected", f"needs {prerequisite.name} (--without)")
        missing = prerequisite.check()
        if missing is not None:
            reason = f"needs {prerequisite.name} ({prerequisite.description}): {missing}"
            if ci:
                return Outcome(name, benchmark.summary, "error", f"{reason}; under CI=true this is an error")
            return Outcome(name, benchmark.summary, "skipped", reason)
    scratch = Path(tempfile.mkdtemp(prefix=f"ddslurm-bench-{name}-"))
    start = time.perf_counter()
    try:
        figures = _check_figures(benchmark.run(RunContext(quick=quick, scratch=scratch, cache=cache, without=without)))
    except Exception:
        elapsed = time.perf_counter() - start
        return Outcome(name, benchmark.summary, "error", traceback.format_exc(), elapsed)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Outcome(name, benchmark.summary, "ok", "", time.perf_counter() - start, figures)


def _met_text(figure: Figure) -> str:
    met = figure.met
    return "" if met is None else ("yes" if met else "MISSED")


def render_table(outcomes: list[Outcome]) -> str:
    header = ("benchmark", "figure", "value", "unit", "target", "met")
    rows: list[tuple[str, ...]] = []
    for outcome in outcomes:
        if outcome.status != "ok":
            rows.append((outcome.name, f"[{outcome.status}, see below]", "", "", "", ""))
        for figure in outcome.figures:
            target = "" if figure.target is None else str(figure.target)
            rows.append(
                (outcome.name, figure.name, format_number(figure.value), figure.unit, target, _met_text(figure))
            )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    right = {2}  # numbers line up on the right

    def line(row: tuple[str, ...]) -> str:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def render_notes(outcomes: list[Outcome]) -> str:
    lines: list[str] = []
    for outcome in outcomes:
        reason = outcome.reason.strip()
        if outcome.status != "ok":
            # The last line of a traceback names the exception; the whole traceback went to stderr.
            lines.append(f"  {outcome.name}: {outcome.status}: {reason.splitlines()[-1] if reason else ''}")
        lines += [f"  {outcome.name} / {figure.name}: {figure.note}" for figure in outcome.figures if figure.note]
    return "notes:\n" + "\n".join(lines) if lines else ""


def render_summary(outcomes: list[Outcome]) -> str:
    counts = {status: sum(o.status == status for o in outcomes) for status in ("ok", "skipped", "deselected", "error")}
    figures = [f for o in outcomes for f in o.figures]
    met = sum(f.met is True for f in figures)
    missed = sum(f.met is False for f in figures)
    ran = ", ".join(f"{count} {status}" for status, count in counts.items() if count)
    return f"{len(outcomes)} benchmark(s): {ran}; targets: {met} met, {missed} missed"


def to_json(outcomes: list[Outcome], *, quick: bool, ci: bool) -> dict[str, Any]:
    def figure_json(figure: Figure) -> dict[str, Any]:
        target = None if figure.target is None else {"op": figure.target.op, "bound": figure.target.bound}
        return {
            "name": figure.name,
            "value": figure.value,
            "unit": figure.unit,
            "target": target,
            "met": figure.met,
            "note": figure.note,
        }

    return {
        "schema_version": 1,
        "mode": "quick" if quick else "full",
        "ci": ci,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "benchmarks": [
            {
                "name": o.name,
                "summary": o.summary,
                "status": o.status,
                "reason": o.reason,
                "seconds": round(o.seconds, 3),
                "figures": [figure_json(f) for f in o.figures],
            }
            for o in outcomes
        ],
    }


def default_cache() -> Path:
    named = os.environ.get(CACHE_ENV_VAR)
    return Path(named) if named else Path(tempfile.gettempdir()) / "data-designer-slurm-benchmarks"


def parse_args(argv: list[str] | None, available: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/run.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: all of {available})")
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats: what CI runs")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write every figure to this JSON file")
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        metavar="PREREQUISITE",
        help="deselect benchmarks needing this prerequisite (e.g. slurm-cluster); repeatable",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help=f"persistent fixtures (default: ${CACHE_ENV_VAR} or $TMPDIR/data-designer-slurm-benchmarks)",
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks and their prerequisites, run nothing")
    args = parser.parse_args(argv)
    args.names = [name.removeprefix("bench_").removesuffix(".py") for name in args.names]
    unknown = sorted(set(args.names) - set(available))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; available: {available}")
    return args


def list_benchmarks(names: list[str]) -> int:
    status = 0
    for name in names:
        try:
            benchmark = load(name)
        except Exception as exc:
            print(f"{name}: cannot load: {exc!r}")
            status = 1
            continue
        needs = ", ".join(p.name for p in benchmark.requires) or "nothing"
        print(f"{name}: {benchmark.summary} (needs: {needs})")
    return status


def main(argv: list[str] | None = None) -> int:
    available = discover()
    args = parse_args(argv, available)
    names: list[str] = args.names or available
    if args.list:
        return list_benchmarks(names)
    ci = in_ci()
    cache: Path = (args.cache_dir or default_cache()).absolute()
    cache.mkdir(parents=True, exist_ok=True)
    mode = "quick" if args.quick else "full"
    print(
        f"benchmarks ({mode} mode, Python {platform.python_version()}, cache {cache}{', CI' if ci else ''})",
        file=sys.stderr,
    )
    outcomes: list[Outcome] = []
    for name in names:
        print(f"  {name} ...", end="", flush=True, file=sys.stderr)
        outcome = run_one(name, quick=args.quick, cache=cache, without=frozenset(args.without), ci=ci)
        print(f" {outcome.status} ({outcome.seconds:.1f} s)", file=sys.stderr)
        if outcome.status == "error":
            print(outcome.reason, file=sys.stderr)
        outcomes.append(outcome)
    print(render_table(outcomes))
    notes = render_notes(outcomes)
    if notes:
        print(notes)
    print(render_summary(outcomes))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(to_json(outcomes, quick=args.quick, ci=ci), indent=2) + "\n", encoding="utf-8")
    return 1 if any(o.status == "error" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
