"""Import cost of ``data-designer --help`` with and without the extension, and of every ``slurm ... --help``.

Each command runs in a fresh interpreter through ``_cli_probe.py`` (what the console script does,
plus a record of ``sys.modules`` at exit), with HOME in a scratch directory. Wall time is the
median of N runs (quick: 1, full: 5) after one unmeasured warm-up run per interpreter.

Targets: every ``slurm ... --help`` imports at most 100 modules more than ``data-designer --help``
in the same environment, and none of the heavy modules below that the host's own ``--help``
(without the extension) does not already import; ``data-designer --help`` imports nothing of ours.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks._harness import UV, Benchmark, Figure, Prerequisite, RunContext, Target
from benchmarks._host_venv import host_only_python

HEAVY_MODULES = ("data_designer.slurm.runtime", "data_designer.config", "pandas", "numpy", "pyarrow")
"""Modules no ``--help`` of ours may pull in (each with its submodules)."""
MAX_MODULES_OVER_ROOT = 100
OURS = "data_designer.slurm"
PROBE = Path(__file__).with_name("_cli_probe.py")


def _extension_missing() -> str | None:
    for module in ("data_designer.cli.main", "data_designer.slurm.cli"):
        try:
            spec = importlib.util.find_spec(module)
        except ImportError:
            spec = None
        if spec is None:
            return f"{module} is not importable by {sys.executable} (run the benchmarks through 'uv run')"
    return None


EXTENSION = Prerequisite(
    name="extension",
    description="the host CLI and data-designer-slurm installed in the running interpreter (the workspace venv)",
    check=_extension_missing,
)


@dataclass(frozen=True)
class Measurement:
    wall_seconds: float
    modules: frozenset[str]
    max_rss_kib: int


def _probe_env(home: Path) -> dict[str, str]:
    # The host reads its settings from HOME (and writes ~/.data-designer); nothing from the caller leaks in.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DATA_DESIGNER", "XDG_"))}
    env.update(HOME=str(home), COLUMNS="100", NO_COLOR="1")
    return env


def measure(python: Path, args: Sequence[str], *, home: Path, repeats: int) -> Measurement:
    """Run ``data-designer ARGS`` ``repeats`` times under ``python``; median wall time, modules of the last run."""
    home.mkdir(parents=True, exist_ok=True)
    out = home.parent / "probe.json"
    command = [str(python), "-I", str(PROBE), str(out), *args]
    samples: list[float] = []
    record: dict[str, object] = {}
    for _ in range(max(1, repeats)):
        out.unlink(missing_ok=True)
        start = time.perf_counter()
        completed = subprocess.run(
            command, cwd=home, env=_probe_env(home), capture_output=True, text=True, timeout=120, check=False
        )
        samples.append(time.perf_counter() - start)
        if completed.returncode != 0 or not out.is_file():
            raise RuntimeError(f"data-designer {' '.join(args)} exited {completed.returncode}:\n{completed.stderr}")
        record = json.loads(out.read_text(encoding="utf-8"))
    modules = record["modules"]
    rss = record["max_rss_kib"]
    if not isinstance(modules, list) or not isinstance(rss, int):
        raise RuntimeError(f"unexpected probe record from {python}: {record!r:.300}")
    return Measurement(statistics.median(samples), frozenset(str(m) for m in modules), rss)


def command_paths(command: object, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every command path of a Click command tree, parents first (a group's sub-commands live in ``.commands``)."""
    paths = [path]
    children = getattr(command, "commands", None)
    if isinstance(children, Mapping):
        for name in sorted(children):
            paths.extend(command_paths(children[name], (*path, str(name))))
    return paths


def slurm_command_paths() -> list[tuple[str, ...]]:
    from data_designer.slurm.cli import command

    return command_paths(command(), ("slurm",))


def matching(modules: Iterable[str], prefixes: Sequence[str]) -> set[str]:
    return {m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)}


def summarize(modules: Iterable[str], limit: int = 8) -> str:
    """Module names grouped by package (three levels under data_designer, one elsewhere), largest first."""
    groups = Counter(".".join(m.split(".")[: 3 if m.startswith("data_designer.") else 1]) for m in modules)
    parts = [f"{name} ({count})" for name, count in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))]
    shown = ", ".join(parts[:limit])
    return shown + (f", ... {len(parts) - limit} more" if len(parts) > limit else "")


def summarize_heavy(modules: Iterable[str]) -> str:
    """Module names grouped by the heavy module they belong to."""
    groups = Counter(next(p for p in HEAVY_MODULES if m == p or m.startswith(p + ".")) for m in modules)
    return ", ".join(f"{name} ({count} modules)" for name, count in sorted(groups.items()))


def _basic(label: str, m: Measurement, modules_note: str = "") -> list[Figure]:
    return [
        Figure(f"{label}: wall", m.wall_seconds * 1000, "ms"),
        Figure(f"{label}: modules", len(m.modules), "modules", note=modules_note),
        Figure(f"{label}: peak RSS", m.max_rss_kib / 1024, "MiB"),
    ]


def _heavy(label: str, m: Measurement, inherited: set[str]) -> Figure:
    heavy = matching(m.modules, HEAVY_MODULES) - inherited
    note = f"imports {summarize_heavy(heavy)}" if heavy else ""
    return Figure(f"{label}: heavy modules", len(heavy), "modules", Target.at_most(0), note)


def run(ctx: RunContext) -> list[Figure]:
    repeats = ctx.repeats(quick=1, full=5)
    with_ext = Path(sys.executable)
    host_only = host_only_python(ctx.cache, host_version=importlib.metadata.version("data-designer"))
    home_host, home_ext = ctx.scratch / "host" / "home", ctx.scratch / "ext" / "home"
    for python, home in ((host_only, home_host), (with_ext, home_ext)):
        measure(python, ["--help"], home=home, repeats=1)  # warm-up: bytecode, page cache, ~/.data-designer

    base = measure(host_only, ["--help"], home=home_host, repeats=repeats)
    inherited = matching(base.modules, HEAVY_MODULES)
    inherited_note = f"the host itself imports {summarize_heavy(inherited)}; not counted as heavy below"
    figures = _basic("--help (host only)", base, inherited_note if inherited else "")

    root = measure(with_ext, ["--help"], home=home_ext, repeats=repeats)
    ours = matching(root.modules, [OURS])
    added = root.modules - base.modules
    figures += _basic("--help", root)
    figures += [
        Figure("--help: modules over host only", len(added), "modules", note=summarize(added)),
        Figure("--help: data_designer.slurm modules", len(ours), "modules", Target.at_most(0), summarize(ours)),
        _heavy("--help", root, inherited),
    ]
    for path in slurm_command_paths():
        label = " ".join(path) + " --help"
        m = measure(with_ext, [*path, "--help"], home=home_ext, repeats=repeats)
        extra = m.modules - root.modules
        figures += _basic(label, m)
        figures += [
            Figure(
                f"{label}: modules over --help",
                len(extra),
                "modules",
                Target.at_most(MAX_MODULES_OVER_ROOT),
                summarize(extra),
            ),
            _heavy(label, m, inherited),
        ]
    return figures


BENCHMARK = Benchmark(
    summary="wall time, modules and memory of 'data-designer [slurm ...] --help', with and without the extension",
    run=run,
    requires=(UV, EXTENSION),
)
