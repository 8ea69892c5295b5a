"""``python -m data_designer.slurm.planner compile|expand``: plans from files, with only the planner installed.

    python -m data_designer.slurm.planner compile RUN [--profile P] [--cluster C] [--gpus-per-node N]
        [--max-array-size N] [--json] [--out DIR [--force]]
    python -m data_designer.slurm.planner expand BENCH [same options]

This is the shell around the pure planner: it reads the run (or benchmark) file, the files they
name and the profile (``--profile``, else ``$DATA_DESIGNER_SLURM_PROFILE``), plans as a dry run
(no Slurm, no workspace, no image registry: images named from the registry and ``gpus_per_node:
auto`` without ``--gpus-per-node`` are reported as unresolved), and prints a summary or, with
``--json``, the plan. ``--out DIR`` writes what ``data-designer slurm execute|benchmark run --dry-run
--out`` writes: ``plan.json`` (canonical JSON), and while nothing is unresolved ``allocation.sbatch`` and
``submission.json`` (the submission unit bound to a placeholder run: run id ``dry-run``, run directory
DIR, job names ``dd-<run name>-dry-run-c<chunk>``); for a benchmark ``benchmark.json`` and those files
per child under ``children/<index>-<child id>/`` (job names ``dd-<benchmark>-<child id>-dry-run-c<chunk>``).
It refuses an existing non-empty DIR unless ``--force`` (files of the same names are then replaced,
others kept).

Errors: one line per problem on stderr (``error: file:line: key: message (fix: ...)``), or the error
as one JSON object with ``--json``; the exit code is the error category's (2 invalid input, 3 not
found, 4 conflict, 1 internal).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from data_designer.slurm.contracts import (
    PROFILE_ENV_VAR,
    BenchmarkPlan,
    BenchmarkSpec,
    ClusterFacts,
    ClusterProfile,
    ConflictError,
    ExecutionPlan,
    InternalError,
    InvalidInputError,
    Problem,
    RunSpec,
    SlurmExtensionError,
    Unresolved,
)
from data_designer.slurm.planner._compile import compile
from data_designer.slurm.planner._document import Document, parse_document
from data_designer.slurm.planner._dry_run import DryRunFile, benchmark_files, plan_files
from data_designer.slurm.planner._expand import expand, is_run_key
from data_designer.slurm.planner._files import read_text, write_text_atomic
from data_designer.slurm.planner._inputs import load_base_run, resolve_config
from data_designer.slurm.planner._profile import load_profile, select_cluster
from data_designer.slurm.planner._validation import validate_document

PROG = "python -m data_designer.slurm.planner"


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed its usage error (code 2) or the help (code 0)
        return int(exc.code or 0)
    as_json: bool = args.json
    try:
        if args.command == "compile":
            plan = _compile(args)
            written = _write_out(args, lambda out: plan_files(plan, out)) if args.out else []
            out.write(plan.model_dump_json() + "\n" if as_json else _compile_summary(plan, written))
        else:
            bench = _expand(args)
            written = _write_out(args, lambda out: benchmark_files(bench, out)) if args.out else []
            out.write(bench.model_dump_json() + "\n" if as_json else _expand_summary(bench, written))
    except SlurmExtensionError as exc:
        return _fail(exc.with_operation(f"planner.{args.command}"), as_json=as_json, debug=args.debug, err=err)
    except Exception as exc:  # the CLI boundary: anything unexpected becomes one internal-error line
        internal = InternalError(
            f"internal error: {type(exc).__name__}: {exc}",
            operation=f"planner.{args.command}",
            hint="re-run with --debug and report the traceback",
        )
        internal.__cause__ = exc
        return _fail(internal, as_json=as_json, debug=args.debug, err=err)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Plan data-designer-slurm runs and benchmarks offline.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{compile,expand}")
    for name, target, help_text in (
        ("compile", "RUN", "compile a run file into an execution plan"),
        ("expand", "BENCH", "expand a benchmark file into child runs, each with its plan"),
    ):
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("file", metavar=target, help=f"the {target.lower()} file (YAML or JSON)")
        sub.add_argument("--profile", help=f"the profile file (default: ${PROFILE_ENV_VAR})")
        sub.add_argument("--cluster", help="the profile's cluster (default: its default_cluster, or its only one)")
        sub.add_argument(
            "--gpus-per-node", type=_positive, metavar="N", help="GPUs per node, when the profile says 'auto'"
        )
        sub.add_argument(
            "--max-array-size", type=_positive, metavar="N", default=1001, help="Slurm MaxArraySize (default 1001)"
        )
        sub.add_argument("--json", action="store_true", help="print the plan as JSON (errors as JSON on stderr)")
        sub.add_argument("--out", metavar="DIR", help="write the plan, batch scripts and submission units here")
        sub.add_argument("--force", action="store_true", help="write into a non-empty --out DIR")
        sub.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _fail(exc: SlurmExtensionError, *, as_json: bool, debug: bool, err: TextIO) -> int:
    if debug:
        traceback.print_exception(exc.__cause__ or exc, file=err)
    if as_json:
        err.write(exc.info.model_dump_json() + "\n")
    else:
        for line in exc.info.render_lines():
            err.write(f"error: {line}\n")
    return int(exc.exit_code)


# --- reading ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    """The profile cluster and the dry-run facts a command plans against."""

    name: str
    cluster: ClusterProfile
    facts: ClusterFacts


def _read(path: str, *, what: str) -> str:
    """The text of a regular file of at most ``MAX_INPUT_FILE_BYTES`` (the store's reader: :func:`read_text`)."""
    return read_text(path, operation="", what=what)  # main() stamps planner.<command> on whatever escapes


def _target(args: argparse.Namespace) -> _Target:
    path: str | None = args.profile or os.environ.get(PROFILE_ENV_VAR) or None
    if path is None:
        raise InvalidInputError(
            "no profile was given", code="profile_missing", hint=f"pass --profile FILE or set ${PROFILE_ENV_VAR}"
        )
    profile = load_profile(_read(path, what="profile"), file=path)
    name, cluster = select_cluster(profile, args.cluster, file=path, operation="")  # main() stamps the operation
    facts = ClusterFacts(gpus_per_node=args.gpus_per_node, max_array_size=args.max_array_size)
    return _Target(name=name, cluster=cluster, facts=facts)


def _load_run(path: str) -> tuple[RunSpec, Document]:
    document = parse_document(_read(path, what="run file"), file=path)
    return validate_document(RunSpec, document, operation="run.load"), document


def _config(run: RunSpec) -> Document:
    path = run.data_designer.config
    return resolve_config(run, None if path is None else _read(path, what="Data Designer config"))


def _compile(args: argparse.Namespace) -> ExecutionPlan:
    target = _target(args)
    run, document = _load_run(args.file)
    config = _config(run)
    try:
        return compile(run, target.cluster, cluster=target.name, config=config, facts=target.facts, images=None)
    except InvalidInputError as exc:
        if not exc.problems:
            raise
        located = [_locate(problem, document) for problem in exc.problems]
        raise InvalidInputError.from_problems(located, operation="plan.compile", file=document.file) from exc


def _expand(args: argparse.Namespace) -> BenchmarkPlan:
    target = _target(args)
    source = parse_document(_read(args.file, what="benchmark file"), file=args.file)
    benchmark = validate_document(BenchmarkSpec, source, operation="benchmark.load")
    base_source: Document | None = None
    if benchmark.base.run is not None:
        base, base_source = _load_run(benchmark.base.run)
    else:
        base = load_base_run(benchmark, file=args.file, source=source)
    return expand(
        benchmark,
        target.cluster,
        cluster=target.name,
        base=base,
        config=_config(base),
        facts=target.facts,
        images=None,
        source=source,
        base_source=base_source,
    )


def _locate(problem: Problem, document: Document) -> Problem:
    """A problem compile found in the run (no file yet): in the run file, at the line of its key.

    Problems in another file (the Data Designer config) or at a profile key keep where they are."""
    if problem.file is not None or (problem.key_path is not None and not is_run_key(problem.key_path)):
        return problem
    line = document.line_of(problem.key_path or (), root=False)
    return problem.model_copy(update={"file": document.file, "line": line})


# --- writing ----------------------------------------------------------------------------------------------------------


def _prepare_out(directory: str, *, force: bool) -> Path:
    out = Path(directory).absolute()
    if out.exists() and not out.is_dir():
        raise ConflictError(
            f"--out {directory!r} exists and is not a directory", code="out_not_a_directory", hint="name a directory"
        )
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ConflictError(
            f"--out {directory!r} is not empty",
            code="out_not_empty",
            hint="name an empty or new directory, or pass --force to replace the files written there",
        )
    return out


def _write_out(args: argparse.Namespace, files_for: Callable[[str], Sequence[DryRunFile]]) -> list[Path]:
    """Write the files ``files_for(out directory)`` renders into ``--out``; the paths written."""
    out = _prepare_out(args.out, force=args.force)
    files = files_for(str(out))
    # The store's writer: temporary file, fsync, link or rename; modes of the directory (private unless setgid).
    for name, data in files:
        write_text_atomic(out / name, data.decode("utf-8"), overwrite=args.force, operation="")
    return [out / name for name, _ in files]


# --- summaries --------------------------------------------------------------------------------------------------------


def _hours(value: float | None) -> str:
    return "unknown until resolved" if value is None else f"{value:g}"


def _unresolved_lines(items: Sequence[Unresolved]) -> list[str]:
    return [f"  - {item.what} at {item.key_path}: {item.detail} (fix: {item.hint})" for item in items]


def _written_lines(written: Sequence[Path]) -> list[str]:
    if not written:
        return []
    root = os.path.commonpath([str(p) for p in written]) if len(written) > 1 else str(written[0].parent)
    return [f"wrote {len(written)} file(s) under {root}"]


def _compile_summary(plan: ExecutionPlan, written: Sequence[Path]) -> str:
    allocation = plan.allocation
    nodes = "unknown" if allocation.nodes is None else str(allocation.nodes)
    records = sum(shard.records for shard in plan.shards)
    lines = [
        f"plan {plan.digest}",
        f"run {plan.run.name!r} on cluster {plan.cluster!r}",
        f"shards: {len(plan.shards)} ({records} records), array chunks: {len(plan.submission.chunks)}",
        f"allocation per shard: {nodes} node(s), {allocation.gpus} GPU(s), {len(allocation.replicas)} replica(s), "
        f"time limit {allocation.time_limit}, partition {allocation.partition}"
        + (", exclusive" if allocation.exclusive else ""),
        f"upper-bound GPU-hours: {_hours(plan.gpu_hours_upper_bound)}",
    ]
    if plan.unresolved:
        lines.append("unresolved (blocks submission):")
        lines.extend(_unresolved_lines(plan.unresolved))
    for warning in plan.warnings:
        where = f"{warning.key_path}: " if warning.key_path else ""
        lines.append(f"warning: {where}{warning.message}")
    lines.extend(_written_lines(written))
    return "\n".join(lines) + "\n"


def _expand_summary(bench: BenchmarkPlan, written: Sequence[Path]) -> str:
    spec = bench.benchmark
    cases = len(bench.children) // spec.repeats
    lines = [
        f"benchmark {spec.name!r}: {len(bench.children)} children ({cases} case(s) x {spec.repeats} repeat(s))",
        f"digest {bench.digest}",
        f"exclusive: {'yes' if bench.exclusive else 'no'}, at most {bench.max_concurrent_children} at once",
        f"upper-bound GPU-hours: {_hours(bench.gpu_hours_upper_bound)}",
    ]
    if bench.unresolved:
        lines.append("unresolved (blocks submission):")
        lines.extend(_unresolved_lines(bench.unresolved))
    lines.append("children:")
    for child in bench.children:
        nodes = child.plan.allocation.nodes
        case = ", ".join(f"{label}={value!r}" for label, value in child.case) or "(base run)"
        lines.append(
            f"  {child.index:>4}  {child.child_id}  repeat {child.repeat}  {child.records} records  "
            f"{'?' if nodes is None else nodes} node(s)  {child.plan.allocation.gpus} GPU(s)  "
            f"plan {child.plan_digest[:16]}  {case}"
        )
    lines.extend(_written_lines(written))
    return "\n".join(lines) + "\n"
